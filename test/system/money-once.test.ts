import { sql } from "kysely";
import { type Address, type PublicClient, parseUnits } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Devnet, rpc, startDevnet } from "../../src/devnet/chain.ts";
import { topUpGas, topUpWallet } from "../../src/modules/payments/settlement/gas-top-up.ts";
import { Settlement, type SettlementOptions } from "../../src/modules/payments/settlement/settlement.ts";
import type { Fence } from "../../src/platform/db/fences.ts";
import { PeriodicJob } from "../../src/platform/jobs/periodic-job.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { type DevnetClients, devnetClients } from "../support/devnet-clients.ts";
import { LIVE_DEFAULT, liveNetworkEnv } from "../support/devnet-env.ts";
import { untilDefined } from "../support/poll.ts";
import { holding, type RpcHook, startRpcProxy } from "../support/rpc-proxy.ts";

// Money leaves once (issue 20), finding by finding, on a real local chain: a refused transaction
// is never sent again once its nonce is cancelled, so a payout answered as failed is never paid;
// a transaction its sender never broadcast is sent before the next one (a nonce is never
// skipped); the reconciler leaves a payout another instance is sending alone, and one whose
// sender was stopped past its lease is failed unsent, after which that sender sends nothing; a
// busy node's "limit exceeded" is no refusal; a wallet another instance holds does not hold up
// the reconciliation of the others; instances share one wallet's balance; a payment's settlement
// is unique and fenced by the lease.

const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
const USDC = (amount: string) => parseUnits(amount, 6);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Makes every transaction recorded so far older than the sender's rebroadcast age (3 s), as if
 * that time had passed: the reconciler then treats them as it would after it, with no wait.
 */
async function pastRebroadcastAge(t: TestApp): Promise<void> {
  await t.database.db
    .updateTable("chain_transactions")
    .set({ created_at: sql`created_at - interval '1 hour'` })
    .execute();
}
/** A wallet's pending nonce: an EOA's sender reads it beside a transfer's record, and signs only once it has it. */
const pendingNonce = (method: string, params: unknown[]) =>
  method === "eth_getTransactionCount" && params[1] === "pending";
const refusal = { error: { code: -32000, message: "nonce too high (refused by the test's node)" } };
/** EIP-1474's -32005: the node rate-limits a call and says nothing of the transaction. */
const limitExceeded = { error: { code: -32005, message: "limit exceeded (the test's node)" } };

/** The node answers the first transaction broadcast through the proxy with `answer`, and takes every later one. */
function answerFirstBroadcast(answer: { error: { code: number; message: string } }): RpcHook {
  let answered = false;
  return async ({ method }) => {
    if (method !== "eth_sendRawTransaction" || answered) return undefined;
    answered = true;
    return answer;
  };
}

let devnet: Devnet;
let chain: PublicClient;
let credit: DevnetClients["credit"];
let usdcBalance: DevnetClients["usdcBalance"];
/** Apps started, each with whether it opened its own database (closed after those sharing it). */
const opened: Array<{ app: TestApp; owner: boolean }> = [];

beforeAll(async () => {
  devnet = await startDevnet();
  ({ chain, credit, usdcBalance } = devnetClients(devnet));
}, 120_000);

afterAll(async () => {
  for (const { app } of opened.filter((o) => !o.owner)) await app.close(true);
  for (const { app } of opened.filter((o) => o.owner)) await app.close();
  await devnet?.stop();
});

async function app(extra: Record<string, string> = {}, shared?: TestApp): Promise<TestApp> {
  const started = await startTestApp(
    liveNetworkEnv(devnet, extra),
    shared ? { database: shared.database } : {},
  );
  opened.push({ app: started, owner: !shared });
  return started;
}

const payout = (t: TestApp, ws: CreatedWorkspace, body: Record<string, unknown>) =>
  t.request({ method: "POST", url: "/api/v1/payouts", headers: bearer(ws.liveKey), payload: body });

/** Runs both reconcilers (transactions, then payouts) until `done`. */
const reconcileUntil = (t: TestApp, what: string, done: () => Promise<boolean>) =>
  untilDefined(what, async () => {
    await t.app.ctx.chains.defaultOf("live")?.sender?.reconcile();
    await t.app.services.transfers.reconcile(LIVE_DEFAULT);
    return (await done()) ? true : undefined;
  });

const recordedFor = (t: TestApp, ws: CreatedWorkspace) =>
  t.database.db
    .selectFrom("chain_transactions")
    .select(["tx_hash", "nonce", "status", "purpose", "payout_id"])
    .where("from_address", "=", ws.eoaAddress)
    .orderBy("nonce")
    .orderBy("purpose")
    .execute();

/** The wallet's recorded transactions as [nonce, purpose, status], in nonce order. */
const ledgerOf = async (t: TestApp, ws: CreatedWorkspace) =>
  (await recordedFor(t, ws)).map((r) => [Number(r.nonce), r.purpose, r.status]);

const payoutRow = (t: TestApp, ws: CreatedWorkspace) =>
  t.database.db.selectFrom("payouts").selectAll().where("workspace_id", "=", ws.id).executeTakeFirst();

/**
 * A 10 USDC payout left open (202) at nonce 0 is finished by the reconcilers once past the
 * rebroadcast age: its transaction sent again, mined once, the payout completed.
 */
async function expectFinishedOnce(t: TestApp, ws: CreatedWorkspace, destination: string) {
  // Polled: the reconcilers leave the transaction alone until it is past the rebroadcast age (3 s).
  await reconcileUntil(
    t,
    "the payout to complete",
    async () => (await payoutRow(t, ws))?.status === "completed",
  );
  expect(await usdcBalance(destination)).toBe(USDC("10"));
  expect(await ledgerOf(t, ws)).toEqual([[0, "payout", "mined"]]);
}

describe("a transaction is sent once, in nonce order", () => {
  it("one the node refused is cancelled, never sent again: its payout, answered as failed, is never paid", async () => {
    const proxy = await startRpcProxy(devnet.rpcUrl, answerFirstBroadcast(refusal));
    try {
      const t = await app({ LIVE_RPC_URL: proxy.url });
      const ws = await createWorkspace(t);
      await credit(ws.eoaAddress, { USDC: "50", ETH: "1" });
      const destination = randomAddress();
      const answer = payout(t, ws, { tokenSymbol: "USDC", amount: "10", destinationAddress: destination });
      // The reconciler runs while the payout is being sent, as the worker leader's tick would.
      await untilDefined("the payout's transaction to be recorded", async () =>
        (await recordedFor(t, ws)).length ? true : undefined,
      );
      const reconciling = t.app.ctx.chains.defaultOf("live")?.sender?.reconcile();
      const res = await answer;
      await reconciling;
      expect(res.statusCode, res.body).toBe(500);
      // More reconcile rounds, past the age (3 s) after which the reconciler broadcasts a recorded
      // transaction again (the records made that old): nothing more is sent.
      await pastRebroadcastAge(t);
      await t.app.ctx.chains.defaultOf("live")?.sender?.reconcile();
      await t.app.ctx.chains.defaultOf("live")?.sender?.reconcile();
      expect(await usdcBalance(destination)).toBe(0n);
      expect(res.json()).toMatchObject({
        code: "PAYOUT_FAILED",
        failStreak: 1,
        detail: expect.stringMatching(
          /^refused by the node: .*nonce too high.*its nonce was taken by a cancelling transaction$/,
        ),
      });
      expect(await ledgerOf(t, ws)).toEqual([
        [0, "cancel", "mined"],
        [0, "payout", "replaced"],
      ]);
      expect(await chain.getTransactionCount({ address: ws.eoaAddress as Address })).toBe(1);
    } finally {
      await proxy.close();
    }
  }, 60_000);

  it("one its sender never got to the node is sent before the next, which is not refused for the gap", async () => {
    // Every broadcast of the first transaction is lost on the way (no answer: it stays open)
    // until the node is sent another one.
    let lost: string | undefined;
    let another = false;
    const proxy = await startRpcProxy(devnet.rpcUrl, async ({ method, params }) => {
      if (method !== "eth_sendRawTransaction" || another) return undefined;
      lost ??= String(params[0]);
      if (params[0] === lost) return "drop";
      another = true;
      return undefined;
    });
    try {
      const t = await app({ LIVE_RPC_URL: proxy.url });
      const ws = await createWorkspace(t);
      await credit(ws.eoaAddress, { USDC: "50", ETH: "1" });
      const [first, second] = [randomAddress(), randomAddress()];
      const firstAnswer = payout(t, ws, { tokenSymbol: "USDC", amount: "10", destinationAddress: first });
      await untilDefined("the first payout's transaction to be recorded", async () =>
        (await recordedFor(t, ws)).length ? true : undefined,
      );
      const secondAnswer = await payout(t, ws, {
        tokenSymbol: "USDC",
        amount: "10",
        destinationAddress: second,
      });
      expect(secondAnswer.statusCode, secondAnswer.body).toBe(200);
      const firstRes = await firstAnswer;
      expect(firstRes.statusCode, firstRes.body).toBe(200);
      expect([await usdcBalance(first), await usdcBalance(second)]).toEqual([USDC("10"), USDC("10")]);
      expect((await recordedFor(t, ws)).map((r) => [Number(r.nonce), r.status])).toEqual([
        [0, "mined"],
        [1, "mined"],
      ]);
      // Nonce 1 reached the node first and was refused for the gap; nonce 0 was sent, then 1 again.
      expect(proxy.methods.filter((m) => m === "eth_sendRawTransaction").length).toBeGreaterThanOrEqual(4);
    } finally {
      await proxy.close();
    }
  }, 90_000);
});

describe("what goes wrong after a transaction is recorded", () => {
  it("a node error after a refusal leaves the payout open (202), never failed: it is then paid once", async () => {
    // The node refuses the first broadcast, then fails the lookup that tells whether it took it
    // anyway: nothing says the recorded transaction cannot be mined.
    let refused = false;
    let lookups = 0;
    const proxy = await startRpcProxy(devnet.rpcUrl, async ({ method }) => {
      if (method === "eth_sendRawTransaction" && !refused) {
        refused = true;
        return refusal;
      }
      if (method === "eth_getTransactionByHash" && refused && lookups++ === 0) {
        return { error: { code: -32000, message: "header not found" } };
      }
      return undefined;
    });
    try {
      const t = await app({ LIVE_RPC_URL: proxy.url });
      const ws = await createWorkspace(t);
      await credit(ws.eoaAddress, { USDC: "50", ETH: "1" });
      const destination = randomAddress();
      const res = await payout(t, ws, { tokenSymbol: "USDC", amount: "10", destinationAddress: destination });
      expect(res.statusCode, res.body).toBe(202);
      expect((await payoutRow(t, ws))?.status).toBe("processing");
      // The reconcilers: the transaction recorded more than 3 s ago and unknown to the node is
      // broadcast again, mined, and the payout completes, once.
      await expectFinishedOnce(t, ws, destination);
    } finally {
      await proxy.close();
    }
  }, 60_000);
});

describe("a busy node", () => {
  it("is no refusal: a broadcast answered 'limit exceeded' is kept open (202), never cancelled, and paid once", async () => {
    const proxy = await startRpcProxy(devnet.rpcUrl, answerFirstBroadcast(limitExceeded));
    try {
      const t = await app({ LIVE_RPC_URL: proxy.url });
      const ws = await createWorkspace(t);
      await credit(ws.eoaAddress, { USDC: "50", ETH: "1" });
      const destination = randomAddress();
      const res = await payout(t, ws, { tokenSymbol: "USDC", amount: "10", destinationAddress: destination });
      expect(res.statusCode, res.body).toBe(202);
      expect((await payoutRow(t, ws))?.status).toBe("processing");
      const recorded = await recordedFor(t, ws);
      expect(recorded.map((r) => [Number(r.nonce), r.purpose, r.status])).toEqual([[0, "payout", "signed"]]);
      expect(res.json().payout.txHash).toBe(recorded[0]?.tx_hash);
      // Past the rebroadcast age the reconciler sends the same transaction again; it is mined once.
      await expectFinishedOnce(t, ws, destination);
    } finally {
      await proxy.close();
    }
  }, 60_000);
});

// Needs PostgreSQL (DATABASE_URL): wallets take turns across instances through its session locks.
describe.skipIf(!process.env.DATABASE_URL)("a wallet another instance holds", () => {
  it("does not hold up the reconciliation of the other wallets' transactions", async () => {
    let busy = true; // the node rate-limits every broadcast: both payouts are left open (202)
    const proxy = await startRpcProxy(devnet.rpcUrl, async ({ method }) =>
      method === "eth_sendRawTransaction" && busy ? limitExceeded : undefined,
    );
    let release = () => {};
    let holder: Promise<void> = Promise.resolve();
    try {
      const t = await app({ LIVE_RPC_URL: proxy.url });
      const [free, held] = [await createWorkspace(t), await createWorkspace(t)];
      const destinations = new Map([
        [free, randomAddress()],
        [held, randomAddress()],
      ]);
      for (const [ws, destination] of destinations) {
        await credit(ws.eoaAddress, { USDC: "50", ETH: "1" });
        const res = await payout(t, ws, {
          tokenSymbol: "USDC",
          amount: "10",
          destinationAddress: destination,
        });
        expect(res.statusCode, res.body).toBe(202);
      }
      // Another instance holds the second wallet's turn, as one stopped in the middle of a send
      // would until PostgreSQL ends its idle session.
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      let locked!: () => void;
      const isLocked = new Promise<void>((resolve) => {
        locked = resolve;
      });
      const lockName = `wallet:live:${held.eoaAddress.toLowerCase()}`;
      holder = t.database.db.connection().execute(async (session) => {
        await sql`SELECT pg_advisory_lock(hashtext(${lockName}))`.execute(session);
        locked();
        await released;
        await sql`SELECT pg_advisory_unlock(hashtext(${lockName}))`.execute(session);
      });
      await isLocked;
      busy = false;
      // This instance's next payout from the held wallet waits for the lock as well.
      const second = randomAddress();
      const waiting = payout(t, held, { tokenSymbol: "USDC", amount: "5", destinationAddress: second });
      // Past the rebroadcast age (3 s; the records made that old), the reconciler wants the held
      // wallet's transaction; what is proved is that the pass is not held up by it.
      await pastRebroadcastAge(t);

      const pass = t.app.ctx.chains
        .defaultOf("live")
        ?.sender?.reconcile()
        .then(() => "finished" as const);
      expect(await Promise.race([pass, sleep(10_000).then(() => "held up" as const)])).toBe("finished");
      await reconcileUntil(
        t,
        "the free wallet's payout to complete",
        async () => (await payoutRow(t, free))?.status === "completed",
      );
      expect((await recordedFor(t, held)).map((r) => r.status)).toEqual(["signed"]);
      expect(await usdcBalance(destinations.get(held) ?? "")).toBe(0n);

      // Once the other instance lets go, the held wallet's transactions are sent, each once.
      release();
      await holder;
      const secondRes = await waiting;
      expect(secondRes.statusCode, secondRes.body).toBe(200);
      await reconcileUntil(t, "the held wallet's payouts to complete", async () => {
        const rows = await t.database.db
          .selectFrom("payouts")
          .select("status")
          .where("workspace_id", "=", held.id)
          .execute();
        return rows.length === 2 && rows.every((r) => r.status === "completed");
      });
      for (const destination of destinations.values())
        expect(await usdcBalance(destination)).toBe(USDC("10"));
      expect(await usdcBalance(second)).toBe(USDC("5"));
      expect((await recordedFor(t, free)).map((r) => [Number(r.nonce), r.status])).toEqual([[0, "mined"]]);
      expect((await recordedFor(t, held)).map((r) => [Number(r.nonce), r.status])).toEqual([
        [0, "mined"],
        [1, "mined"],
      ]);
    } finally {
      release();
      await holder;
      await proxy.close();
    }
  }, 90_000);
});

describe("the reconciler and the instance sending a payout", () => {
  /**
   * Two instances on one database; `sender` pays out 10 USDC, which is recorded, then held before
   * it is signed (its node does not answer the wallet's pending nonce until `release`).
   */
  async function payoutHeldBeforeSigning() {
    const held = holding(pendingNonce);
    const proxy = await startRpcProxy(devnet.rpcUrl, held.hook);
    const sender = await app({ LIVE_RPC_URL: proxy.url });
    const other = await app({}, sender);
    const ws = await createWorkspace(sender);
    await credit(ws.eoaAddress, { USDC: "50", ETH: "1" });
    const destination = randomAddress();
    const answer = payout(sender, ws, { tokenSymbol: "USDC", amount: "10", destinationAddress: destination });
    await untilDefined("the payout to be recorded", async () => (await payoutRow(sender, ws)) ?? undefined);
    return { held, proxy, sender, other, ws, destination, answer };
  }

  it("leaves a payout another instance is sending alone", async () => {
    const { held, proxy, sender, other, ws, destination, answer } = await payoutHeldBeforeSigning();
    try {
      // Recorded, not signed yet: its sender waits for the node's nonce.
      expect(await other.app.services.transfers.reconcile(LIVE_DEFAULT)).toBe(0);
      expect((await payoutRow(sender, ws))?.status).toBe("processing");
      held.release();
      const res = await answer;
      expect(res.statusCode, res.body).toBe(200);
      expect((await payoutRow(sender, ws))?.status).toBe("completed");
      expect(await usdcBalance(destination)).toBe(USDC("10"));
    } finally {
      held.release();
      await proxy.close();
    }
  }, 60_000);

  it("fails unsent a payout whose sender stopped past its lease; that sender then sends nothing", async () => {
    const { held, proxy, sender, other, ws, destination, answer } = await payoutHeldBeforeSigning();
    try {
      // Its sender stands still past its lease (as a stopped process does: its renewals stop).
      await untilDefined("the reconciler to take the payout over", async () => {
        await sender.database.db
          .updateTable("payouts")
          .set({ lease_expires_at: new Date(Date.now() - 60_000) })
          .where("workspace_id", "=", ws.id)
          .execute();
        return (await other.app.services.transfers.reconcile(LIVE_DEFAULT)) === 1 ? true : undefined;
      });
      held.release();
      const res = await answer;
      expect(res.statusCode, res.body).toBe(500);
      expect(res.json()).toMatchObject({
        code: "PAYOUT_FAILED",
        detail: "not sent: the process stopped before broadcasting",
        failStreak: 0, // never sent: not a failed transfer, not counted
      });
      expect(await recordedFor(sender, ws)).toEqual([]);
      expect(await usdcBalance(destination)).toBe(0n);
      expect(await chain.getTransactionCount({ address: ws.eoaAddress as Address })).toBe(0);
    } finally {
      held.release();
      await proxy.close();
    }
  }, 60_000);
});

describe("instances share a wallet", () => {
  it("a second instance's payout sees what the first one's, still in flight, takes from the balance", async () => {
    const first = await app();
    const second = await app({}, first);
    const ws = await createWorkspace(first);
    await credit(ws.eoaAddress, { USDC: "10", ETH: "1" });
    await rpc(devnet.rpcUrl, "evm_setAutomine", [false]);
    await rpc(devnet.rpcUrl, "evm_setIntervalMining", [0]);
    try {
      const answer = payout(first, ws, {
        tokenSymbol: "USDC",
        amount: "7",
        destinationAddress: randomAddress(),
      });
      await untilDefined("the first payout to be broadcast", async () =>
        (await recordedFor(first, ws)).length ? true : undefined,
      );
      const refused = await payout(second, ws, {
        tokenSymbol: "USDC",
        amount: "7",
        destinationAddress: randomAddress(),
      });
      expect(refused.statusCode, refused.body).toBe(400);
      expect(refused.json()).toEqual({
        error: "Insufficient balance",
        available: "3.00",
        requested: "7.00",
        tokenSymbol: "USDC",
        network: "default",
      });
      await rpc(devnet.rpcUrl, "evm_mine", []);
      expect((await answer).statusCode).toBe(200);
    } finally {
      await rpc(devnet.rpcUrl, "evm_setAutomine", [true]);
      await rpc(devnet.rpcUrl, "evm_setIntervalMining", [1000]);
    }
    expect(await usdcBalance(ws.eoaAddress)).toBe(USDC("3"));
  }, 60_000);
});

describe("an idempotency key repeated on another instance", () => {
  it("while its original is in flight, is answered as a repeat, not refused for the original's money", async () => {
    const first = await app();
    const second = await app({}, first);
    const ws = await createWorkspace(first);
    await credit(ws.eoaAddress, { USDC: "10", ETH: "1" });
    const body = {
      tokenSymbol: "USDC",
      amount: "10",
      destinationAddress: randomAddress(),
      idempotencyKey: "once",
    };
    const [a, b] = await Promise.all([payout(first, ws, body), payout(second, ws, body)]);
    expect([a.statusCode, b.statusCode], `${a.body} ${b.body}`).toEqual([200, 200]);
    const hashes = [a.json().payout.txHash, b.json().payout.txHash];
    expect(hashes[0]).toBe(hashes[1]);
    expect(await usdcBalance(body.destinationAddress)).toBe(USDC("10"));
  }, 60_000);
});

describe("a payment is settled once", () => {
  /** A settlement's ledger when no one is paid: each leg's nonce taken by a cancellation. */
  const BOTH_LEGS_CANCELLED = [
    [0, "cancel", "mined"],
    [0, "settlement_net", "replaced"],
    [1, "cancel", "mined"],
    [1, "settlement_fee", "replaced"],
  ];

  const paymentStatus = async (t: TestApp, id: string) =>
    (
      await t.database.db
        .selectFrom("payments")
        .select("status")
        .where("id", "=", id)
        .executeTakeFirstOrThrow()
    ).status;

  /** The settlement of the app's live EOA payments, run by hand (`tick`), with its network. */
  function eoaSettlement(t: TestApp, options: SettlementOptions = {}) {
    const network = t.app.ctx.chains.defaultOf("live")?.network;
    const rail = t.app.rails.of("live", null)?.eoa;
    if (!network || !rail) throw new Error("no live network");
    const settlement = new Settlement(
      t.database.db,
      network,
      { eoa: rail },
      t.app.services.transfers,
      t.app.ctx.log,
      t.app.ctx.now,
      options,
    );
    // Driven as the chain job drives it: the engine's reconcile, then the settlement tick.
    const tick = async () => {
      await t.app.services.transfers.reconcile(LIVE_DEFAULT);
      await settlement.tick();
    };
    return { settlement: { tick }, network };
  }

  /** A confirmed 20 USDC payment on a new workspace's EOA, which holds `funds` (its gross and gas). */
  async function confirmedPayment(
    t: TestApp,
    funds: { USDC: string; ETH?: string } = { USDC: "20", ETH: "1" },
  ) {
    const ws = await createWorkspace(t);
    const merchant = randomAddress();
    const created = await t.request({
      method: "POST",
      url: "/api/v1/payments",
      headers: bearer(ws.liveKey),
      payload: { tokenSymbol: "USDC", amount: "20", merchantWallet: merchant },
    });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().payment.id as string;
    await devnetClients(devnet).fund(ws.eoaAddress, funds);
    // Arranged as the watcher leaves it once the transfer has its confirmations.
    await t.database.db.updateTable("payments").set({ status: "confirmed" }).where("id", "=", id).execute();
    return { ws, id, merchant };
  }

  it("stopped before its legs are signed, is failed unsent and given back: the next tick pays it once", async () => {
    const held = holding(pendingNonce);
    const proxy = await startRpcProxy(devnet.rpcUrl, held.hook);
    try {
      const sender = await app({ LIVE_RPC_URL: proxy.url });
      const other = await app({}, sender);
      const { ws, id, merchant } = await confirmedPayment(sender);
      const stopped = eoaSettlement(sender).settlement.tick(); // recorded, then held before signing
      const transfer = () => payoutRow(sender, ws);
      await untilDefined("the settlement to be recorded", async () => (await transfer()) ?? undefined);
      // Its sender stands still past its lease: the other instance's reconciler fails it unsent.
      await sender.database.db
        .updateTable("payouts")
        .set({ lease_expires_at: new Date(Date.now() - 60_000) })
        .where("workspace_id", "=", ws.id)
        .execute();
      expect(await other.app.services.transfers.reconcile(LIVE_DEFAULT)).toBe(1);
      expect(await transfer()).toMatchObject({ kind: "settlement", status: "failed", tx_hash: null });
      const payment = () =>
        sender.database.db.selectFrom("payments").selectAll().where("id", "=", id).executeTakeFirstOrThrow();
      expect(await payment()).toMatchObject({ status: "confirmed", settlement_transfer_id: null });
      held.release();
      await stopped; // that sender then sends nothing, and leaves the payment as it is
      expect(await payment()).toMatchObject({ status: "confirmed", settlement_transfer_id: null });
      expect(await recordedFor(sender, ws)).toEqual([]);
      await eoaSettlement(other).settlement.tick();
      expect(await paymentStatus(other, id)).toBe("forwarded");
      expect(await usdcBalance(merchant)).toBe(USDC("19.70"));
      expect(await ledgerOf(other, ws)).toEqual([
        [0, "settlement_net", "mined"],
        [1, "settlement_fee", "mined"],
      ]);
    } finally {
      held.release();
      await proxy.close();
    }
  }, 60_000);

  it("its settlement legs are unique in the schema", async () => {
    const t = await app();
    const { ws, id } = await confirmedPayment(t);
    const leg = (nonce: number) => ({
      environment: "live",
      network: "default",
      from_address: ws.eoaAddress,
      nonce: String(nonce),
      purpose: "settlement_net",
      payment_id: id,
      to_address: randomAddress(),
      token_symbol: "USDC",
      amount: "1",
      raw_tx: "0x00",
      tx_hash: `0x${String(nonce).padStart(64, "0")}`,
    });
    await t.database.db.insertInto("chain_transactions").values(leg(0)).execute();
    await expect(t.database.db.insertInto("chain_transactions").values(leg(1)).execute()).rejects.toThrow(
      /chain_transactions_settlement_leg/,
    );
  }, 60_000);

  it("pays no one when the node refuses its net leg: the fee leg is cancelled too, never sent", async () => {
    const proxy = await startRpcProxy(devnet.rpcUrl, answerFirstBroadcast(refusal));
    try {
      const t = await app({ LIVE_RPC_URL: proxy.url });
      const { ws, id, merchant } = await confirmedPayment(t);
      const { settlement, network } = eoaSettlement(t);
      const treasury = network.treasuryAddress;
      const treasuryBefore = await usdcBalance(treasury);
      await settlement.tick();
      // Later ticks, past the reconciler's rebroadcast age (the records made that old), send
      // nothing more.
      await pastRebroadcastAge(t);
      await settlement.tick();
      await settlement.tick();
      expect(await paymentStatus(t, id)).toBe("failed");
      expect(await usdcBalance(merchant)).toBe(0n);
      expect(await usdcBalance(treasury)).toBe(treasuryBefore);
      expect(await usdcBalance(ws.eoaAddress)).toBe(USDC("20"));
      expect(await ledgerOf(t, ws)).toEqual(BOTH_LEGS_CANCELLED);
    } finally {
      await proxy.close();
    }
  }, 60_000);

  it("a busy node on its net leg withdraws nothing: both legs stay open and are paid once it takes them", async () => {
    const proxy = await startRpcProxy(devnet.rpcUrl, answerFirstBroadcast(limitExceeded));
    try {
      const t = await app({ LIVE_RPC_URL: proxy.url });
      const { ws, id, merchant } = await confirmedPayment(t);
      const { settlement, network } = eoaSettlement(t);
      const treasuryBefore = await usdcBalance(network.treasuryAddress);
      await settlement.tick();
      // Polled past the rebroadcast age (3 s), when the reconciler sends both legs again.
      await untilDefined("the payment to be forwarded", async () => {
        await settlement.tick();
        return (await paymentStatus(t, id)) === "forwarded" ? true : undefined;
      });
      expect(await usdcBalance(merchant)).toBe(USDC("19.70"));
      expect(await usdcBalance(network.treasuryAddress)).toBe(treasuryBefore + USDC("0.30"));
      expect(await ledgerOf(t, ws)).toEqual([
        [0, "settlement_net", "mined"],
        [1, "settlement_fee", "mined"],
      ]);
    } finally {
      await proxy.close();
    }
  }, 60_000);

  it("a net leg left open, then refused when the wallet's next send fills the gap, takes the fee leg with it", async () => {
    // The node is busy for the net leg's first broadcast (it stays open, the fee waits behind it),
    // then refuses the net leg whenever it is sent again.
    let netRaw: string | undefined;
    const proxy = await startRpcProxy(devnet.rpcUrl, async ({ method, params }) => {
      if (method !== "eth_sendRawTransaction") return undefined;
      if (netRaw === undefined) {
        netRaw = String(params[0]);
        return limitExceeded;
      }
      return params[0] === netRaw ? refusal : undefined;
    });
    try {
      const t = await app({ LIVE_RPC_URL: proxy.url });
      const { ws, id, merchant } = await confirmedPayment(t, { USDC: "21", ETH: "1" }); // 1 USDC of its own
      const { settlement, network } = eoaSettlement(t);
      const treasuryBefore = await usdcBalance(network.treasuryAddress);
      await settlement.tick();
      // The wallet's next send: a payout, whose nonce comes after both legs.
      const destination = randomAddress();
      const paid = await payout(t, ws, {
        tokenSymbol: "USDC",
        amount: "0.1",
        destinationAddress: destination,
      });
      expect(paid.statusCode, paid.body).toBe(200);
      await untilDefined("the settlement to end", async () => {
        await settlement.tick();
        return (await paymentStatus(t, id)) === "confirmed" ? undefined : true;
      });
      expect(await paymentStatus(t, id)).toBe("failed");
      expect(await usdcBalance(merchant)).toBe(0n);
      expect(await usdcBalance(network.treasuryAddress)).toBe(treasuryBefore);
      expect(await usdcBalance(destination)).toBe(USDC("0.1"));
      expect(await ledgerOf(t, ws)).toEqual([...BOTH_LEGS_CANCELLED, [2, "payout", "mined"]]);
    } finally {
      await proxy.close();
    }
  }, 60_000);

  it("waits for a gas top-up sent and not mined yet, instead of failing the payment", async () => {
    const t = await app();
    const { ws, id, merchant } = await confirmedPayment(t, { USDC: "20" }); // no ETH: it needs a top-up
    let topUp: "pending" | "funded" = "pending";
    const { settlement } = eoaSettlement(t, { topUp: async () => topUp });
    const status = () => paymentStatus(t, id);
    await settlement.tick();
    await settlement.tick();
    expect(await status()).toBe("confirmed");
    // The top-up is mined: the next tick settles.
    await credit(ws.eoaAddress, { ETH: "1" });
    topUp = "funded";
    await untilDefined("the payment to be forwarded", async () => {
      await settlement.tick();
      return (await status()) === "forwarded" ? true : undefined;
    });
    expect(await usdcBalance(merchant)).toBe(USDC("19.70"));
  }, 60_000);

  it("sends a wallet no second gas top-up while one is on its way", async () => {
    const t = await app();
    const ws = await createWorkspace(t);
    const network = t.app.ctx.chains.defaultOf("live")?.network;
    const sender = t.app.ctx.chains.defaultOf("live")?.sender;
    const config = t.config.networks.live[0];
    if (!network || !sender || !config?.gasFunderKey) throw new Error("no live network with a gas funder");
    // A top-up to the wallet recorded and not mined yet (from another funder, so that this
    // one's nonces stay as they are).
    await t.database.db
      .insertInto("chain_transactions")
      .values({
        environment: "live",
        network: "default",
        from_address: randomAddress(),
        nonce: "0",
        purpose: "gas_topup",
        to_address: ws.eoaAddress,
        token_symbol: "ETH",
        amount: "10000000000000000",
        raw_tx: "0x00",
        tx_hash: `0x${"ee".repeat(32)}`,
        status: "signed",
      })
      .execute();
    const needed = 1_000_000_000_000_000n;
    const { log, metrics } = t.app.ctx;
    const topUp = () => topUpWallet(network, config, sender, ws.eoaAddress as Address, needed, log, metrics);
    expect(await topUp()).toBe("pending");
    const eoas = () => t.app.services.workspaces.allEoaAddresses();
    expect(await topUpGas(network, config, sender, eoas, log, metrics)).toBe(0);
    expect(await chain.getBalance({ address: ws.eoaAddress as Address })).toBe(0n);
    // Once it is settled (here: never mined), the wallet is topped up again.
    await t.database.db
      .updateTable("chain_transactions")
      .set({ status: "replaced" })
      .where("tx_hash", "=", `0x${"ee".repeat(32)}`)
      .execute();
    expect(await topUp()).toBe("funded");
    expect(await chain.getBalance({ address: ws.eoaAddress as Address })).toBe(10_000_000_000_000_000n);
  }, 60_000);

  it("a worker that does not hold the chain job's lease records and sends nothing", async () => {
    const t = await app();
    const { id, merchant } = await confirmedPayment(t);
    const job = new PeriodicJob(t.database.db, t.app.ctx.log, {
      name: "chain.live",
      intervalMs: 100,
      tick: async () => {},
    });
    const settlement = (lease: Fence) => eoaSettlement(t, { lease }).settlement;
    // Another instance holds the lease.
    await t.database.db
      .insertInto("job_leases")
      .values({ name: "chain.live", holder: "another instance", expires_at: new Date(Date.now() + 60_000) })
      .execute();
    await settlement(job.leaseFence()).tick();
    const status = () => paymentStatus(t, id);
    expect(await status()).toBe("confirmed");
    expect(
      await t.database.db
        .selectFrom("chain_transactions")
        .select("id")
        .where("payment_id", "=", id)
        .execute(),
    ).toEqual([]);
    expect(await usdcBalance(merchant)).toBe(0n);

    // Once it runs out, this worker takes the lease over and settles, once.
    await t.database.db
      .updateTable("job_leases")
      .set({ expires_at: new Date(Date.now() - 1_000) })
      .execute();
    expect(await job.runOnce()).toBe(true);
    await settlement(job.leaseFence()).tick();
    expect(await status()).toBe("forwarded");
    expect(await usdcBalance(merchant)).toBe(USDC("19.7"));
  }, 60_000);
});
