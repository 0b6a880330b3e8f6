// What the refund crash suites (test/refunds/crash*.test.ts) share.

import {
  type Address,
  createWalletClient,
  erc20Abi,
  type Hex,
  http,
  type PublicClient,
  parseUnits,
} from "viem";
import type { BundlerClient } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { expect } from "vitest";
import { type Devnet, mintToken } from "../../src/devnet/chain.ts";
import type { Database } from "../../src/platform/db/database.ts";
import {
  api,
  holdingProxy as holdingProxyOf,
  newStore as newStoreOf,
  useCrashDevnet,
} from "./crash-harness.ts";
import type { DevnetClients } from "./devnet-clients.ts";
import { untilDefined } from "./poll.ts";
import type { Json, ServiceProcess } from "./service-process.ts";

// Crash safety of refunds and returns (D19: they go through the payout operation, D6: recorded
// before broadcast, reconciled after a restart) with the real process (`node src/main.ts`) killed
// -9 and restarted on the same data:
//  - EOA refund: an RPC proxy holds the refund's broadcast (its transaction is signed and recorded,
//    the node never gets it); the process is killed; after a restart the recorded transaction is
//    sent and the refund ends completed exactly once, the payment's refundedAmount counted once.
//  - The return of an unmatched transfer, the same way.
//  - Smart wallet refund: its user operation is recorded and in a bundle that is not mined (no
//    blocks); killed; blocks again and a restart: completed once, by that operation.
// Each wallet holds more than the refund, so a refund sent twice would be paid (and show in the
// exact balances) rather than revert for want of funds.

export const ADMIN = "refunds-crash-admin-secret-0123456789";
export const TX_HASH = /^0x[0-9a-f]{64}$/;

export const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
export const same = (a: unknown, b: string) => typeof a === "string" && a.toLowerCase() === b.toLowerCase();

export {
  api,
  bundlerLog,
  cleanups,
  MASTER_KEY,
  pendingWhere,
  restoreMining,
  rpc,
  type Store,
  startServer,
  stopMining,
} from "./crash-harness.ts";

export let devnet: Devnet;
export let env: Record<string, string>;
export let aa: NonNullable<Devnet["aa"]>;
export let chain: PublicClient;
export let bundler: BundlerClient;
export let clients: DevnetClients;

// ---------------------------------------------------------------------------------------------
// Requests

/** A request that the process is killed under: it resolves with its status, or the error. */
export function hangingPost(server: ServiceProcess, path: string, token: string, body: Json, key: string) {
  return fetch(`${server.baseUrl}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify(body),
  }).then(
    (res) => ({ status: res.status }),
    (err: Error) => ({ error: err.message }),
  );
}

// ---------------------------------------------------------------------------------------------
// Chain helpers

export interface Payer {
  address: Address;
  payUsdc(to: string, units: bigint): Promise<Hex>;
}

/** A fresh payer holding 1,000 USDC and 10 ETH. */
export async function newPayer(): Promise<Payer> {
  const account = privateKeyToAccount(generatePrivateKey());
  const wallet = createWalletClient({ account, chain: devnet.chain, transport: http(devnet.rpcUrl) });
  await mintToken(devnet, "USDC", account.address, "1000");
  await clients.fund(account.address, { ETH: "10" });
  return {
    address: account.address,
    async payUsdc(to, units) {
      const hash = await wallet.writeContract({
        address: devnet.tokens.USDC,
        abi: erc20Abi,
        functionName: "transfer",
        args: [to as Address, units],
      });
      const receipt = await chain.waitForTransactionReceipt({ hash });
      expect(receipt.status).toBe("success");
      return hash;
    },
  };
}

export const usdc = (address: string) => clients.usdcBalance(address);
export const sentCount = (address: string) => chain.getTransactionCount({ address: address as Address });

/** A store of the harness's, its folder named for this suite. */
export const newStore = () => newStoreOf("refunds-crash-");

/** The harness's proxy holding the first broadcast of the wallet it is armed with. */
export const holdingProxy = () =>
  holdingProxyOf({ nth: 1, what: "the wallet's broadcast to be held", whenHeldMs: 60_000 });

// ---------------------------------------------------------------------------------------------
// The service

export interface Setup {
  workspaceId: string;
  eoa: Address;
  liveKey: string;
}

export async function newWorkspace(server: ServiceProcess): Promise<Setup> {
  const created = await api(server, "POST", "/api/v1/workspaces", ADMIN, {
    name: "Refunds Crash Co",
    settlementAddress: randomAddress(),
  });
  expect(created.status, JSON.stringify(created.json)).toBe(201);
  const workspace = created.json.workspace as { id: string; eoa: { address: Address } };
  const liveKey = (created.json.apiKeys as { live: { key: string } }).live.key;
  return { workspaceId: workspace.id, eoa: workspace.eoa.address, liveKey };
}

export async function paymentOf(server: ServiceProcess, setup: Setup, id: string): Promise<Json> {
  const res = await api(server, "GET", `/api/v1/payments/${id}`, setup.liveKey);
  expect(res.status, JSON.stringify(res.json)).toBe(200);
  return res.json.payment as Json;
}

/** A USDC payment of `amount` created, paid by `payer` and forwarded. */
export async function forwardedPayment(
  server: ServiceProcess,
  setup: Setup,
  payer: Payer,
  amount: string,
  walletType?: "smart_wallet",
) {
  const merchant = randomAddress();
  const created = await api(server, "POST", "/api/v1/payments", setup.liveKey, {
    tokenSymbol: "USDC",
    amount,
    merchantWallet: merchant,
    ...(walletType ? { walletType } : {}),
  });
  expect(created.status, JSON.stringify(created.json)).toBe(201);
  const id = (created.json.payment as { id: string }).id;
  const receivingAddress = created.json.receivingAddress as Address;
  await payer.payUsdc(receivingAddress, parseUnits(amount, 6));
  const payment = await untilDefined(
    `payment ${id} to be forwarded`,
    async () => {
      const p = await paymentOf(server, setup, id);
      if (p.status === "failed") throw new Error(`payment failed: ${String(p.failureReason)}`);
      return p.status === "forwarded" ? p : undefined;
    },
    120_000,
  );
  expect(same(payment.payerAddress, payer.address)).toBe(true);
  return { id, merchant, receivingAddress };
}

export async function refundsOf(server: ServiceProcess, setup: Setup, paymentId: string) {
  const res = await api(server, "GET", `/api/v1/payments/${paymentId}/refunds`, setup.liveKey);
  expect(res.status, JSON.stringify(res.json)).toBe(200);
  return res.json as { refunds: Json[]; total: number };
}

/**
 * The workspace's refunds and returns (payouts table; its payments' settlements are transfers
 * too, of their own kind) and their chain transactions and events.
 */
export async function transfersOut(database: Database, setup: Setup) {
  const rows = await database.db
    .selectFrom("payouts")
    .select([
      "id",
      "kind",
      "status",
      "tx_hash",
      "payment_id",
      "unmatched_transfer_id",
      "user_op_hash",
      "user_operation",
      "amount",
    ])
    .where("workspace_id", "=", setup.workspaceId)
    .where("kind", "in", ["refund", "return"])
    .execute();
  const sent = await database.db
    .selectFrom("chain_transactions")
    .select(["tx_hash", "status", "purpose", "payout_id", "amount"])
    .where("purpose", "in", ["refund", "return"])
    .where((eb) => eb(eb.fn("lower", ["from_address"]), "=", setup.eoa.toLowerCase()))
    .execute();
  const events = await database.db
    .selectFrom("outbox_events")
    .select(["event_type", "payload"])
    .where("workspace_id", "=", setup.workspaceId)
    .where("event_type", "in", ["refund.completed", "refund.failed"])
    .orderBy("id")
    .execute();
  return { rows, sent, events };
}

export const refundedAmountOf = (database: Database, paymentId: string) =>
  database.db
    .selectFrom("payments")
    .select(["refunded_amount"])
    .where("id", "=", paymentId)
    .executeTakeFirstOrThrow()
    .then((row) => String(row.refunded_amount));

// ---------------------------------------------------------------------------------------------

/** A devnet (with account abstraction) for the file; what each test started is stopped after it. */
export function useRefundsCrash(): void {
  useCrashDevnet(ADMIN, (d) => {
    ({ devnet, aa, env, clients, bundler } = d);
    chain = clients.chain;
  });
}
