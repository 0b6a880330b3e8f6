import { type Address, type Hex, type PublicClient, parseUnits } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { type Devnet, mintToken } from "../../src/devnet/chain.ts";
import type { Database } from "../../src/platform/db/database.ts";
import {
  api,
  bundlerLog,
  holdingProxy as holdingProxyOf,
  newStore as newStoreOf,
  pendingWhere,
  restoreMining,
  rpc,
  startServer,
  stopMining,
  useCrashDevnet,
} from "../support/crash-harness.ts";
import type { DevnetClients } from "../support/devnet-clients.ts";
import { untilDefined } from "../support/poll.ts";
import { type Json, type ServiceProcess, stopService } from "../support/service-process.ts";

// Crash safety of a settlement with splits (D15) with the real process (`node src/main.ts`),
// killed -9 at the worst moments and restarted on the same data: every leg (the merchant's part,
// the fee, each split) is recorded before it is broadcast and unique per (payment, leg), so each
// destination is paid exactly once and the payment is forwarded with one settlement.
//  - EOA, between legs: the node gets the first leg (mined), the process is killed while the second
//    one's broadcast is held by an RPC proxy: the other legs are recorded, never broadcast.
//  - EOA, every leg broadcast and none mined (no blocks): killed, then blocks again.
//  - Smart wallet: the one user operation carrying every leg is in a bundle that is not mined.
//  - PostgreSQL only: two instances; the leader is killed between legs, the other one finishes;
//    or the leader is stopped (SIGSTOP) between legs past its lease, and continued.
// Each receiving wallet holds money of its own besides the payment, so a leg sent twice would be
// paid (and show in the exact balances) rather than revert for want of funds.
// The database is PGlite in DATA_DIR by default (read only while no process has it open), or a
// fresh database on the PostgreSQL server of DATABASE_URL.

const ADMIN = "splits-crash-admin-secret-0123456789";
const TX_HASH = /^0x[0-9a-f]{64}$/;
const BPS = [5000, 2500, 1] as const;
const EXTRA_USDC = "100";

const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
const same = (a: string | null | undefined, b: string) => a?.toLowerCase() === b.toLowerCase();

/** D15 by hand: fee half up at 150 bps, net = gross − fee, each split floored, the merchant the rest. */
function carveByHand(gross: bigint, bps: readonly number[]) {
  const fee = (gross * 150n + 5_000n) / 10_000n;
  const net = gross - fee;
  const splits = bps.map((b) => (net * BigInt(b)) / 10_000n);
  const merchant = splits.reduce((rest, part) => rest - part, net);
  return { gross, fee, net, splits, merchant };
}

let devnet: Devnet;
let aa: NonNullable<Devnet["aa"]>;
let chain: PublicClient;
let fund: DevnetClients["fund"];
let sendUsdc: DevnetClients["sendUsdc"];
let usdcBalance: DevnetClients["usdcBalance"];

useCrashDevnet(ADMIN, (d) => {
  ({ devnet, aa } = d);
  ({ chain, fund, sendUsdc, usdcBalance } = d.clients);
});

/** A store of the harness's, its folder named for this suite. */
const newStore = () => newStoreOf("splits-crash-");

// ---------------------------------------------------------------------------------------------
// A workspace with three splits, and its payments

interface Setup {
  workspaceId: string;
  eoa: Address;
  liveKey: string;
  splits: Array<{ id: string; destination: string }>;
}

async function workspaceWithSplits(server: ServiceProcess): Promise<Setup> {
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

async function createPayment(
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

async function paymentStatus(server: ServiceProcess, setup: Setup, id: string): Promise<Json> {
  const res = await api(server, "GET", `/api/v1/payments/${id}`, setup.liveKey);
  expect(res.status, JSON.stringify(res.json)).toBe(200);
  return res.json.payment as Json;
}

async function waitForForwarded(server: ServiceProcess, setup: Setup, id: string, ms = 120_000) {
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
const legsOf = (database: Database, paymentId: string) =>
  database.db
    .selectFrom("chain_transactions")
    .select(["purpose", "tx_hash", "status", "nonce"])
    .where("payment_id", "=", paymentId)
    .orderBy("nonce")
    .execute();

const paymentRow = (database: Database, paymentId: string) =>
  database.db
    .selectFrom("payments")
    .select(["status", "settlement_id", "settlement_user_op_hash", "settlement_net_tx_hash"])
    .where("id", "=", paymentId)
    .executeTakeFirstOrThrow();

const eventsOf = (database: Database, workspaceId: string) =>
  database.db
    .selectFrom("outbox_events")
    .select(["event_type", "payload"])
    .where("workspace_id", "=", workspaceId)
    .orderBy("id")
    .execute();

/** Each destination's USDC balance is exactly its part of `payments` (summed). */
async function expectPaidOnce(
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
async function expectOneSettlement(
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
function expectEventsOnce(events: Array<{ event_type: string; payload: unknown }>, payments: number) {
  const count = (kind: string) => events.filter((e) => e.event_type === kind).length;
  expect(count("payment.forwarded")).toBe(payments);
  expect(count("payment.failed")).toBe(0);
  expect(count("settlement.recorded")).toBe(payments);
  expect(count("split.recorded")).toBe(payments * BPS.length);
}

// ---------------------------------------------------------------------------------------------
// The node seen by the service: a proxy that can hold a wallet's broadcast

/** The harness's proxy, holding the `nth` broadcast of the wallet it is armed with. */
const holdingProxy = (nth: number) =>
  holdingProxyOf({ nth, what: "the wallet's second broadcast", whenHeldMs: 120_000 });

/** Pays `gross` USDC (smallest units) to `to` from the devnet payer, awaited to a successful receipt. */
async function payUsdc(to: Address, gross: bigint): Promise<void> {
  const receipt = await chain.waitForTransactionReceipt({ hash: await sendUsdc(to, gross) });
  expect(receipt.status).toBe("success");
}

/** Pays `gross` USDC to `to` with no blocks mined, then one block with it and three on top. */
async function payWithoutFurtherBlocks(to: Address, gross: bigint): Promise<void> {
  const hash = await sendUsdc(to, gross);
  await rpc("evm_mine", []);
  // Three more at once (the service settles after 2 confirmations): nothing it sends after them is mined.
  await rpc("hardhat_mine", ["0x3"]);
  const receipt = await chain.getTransactionReceipt({ hash });
  expect(receipt.status).toBe("success");
}

// ---------------------------------------------------------------------------------------------

describe("an EOA settlement with splits, the process killed -9", () => {
  it("between legs (the first mined, the others recorded, never broadcast): each destination is paid exactly once after a restart", async () => {
    const started = performance.now();
    const store = await newStore();
    const proxy = await holdingProxy(2);
    const first = await startServer(store, { LIVE_RPC_URL: proxy.url });
    const setup = await workspaceWithSplits(first);
    // Gas and money of its own, sent by the payer (not a payment: no pending one has the amount).
    await fund(setup.eoa, { USDC: EXTRA_USDC, ETH: "1" });
    const payment = await createPayment(first, setup, "123.456789");
    const carved = carveByHand(payment.gross, BPS);
    const treasuryBefore = await usdcBalance(devnet.accounts.treasury.address);

    proxy.arm(setup.eoa);
    await payUsdc(payment.receivingAddress, payment.gross);
    await proxy.whenHeld(first);
    // The second leg's broadcast is on its way to the node: kill now.
    await stopService(first.child, "SIGKILL");
    expect(await first.exited).toEqual({ code: null, signal: "SIGKILL" });
    proxy.drop();
    const killedAt = performance.now();

    // On chain: only the first leg (the merchant's part) was paid.
    expect(await usdcBalance(payment.merchant)).toBe(carved.merchant);
    for (const split of setup.splits) expect(await usdcBalance(split.destination)).toBe(0n);
    expect(await usdcBalance(devnet.accounts.treasury.address)).toBe(treasuryBefore);
    expect(await chain.getTransactionCount({ address: setup.eoa })).toBe(1);

    // In the database: every leg recorded, none with an outcome yet; the payment still confirmed.
    const left = await store.read(async (database) => ({
      legs: await legsOf(database, payment.id),
      payment: await paymentRow(database, payment.id),
    }));
    expect(left.payment).toMatchObject({ status: "confirmed", settlement_id: null });
    expect(left.legs.map((leg) => [leg.purpose, leg.status])).toEqual([
      ["settlement_net", "signed"],
      ["settlement_fee", "signed"],
      ...setup.splits.map((split) => [`split:${split.id}`, "signed"]),
    ]);
    const recorded = new Map(left.legs.map((leg) => [leg.purpose, leg.tx_hash]));
    // The node has the first leg only.
    for (const [i, leg] of left.legs.entries()) {
      const known = await rpc("eth_getTransactionByHash", [leg.tx_hash]);
      expect(known === null, leg.purpose).toBe(i > 0);
    }

    const second = await startServer(store);
    const forwarded = await waitForForwarded(second, setup, payment.id);
    const finishedAt = performance.now();
    expect(forwarded.settlementTxHashes).toEqual({
      net: recorded.get("settlement_net"),
      fee: recorded.get("settlement_fee"),
    });
    await expectPaidOnce(setup, [payment], treasuryBefore);
    expect(await usdcBalance(setup.eoa)).toBe(parseUnits(EXTRA_USDC, 6));
    // Five legs, five nonces: the recorded transactions were broadcast again, no new one signed.
    expect(await chain.getTransactionCount({ address: setup.eoa })).toBe(5);
    await expectOneSettlement(second, setup, payment.id, {
      merchant: recorded.get("settlement_net") as string,
      splits: setup.splits.map((split) => recorded.get(`split:${split.id}`) as string),
    });

    await stopService(second.child, "SIGTERM");
    expect(await second.exited, second.output()).toEqual({ code: 0, signal: null });
    const final = await store.read(async (database) => ({
      legs: await legsOf(database, payment.id),
      events: await eventsOf(database, setup.workspaceId),
    }));
    expect(final.legs.map((leg) => [leg.purpose, leg.status, leg.tx_hash])).toEqual(
      left.legs.map((leg) => [leg.purpose, "mined", leg.tx_hash]),
    );
    expectEventsOnce(final.events, 1);
    console.info(
      `[splits-crash] EOA between legs: killed after ${((killedAt - started) / 1000).toFixed(1)} s, forwarded ${((finishedAt - killedAt) / 1000).toFixed(1)} s after the kill (restart included)`,
    );
  }, 300_000);

  it("with every leg broadcast and none mined: after blocks resume and a restart, each destination is paid exactly once", async () => {
    const started = performance.now();
    const store = await newStore();
    const first = await startServer(store);
    const setup = await workspaceWithSplits(first);
    await fund(setup.eoa, { USDC: EXTRA_USDC, ETH: "1" });
    const payment = await createPayment(first, setup, "77.777777");
    const treasuryBefore = await usdcBalance(devnet.accounts.treasury.address);

    await stopMining();
    await payWithoutFurtherBlocks(payment.receivingAddress, payment.gross);
    const pending = await untilDefined(
      "the five legs in the node's pool",
      async () => {
        if (first.child.exitCode !== null) throw new Error(`the service exited\n${first.output()}`);
        const txs = await pendingWhere((tx) => same(tx.from, setup.eoa));
        return txs.length === 5 ? txs : undefined;
      },
      120_000,
    );
    await stopService(first.child, "SIGKILL");
    expect(await first.exited).toEqual({ code: null, signal: "SIGKILL" });
    const killedAt = performance.now();
    expect(await usdcBalance(payment.merchant)).toBe(0n);
    for (const split of setup.splits) expect(await usdcBalance(split.destination)).toBe(0n);

    const left = await store.read(async (database) => ({
      legs: await legsOf(database, payment.id),
      payment: await paymentRow(database, payment.id),
    }));
    expect(left.payment).toMatchObject({ status: "confirmed", settlement_id: null });
    expect(left.legs.map((leg) => leg.status)).toEqual(["signed", "signed", "signed", "signed", "signed"]);
    expect(new Set(left.legs.map((leg) => leg.tx_hash))).toEqual(new Set(pending.map((tx) => tx.hash)));

    // Blocks again (they are mined while the process is down), then the restart.
    await restoreMining();
    const second = await startServer(store);
    await waitForForwarded(second, setup, payment.id);
    const finishedAt = performance.now();
    await expectPaidOnce(setup, [payment], treasuryBefore);
    expect(await usdcBalance(setup.eoa)).toBe(parseUnits(EXTRA_USDC, 6));
    expect(await chain.getTransactionCount({ address: setup.eoa })).toBe(5);
    const recorded = new Map(left.legs.map((leg) => [leg.purpose, leg.tx_hash]));
    await expectOneSettlement(second, setup, payment.id, {
      merchant: recorded.get("settlement_net") as string,
      splits: setup.splits.map((split) => recorded.get(`split:${split.id}`) as string),
    });

    await stopService(second.child, "SIGTERM");
    expect(await second.exited, second.output()).toEqual({ code: 0, signal: null });
    const final = await store.read(async (database) => ({
      legs: await legsOf(database, payment.id),
      events: await eventsOf(database, setup.workspaceId),
    }));
    expect(final.legs.map((leg) => [leg.purpose, leg.status, leg.tx_hash])).toEqual(
      left.legs.map((leg) => [leg.purpose, "mined", leg.tx_hash]),
    );
    expectEventsOnce(final.events, 1);
    console.info(
      `[splits-crash] EOA legs pending: killed after ${((killedAt - started) / 1000).toFixed(1)} s, forwarded ${((finishedAt - killedAt) / 1000).toFixed(1)} s after the kill (restart included)`,
    );
  }, 300_000);
});

describe("a smart wallet settlement with splits, the process killed -9", () => {
  it("with its one operation in a bundle not mined yet: forwarded once after a restart, one operation for every leg", async () => {
    const started = performance.now();
    const store = await newStore();
    const first = await startServer(store);
    const setup = await workspaceWithSplits(first);
    const wallet = await api(
      first,
      "POST",
      `/api/v1/workspaces/${setup.workspaceId}/smart-wallet`,
      setup.liveKey,
    );
    expect([200, 201], JSON.stringify(wallet.json)).toContain(wallet.status);
    const smart = (wallet.json.smartWallet as { address: Address }).address;
    await mintToken(devnet, "USDC", smart, EXTRA_USDC);
    const payment = await createPayment(first, setup, "55.555555", "smart_wallet");
    expect(payment.receivingAddress).toBe(smart);
    const treasuryBefore = await usdcBalance(devnet.accounts.treasury.address);

    await stopMining();
    await payWithoutFurtherBlocks(smart, payment.gross);
    const pending = await untilDefined(
      "the settlement's bundle in the node's pool",
      async () => {
        if (first.child.exitCode !== null) throw new Error(`the service exited\n${first.output()}`);
        const txs = await pendingWhere((tx) => same(tx.to, aa.entryPoint));
        return txs.length > 0 ? txs : undefined;
      },
      120_000,
    );
    expect(pending, `bundler: ${bundlerLog}`).toHaveLength(1);
    const bundleHash = pending[0]?.hash as Hex;
    await stopService(first.child, "SIGKILL");
    expect(await first.exited).toEqual({ code: null, signal: "SIGKILL" });
    const killedAt = performance.now();
    expect(await usdcBalance(smart)).toBe(payment.gross + parseUnits(EXTRA_USDC, 6));

    const left = await store.read((database) => paymentRow(database, payment.id));
    expect(left).toMatchObject({
      status: "confirmed",
      settlement_id: null,
      settlement_user_op_hash: expect.stringMatching(TX_HASH),
    });

    await restoreMining();
    const second = await startServer(store);
    const forwarded = await waitForForwarded(second, setup, payment.id);
    const finishedAt = performance.now();
    // The bundle pending at the crash is the one transaction that carried every leg.
    expect(forwarded.settlementTxHashes).toEqual({ net: bundleHash, fee: bundleHash });
    await expectPaidOnce(setup, [payment], treasuryBefore);
    expect(await usdcBalance(smart)).toBe(parseUnits(EXTRA_USDC, 6));
    await expectOneSettlement(second, setup, payment.id, {
      merchant: bundleHash,
      splits: setup.splits.map(() => bundleHash),
    });

    await stopService(second.child, "SIGTERM");
    expect(await second.exited, second.output()).toEqual({ code: 0, signal: null });
    const final = await store.read(async (database) => ({
      payment: await paymentRow(database, payment.id),
      legs: await legsOf(database, payment.id),
      events: await eventsOf(database, setup.workspaceId),
    }));
    // The operation recorded before the crash is the one that was included; no EOA transaction.
    expect(final.payment).toMatchObject({
      status: "forwarded",
      settlement_user_op_hash: left.settlement_user_op_hash,
      settlement_net_tx_hash: bundleHash,
    });
    expect(final.legs).toEqual([]);
    expect(await chain.getTransactionCount({ address: setup.eoa })).toBe(0);
    expectEventsOnce(final.events, 1);
    console.info(
      `[splits-crash] smart wallet bundle pending: killed after ${((killedAt - started) / 1000).toFixed(1)} s, forwarded ${((finishedAt - killedAt) / 1000).toFixed(1)} s after the kill (restart included)`,
    );
  }, 300_000);
});

// Two processes on one database need PostgreSQL (PGlite is one process's).
describe.skipIf(!process.env.DATABASE_URL)("two instances settling payments with splits", () => {
  it("the leader killed -9 between legs: the other instance takes over and every payment is settled once", async () => {
    const started = performance.now();
    const store = await newStore();
    const proxy = await holdingProxy(2);
    // A starts first and leads the chain job; B starts once A holds its lease.
    const a = await startServer(store, { LIVE_RPC_URL: proxy.url });
    const lease = () =>
      store.read((database) =>
        database.db
          .selectFrom("job_leases")
          .select(["holder", "expires_at"])
          .where("name", "=", "chain.live")
          .executeTakeFirst(),
      );
    const leaderA = await untilDefined("A to lead the chain job", lease, 60_000);
    const b = await startServer(store);
    const setup = await workspaceWithSplits(b);
    await fund(setup.eoa, { USDC: EXTRA_USDC, ETH: "1" });
    const payments: Array<Awaited<ReturnType<typeof createPayment>>> = [];
    for (const [i, amount] of ["10.000001", "11.000011", "12.000111"].entries())
      payments.push(await createPayment(i % 2 ? a : b, setup, amount));
    const treasuryBefore = await usdcBalance(devnet.accounts.treasury.address);

    proxy.arm(setup.eoa);
    for (const p of payments) await payUsdc(p.receivingAddress, p.gross);
    await proxy.whenHeld(a);
    await stopService(a.child, "SIGKILL");
    proxy.drop();
    const killedAt = performance.now();
    expect((await lease())?.holder).toBe(leaderA.holder);

    for (const p of payments) await waitForForwarded(b, setup, p.id, 180_000);
    const finishedAt = performance.now();
    expect((await lease())?.holder).not.toBe(leaderA.holder);
    await expectPaidOnce(setup, payments, treasuryBefore);
    expect(await usdcBalance(setup.eoa)).toBe(parseUnits(EXTRA_USDC, 6));
    expect(await chain.getTransactionCount({ address: setup.eoa })).toBe(5 * payments.length);
    const legs = await store.read(async (database) =>
      Promise.all(payments.map((p) => legsOf(database, p.id))),
    );
    for (const [i, p] of payments.entries()) {
      const ofIt = legs[i] ?? [];
      expect(ofIt.map((leg) => [leg.purpose, leg.status])).toEqual([
        ["settlement_net", "mined"],
        ["settlement_fee", "mined"],
        ...setup.splits.map((split) => [`split:${split.id}`, "mined"]),
      ]);
      const tx = new Map(ofIt.map((leg) => [leg.purpose, leg.tx_hash]));
      await expectOneSettlement(b, setup, p.id, {
        merchant: tx.get("settlement_net") as string,
        splits: setup.splits.map((split) => tx.get(`split:${split.id}`) as string),
      });
    }
    expectEventsOnce(await store.read((database) => eventsOf(database, setup.workspaceId)), payments.length);
    console.info(
      `[splits-crash] two instances: A killed after ${((killedAt - started) / 1000).toFixed(1)} s, B forwarded all ${payments.length} ${((finishedAt - killedAt) / 1000).toFixed(1)} s after the kill`,
    );
  }, 400_000);

  it("the leader stopped (SIGSTOP) between legs past its lease, then continued: every payment is settled once", async () => {
    const started = performance.now();
    const store = await newStore();
    const proxy = await holdingProxy(2);
    const a = await startServer(store, { LIVE_RPC_URL: proxy.url });
    const lease = () =>
      store.read((database) =>
        database.db
          .selectFrom("job_leases")
          .select(["holder", "expires_at"])
          .where("name", "=", "chain.live")
          .executeTakeFirst(),
      );
    const leaderA = await untilDefined("A to lead the chain job", lease, 60_000);
    const b = await startServer(store);
    const setup = await workspaceWithSplits(a);
    await fund(setup.eoa, { USDC: EXTRA_USDC, ETH: "1" });
    const payments: Array<Awaited<ReturnType<typeof createPayment>>> = [];
    for (const [i, amount] of ["20.000002", "21.000021", "22.000221"].entries())
      payments.push(await createPayment(i % 2 ? a : b, setup, amount));
    const treasuryBefore = await usdcBalance(devnet.accounts.treasury.address);

    proxy.arm(setup.eoa);
    for (const p of payments) await payUsdc(p.receivingAddress, p.gross);
    await proxy.whenHeld(a);
    // A stands still with its legs recorded and the second one's broadcast on its way, holding
    // the wallet's lock; B takes the chain job over once A's lease has run out.
    a.child.kill("SIGSTOP");
    const stoppedAt = performance.now();
    await untilDefined(
      "B to take the chain job over",
      async () => {
        const now = await lease();
        return now && now.holder !== leaderA.holder ? true : undefined;
      },
      120_000,
    );
    const takenOverAt = performance.now();
    // A goes on: its held broadcast reaches the node, and it finishes sending what it recorded.
    proxy.pass();
    a.child.kill("SIGCONT");

    for (const p of payments) await waitForForwarded(b, setup, p.id, 180_000);
    const finishedAt = performance.now();
    expect(a.child.exitCode, a.output()).toBeNull(); // A is still running
    await expectPaidOnce(setup, payments, treasuryBefore);
    expect(await usdcBalance(setup.eoa)).toBe(parseUnits(EXTRA_USDC, 6));
    expect(await chain.getTransactionCount({ address: setup.eoa })).toBe(5 * payments.length);
    const legs = await store.read(async (database) =>
      Promise.all(payments.map((p) => legsOf(database, p.id))),
    );
    for (const [i, p] of payments.entries()) {
      const ofIt = legs[i] ?? [];
      expect(ofIt.map((leg) => [leg.purpose, leg.status])).toEqual([
        ["settlement_net", "mined"],
        ["settlement_fee", "mined"],
        ...setup.splits.map((split) => [`split:${split.id}`, "mined"]),
      ]);
      const tx = new Map(ofIt.map((leg) => [leg.purpose, leg.tx_hash]));
      for (const server of [a, b])
        await expectOneSettlement(server, setup, p.id, {
          merchant: tx.get("settlement_net") as string,
          splits: setup.splits.map((split) => tx.get(`split:${split.id}`) as string),
        });
    }
    expectEventsOnce(await store.read((database) => eventsOf(database, setup.workspaceId)), payments.length);
    console.info(
      `[splits-crash] two instances, SIGSTOP: A stopped after ${((stoppedAt - started) / 1000).toFixed(1)} s, B led ${((takenOverAt - stoppedAt) / 1000).toFixed(1)} s later, all ${payments.length} forwarded ${((finishedAt - takenOverAt) / 1000).toFixed(1)} s after A was continued`,
    );
  }, 400_000);
});
