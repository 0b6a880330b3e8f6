// The splits crash suites' shared harness: one crash devnet per file (useCrashDevnet), a workspace
// with three splits, its payments, and what a settlement must have paid and recorded exactly once.

import { sql } from "kysely";
import { type Address, type PublicClient, parseUnits } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { expect } from "vitest";
import type { Devnet } from "../../src/devnet/chain.ts";
import type { Database } from "../../src/platform/db/database.ts";
import {
  api,
  holdingProxy as holdingProxyOf,
  newStore as newStoreOf,
  rpc,
  useCrashDevnet,
} from "./crash-harness.ts";
import type { DevnetClients } from "./devnet-clients.ts";
import { untilDefined } from "./poll.ts";
import type { Json, ServiceProcess } from "./service-process.ts";

export const ADMIN = "splits-crash-admin-secret-0123456789";
export const TX_HASH = /^0x[0-9a-f]{64}$/;
export const BPS = [5000, 2500, 1] as const;
export const EXTRA_USDC = "100";

export const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
export const same = (a: string | null | undefined, b: string) => a?.toLowerCase() === b.toLowerCase();

/** D15 by hand: fee half up at 150 bps, net = gross − fee, each split floored, the merchant the rest. */
export function carveByHand(gross: bigint, bps: readonly number[]) {
  const fee = (gross * 150n + 5_000n) / 10_000n;
  const net = gross - fee;
  const splits = bps.map((b) => (net * BigInt(b)) / 10_000n);
  const merchant = splits.reduce((rest, part) => rest - part, net);
  return { gross, fee, net, splits, merchant };
}

export let devnet: Devnet;
export let aa: NonNullable<Devnet["aa"]>;
export let chain: PublicClient;
export let fund: DevnetClients["fund"];
/** The workspace's own money, credited with no transaction (devnet-credit.ts). */
export let credit: DevnetClients["credit"];
export let sendUsdc: DevnetClients["sendUsdc"];
export let usdcBalance: DevnetClients["usdcBalance"];

/** The suite's crash devnet (one per file), its clients in this module's bindings. */
export function useSplitsCrashDevnet(): void {
  useCrashDevnet(ADMIN, (d) => {
    ({ devnet, aa } = d);
    ({ chain, fund, credit, sendUsdc, usdcBalance } = d.clients);
  });
}

/** A store of the harness's, its folder named for this suite. */
export const newStore = () => newStoreOf("splits-crash-");

// ---------------------------------------------------------------------------------------------
// A workspace with three splits, and its payments

export interface Setup {
  workspaceId: string;
  eoa: Address;
  liveKey: string;
  splits: Array<{ id: string; destination: string }>;
}

export async function workspaceWithSplits(server: ServiceProcess): Promise<Setup> {
  const created = await api(server, "POST", "/api/v1/workspaces", ADMIN, {
    name: "Splits Crash Co",
    settlementAddress: randomAddress(),
  });
  expect(created.status, JSON.stringify(created.json)).toBe(201);
  const workspace = created.json.workspace as { id: string; eoa: { address: Address } };
  const liveKey = (created.json.apiKeys as { live: { key: string } }).live.key;
  const put = await api(server, "PUT", "/api/v1/splits", liveKey, {
    enabled: true,
    splits: BPS.map((percentBps, i) => ({
      label: `split-${i}`,
      percentBps,
      destination: randomAddress(),
    })),
  });
  expect(put.status, JSON.stringify(put.json)).toBe(200);
  const splits = (put.json.splits as Array<{ id: string; destination: string }>).map((s) => ({
    id: s.id,
    destination: s.destination,
  }));
  return { workspaceId: workspace.id, eoa: workspace.eoa.address, liveKey, splits };
}

export async function createPayment(
  server: ServiceProcess,
  setup: Setup,
  amount: string,
  walletType?: "smart_wallet",
): Promise<{ id: string; merchant: Address; receivingAddress: Address; gross: bigint }> {
  const merchant = randomAddress();
  const created = await api(server, "POST", "/api/v1/payments", setup.liveKey, {
    tokenSymbol: "USDC",
    amount,
    merchantWallet: merchant,
    ...(walletType ? { walletType } : {}),
  });
  expect(created.status, JSON.stringify(created.json)).toBe(201);
  return {
    id: (created.json.payment as { id: string }).id,
    merchant,
    receivingAddress: created.json.receivingAddress as Address,
    gross: parseUnits(amount, 6),
  };
}

export async function paymentStatus(server: ServiceProcess, setup: Setup, id: string): Promise<Json> {
  const res = await api(server, "GET", `/api/v1/payments/${id}`, setup.liveKey);
  expect(res.status, JSON.stringify(res.json)).toBe(200);
  return res.json.payment as Json;
}

export async function waitForForwarded(server: ServiceProcess, setup: Setup, id: string, ms = 120_000) {
  return untilDefined(
    `payment ${id} to be forwarded`,
    async () => {
      const payment = await paymentStatus(server, setup, id);
      if (payment.status === "failed") throw new Error(`payment failed: ${String(payment.failureReason)}`);
      return payment.status === "forwarded" ? payment : undefined;
    },
    ms,
  );
}

/** The settlement legs recorded for a payment, in nonce order. */
export const legsOf = (database: Database, paymentId: string) =>
  database.db
    .selectFrom("chain_transactions")
    .select(["purpose", "tx_hash", "status", "nonce"])
    .where("payment_id", "=", paymentId)
    .orderBy("nonce")
    .execute();

/**
 * The payment's settlement as recorded: `settlement_user_op_hash` is the user operation recorded
 * for it, on its settlement transfer (migration 030) until the payment is forwarded with it.
 */
export const paymentRow = (database: Database, paymentId: string) =>
  database.db
    .selectFrom("payments as p")
    .leftJoin("payouts as s", "s.id", "p.settlement_transfer_id")
    .select([
      "p.status",
      "p.settlement_id",
      sql<string | null>`coalesce(p.settlement_user_op_hash, s.user_op_hash)`.as("settlement_user_op_hash"),
      "p.settlement_net_tx_hash",
    ])
    .where("p.id", "=", paymentId)
    .executeTakeFirstOrThrow();

export const eventsOf = (database: Database, workspaceId: string) =>
  database.db
    .selectFrom("outbox_events")
    .select(["event_type", "payload"])
    .where("workspace_id", "=", workspaceId)
    .orderBy("id")
    .execute();

/** Each destination's USDC balance is exactly its part of `payments` (summed). */
export async function expectPaidOnce(
  setup: Setup,
  payments: Array<{ merchant: Address; gross: bigint }>,
  treasuryBefore: bigint,
) {
  const carved = payments.map((p) => carveByHand(p.gross, BPS));
  for (const [i, p] of payments.entries())
    expect(await usdcBalance(p.merchant), "merchant").toBe(carved[i]?.merchant);
  for (const [i, split] of setup.splits.entries())
    expect(await usdcBalance(split.destination), `split ${i}`).toBe(
      carved.reduce((sum, c) => sum + (c.splits[i] ?? 0n), 0n),
    );
  expect((await usdcBalance(devnet.accounts.treasury.address)) - treasuryBefore, "treasury").toBe(
    carved.reduce((sum, c) => sum + c.fee, 0n),
  );
}

/** One settlement per payment in the API, its legs' transactions those recorded. */
export async function expectOneSettlement(
  server: ServiceProcess,
  setup: Setup,
  paymentId: string,
  txRefs: { merchant: string; splits: string[] },
) {
  const listed = await api(server, "GET", `/api/v1/settlements?paymentId=${paymentId}`, setup.liveKey);
  expect(listed.status).toBe(200);
  expect(listed.json.total).toBe(1);
  const [settlement] = listed.json.settlements as Array<Json & { splits: Json[] }>;
  expect(settlement).toMatchObject({
    paymentIds: [paymentId],
    txRef: txRefs.merchant,
    splits: setup.splits.map((split, i) => ({
      splitId: split.id,
      destination: split.destination,
      status: "sent",
      txRef: txRefs.splits[i],
    })),
  });
  return settlement as Json;
}

/** The outbox of the workspace: one forwarded, settlement.recorded and split.recorded each per payment. */
export function expectEventsOnce(events: Array<{ event_type: string; payload: unknown }>, payments: number) {
  const count = (kind: string) => events.filter((e) => e.event_type === kind).length;
  expect(count("payment.forwarded")).toBe(payments);
  expect(count("payment.failed")).toBe(0);
  expect(count("settlement.recorded")).toBe(payments);
  expect(count("split.recorded")).toBe(payments * BPS.length);
}

// ---------------------------------------------------------------------------------------------
// The node seen by the service: a proxy that can hold a wallet's broadcast

/** The harness's proxy, holding the `nth` broadcast of the wallet it is armed with. */
export const holdingProxy = (nth: number) =>
  holdingProxyOf({ nth, what: "the wallet's second broadcast", whenHeldMs: 120_000 });

/** Pays `gross` USDC (smallest units) to `to` from the devnet payer, awaited to a successful receipt. */
export async function payUsdc(to: Address, gross: bigint): Promise<void> {
  const receipt = await chain.waitForTransactionReceipt({ hash: await sendUsdc(to, gross) });
  expect(receipt.status).toBe("success");
}

/** Pays `gross` USDC to `to` with no blocks mined, then one block with it and three on top. */
export async function payWithoutFurtherBlocks(to: Address, gross: bigint): Promise<void> {
  const hash = await sendUsdc(to, gross);
  await rpc("evm_mine", []);
  // Three more at once (the service settles after 2 confirmations): nothing it sends after them is mined.
  await rpc("hardhat_mine", ["0x3"]);
  const receipt = await chain.getTransactionReceipt({ hash });
  expect(receipt.status).toBe("success");
}
