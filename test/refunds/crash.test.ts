import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type Address,
  createWalletClient,
  erc20Abi,
  type Hex,
  http,
  type PublicClient,
  parseUnits,
  recoverTransactionAddress,
} from "viem";
import { type BundlerClient, createBundlerClient } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Devnet, rpc as devnetRpc, mintToken, startDevnet } from "../../src/devnet/chain.ts";
import { type Database, openDatabase, pgliteDirFor } from "../../src/platform/db/database.ts";
import { freshDatabaseUrl } from "../support/app.ts";
import { untilConfirmed } from "../support/confirmations.ts";
import { type DevnetClients, devnetClients } from "../support/devnet-clients.ts";
import { liveSmartWalletEnv } from "../support/devnet-env.ts";
import { type RpcHook, startRpcProxy } from "../support/rpc-proxy.ts";
import {
  callService,
  type Json,
  type ServiceProcess,
  startService,
  stopAllServices,
  stopService,
} from "../support/service-process.ts";

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

const ADMIN = "refunds-crash-admin-secret-0123456789";
const MASTER_KEY = randomBytes(32).toString("hex");
const TX_HASH = /^0x[0-9a-f]{64}$/;

const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
const same = (a: unknown, b: string) => typeof a === "string" && a.toLowerCase() === b.toLowerCase();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until<T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(100);
  }
}

let devnet: Devnet;
let aa: NonNullable<Devnet["aa"]>;
let env: Record<string, string>;
let chain: PublicClient;
let bundler: BundlerClient;
let clients: DevnetClients;
let bundlerLog = "";
const cleanups: Array<() => Promise<void>> = [];

const rpc = (method: string, params: unknown[]) => devnetRpc(devnet.rpcUrl, method, params);

/** The devnet's defaults: a block on every transaction and one every second. */
async function restoreMining(): Promise<void> {
  await rpc("evm_setAutomine", [true]);
  await rpc("evm_setIntervalMining", [1000]);
}

async function stopMining(): Promise<void> {
  await rpc("evm_setAutomine", [false]);
  await rpc("evm_setIntervalMining", [0]);
}

beforeAll(async () => {
  devnet = await startDevnet({
    accountAbstraction: true,
    onBundlerOutput: (text) => {
      bundlerLog = (bundlerLog + text).slice(-20_000);
    },
  });
  if (!devnet.aa) throw new Error("startDevnet({ accountAbstraction: true }) returned no aa");
  aa = devnet.aa;
  env = liveSmartWalletEnv(devnet, aa);
  clients = devnetClients(devnet);
  chain = clients.chain;
  bundler = createBundlerClient({ client: chain, transport: http(aa.bundlerUrl), pollingInterval: 100 });
}, 180_000);

afterEach(async () => {
  await stopAllServices("SIGKILL");
  if (devnet) await restoreMining().catch(() => undefined);
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

afterAll(async () => {
  await stopAllServices("SIGKILL");
  await devnet?.stop();
});

// ---------------------------------------------------------------------------------------------
// Where the service keeps its data

interface Store {
  env: Record<string, string>;
  read<T>(fn: (database: Database) => Promise<T>): Promise<T>;
}

/** PGlite in a DATA_DIR (read only while no process has it open), or a fresh PostgreSQL database. */
async function newStore(): Promise<Store> {
  const dataDir = mkdtempSync(join(tmpdir(), "refunds-crash-"));
  cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
  const fresh = await freshDatabaseUrl();
  if (fresh) cleanups.push(() => fresh.drop());
  const open = () =>
    fresh
      ? openDatabase({ databaseUrl: fresh.url, poolSize: 2 })
      : openDatabase({ pgliteDir: pgliteDirFor(dataDir) });
  return {
    env: fresh ? { DATA_DIR: dataDir, DATABASE_URL: fresh.url, MASTER_KEY } : { DATA_DIR: dataDir },
    async read(fn) {
      const database = await open();
      try {
        return await fn(database);
      } finally {
        await database.close();
      }
    },
  };
}

const startServer = (store: Store, extra: Record<string, string> = {}) =>
  startService({ ...env, ...store.env, ADMIN_SECRET: ADMIN, ...extra });

/** Requests here may take up to 30 s (callService's default is 15 s). */
const api = (
  server: ServiceProcess,
  method: string,
  path: string,
  token: string,
  body?: unknown,
  headers: Record<string, string> = {},
) =>
  headers["idempotency-key"] === undefined
    ? callService(server, method, path, token, body, 30_000)
    : fetch(`${server.baseUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...headers },
        body: JSON.stringify(body ?? {}),
        signal: AbortSignal.timeout(30_000),
      }).then(async (res) => ({
        status: res.status,
        json: (await res.json()) as Json,
        headers: res.headers,
      }));

/** A request that the process is killed under: it resolves with its status, or the error. */
function hangingPost(server: ServiceProcess, path: string, token: string, body: Json, key: string) {
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

interface Payer {
  address: Address;
  payUsdc(to: string, units: bigint): Promise<Hex>;
}

/** A fresh payer holding 1,000 USDC and 10 ETH. */
async function newPayer(): Promise<Payer> {
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

const usdc = (address: string) => clients.usdcBalance(address);
const sentCount = (address: string) => chain.getTransactionCount({ address: address as Address });

/** Transactions in the node's pool (the pending block) matching `predicate`. */
async function pendingWhere(predicate: (tx: { hash: Hex; from: string; to: string | null }) => boolean) {
  const block = (await rpc("eth_getBlockByNumber", ["pending", true])) as {
    transactions: Array<{ hash: Hex; from: string; to: string | null }>;
  } | null;
  return (block?.transactions ?? []).filter(predicate);
}

/**
 * An RPC proxy in front of the devnet that, once armed with a wallet, holds the first broadcast of
 * a transaction that wallet signed; `drop()` then loses it (the node never gets it).
 */
async function holdingProxy() {
  let from: string | undefined;
  let held = false;
  let release!: (outcome: "drop" | undefined) => void;
  const released = new Promise<"drop" | undefined>((resolve) => {
    release = resolve;
  });
  const hook: RpcHook = async ({ method, params }) => {
    if (method !== "eth_sendRawTransaction" || from === undefined || held) return undefined;
    const signer = await recoverTransactionAddress({
      serializedTransaction: params[0] as Parameters<
        typeof recoverTransactionAddress
      >[0]["serializedTransaction"],
    });
    if (!same(signer, from)) return undefined;
    held = true;
    return released;
  };
  const proxy = await startRpcProxy(devnet.rpcUrl, hook);
  cleanups.push(async () => {
    release("drop");
    await proxy.close();
  });
  return {
    url: proxy.url,
    arm: (wallet: string) => {
      from = wallet;
    },
    whenHeld: (server: ServiceProcess, ms = 60_000) =>
      until("the wallet's broadcast to be held", ms, async () => {
        if (server.child.exitCode !== null || server.child.signalCode !== null)
          throw new Error(`the service exited\n${server.output()}`);
        return held ? true : undefined;
      }),
    drop: () => release("drop"),
  };
}

// ---------------------------------------------------------------------------------------------
// The service

interface Setup {
  workspaceId: string;
  eoa: Address;
  liveKey: string;
}

async function newWorkspace(server: ServiceProcess): Promise<Setup> {
  const created = await api(server, "POST", "/api/v1/workspaces", ADMIN, {
    name: "Refunds Crash Co",
    settlementAddress: randomAddress(),
  });
  expect(created.status, JSON.stringify(created.json)).toBe(201);
  const workspace = created.json.workspace as { id: string; eoa: { address: Address } };
  const liveKey = (created.json.apiKeys as { live: { key: string } }).live.key;
  return { workspaceId: workspace.id, eoa: workspace.eoa.address, liveKey };
}

async function paymentOf(server: ServiceProcess, setup: Setup, id: string): Promise<Json> {
  const res = await api(server, "GET", `/api/v1/payments/${id}`, setup.liveKey);
  expect(res.status, JSON.stringify(res.json)).toBe(200);
  return res.json.payment as Json;
}

/** A USDC payment of `amount` created, paid by `payer` and forwarded. */
async function forwardedPayment(
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
  const payment = await until(`payment ${id} to be forwarded`, 120_000, async () => {
    const p = await paymentOf(server, setup, id);
    if (p.status === "failed") throw new Error(`payment failed: ${String(p.failureReason)}`);
    return p.status === "forwarded" ? p : undefined;
  });
  expect(same(payment.payerAddress, payer.address)).toBe(true);
  return { id, merchant, receivingAddress };
}

async function refundsOf(server: ServiceProcess, setup: Setup, paymentId: string) {
  const res = await api(server, "GET", `/api/v1/payments/${paymentId}/refunds`, setup.liveKey);
  expect(res.status, JSON.stringify(res.json)).toBe(200);
  return res.json as { refunds: Json[]; total: number };
}

/** The workspace's transfers out (payouts table, every kind) and their chain transactions and events. */
async function transfersOut(database: Database, setup: Setup) {
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

const refundedAmountOf = (database: Database, paymentId: string) =>
  database.db
    .selectFrom("payments")
    .select(["refunded_amount"])
    .where("id", "=", paymentId)
    .executeTakeFirstOrThrow()
    .then((row) => String(row.refunded_amount));

// ---------------------------------------------------------------------------------------------

describe("an EOA refund, the process killed -9 between its record and its broadcast", () => {
  it("ends completed exactly once after a restart: the destination paid once, refundedAmount counted once", async () => {
    const started = performance.now();
    const store = await newStore();
    const proxy = await holdingProxy();
    const first = await startServer(store, { LIVE_RPC_URL: proxy.url });
    const setup = await newWorkspace(first);
    await clients.fund(setup.eoa, { ETH: "1" });
    const payer = await newPayer();
    const paid = await forwardedPayment(first, setup, payer, "30");
    // The workspace's own money to refund from (the payment's left with its settlement).
    await mintToken(devnet, "USDC", setup.eoa, "30");
    const payerBefore = await usdc(payer.address);
    const sentBefore = await sentCount(setup.eoa);

    proxy.arm(setup.eoa);
    const hanging = hangingPost(
      first,
      `/api/v1/payments/${paid.id}/refunds`,
      setup.liveKey,
      { amount: "12.5", reason: "crash" },
      "crash-refund-1",
    );
    await proxy.whenHeld(first);
    await stopService(first.child, "SIGKILL");
    expect(await first.exited).toEqual({ code: null, signal: "SIGKILL" });
    proxy.drop();
    const killedAt = performance.now();
    expect(await hanging).toHaveProperty("error");

    // Nothing moved on chain; the node never got the transaction.
    expect(await usdc(payer.address)).toBe(payerBefore);
    expect(await usdc(setup.eoa)).toBe(parseUnits("30", 6));
    expect(await sentCount(setup.eoa)).toBe(sentBefore);
    const left = await store.read(async (database) => ({
      ...(await transfersOut(database, setup)),
      refunded: await refundedAmountOf(database, paid.id),
    }));
    expect(left.rows).toEqual([
      expect.objectContaining({
        kind: "refund",
        status: "processing",
        payment_id: paid.id,
        amount: "12500000",
      }),
    ]);
    const refundId = left.rows[0]?.id as string;
    expect(left.sent).toEqual([
      expect.objectContaining({
        purpose: "refund",
        status: "signed",
        payout_id: refundId,
        amount: "12500000",
      }),
    ]);
    const recordedHash = left.sent[0]?.tx_hash as Hex;
    expect(await rpc("eth_getTransactionByHash", [recordedHash])).toBeNull();
    expect(left.refunded).toBe("12500000"); // taken when it was recorded
    expect(left.events).toEqual([]);

    const second = await startServer(store);
    const completed = await until("the refund to complete after the restart", 120_000, async () => {
      const { refunds } = await refundsOf(second, setup, paid.id);
      return refunds[0]?.status === "completed" ? refunds : undefined;
    });
    const finishedAt = performance.now();
    expect(completed).toEqual([
      expect.objectContaining({
        id: refundId,
        paymentId: paid.id,
        amount: "12.50",
        status: "completed",
        txHash: recordedHash,
        reason: "crash",
      }),
    ]);
    expect(same(completed[0]?.destinationAddress, payer.address)).toBe(true);
    const receipt = await chain.getTransactionReceipt({ hash: recordedHash });
    expect(receipt.status).toBe("success");

    // A few more blocks and reconcile rounds: nothing is sent a second time.
    await sleep(3_000);
    expect((await usdc(payer.address)) - payerBefore).toBe(12_500_000n);
    expect(await usdc(setup.eoa)).toBe(parseUnits("30", 6) - 12_500_000n);
    expect(await sentCount(setup.eoa)).toBe(sentBefore + 1);
    expect((await paymentOf(second, setup, paid.id)).refundedAmount).toBe("12.50");
    // The client's retry with its key is answered with the refund as it stands: nothing new.
    const retried = await api(
      second,
      "POST",
      `/api/v1/payments/${paid.id}/refunds`,
      setup.liveKey,
      { amount: "12.5", reason: "crash" },
      { "idempotency-key": "crash-refund-1" },
    );
    expect(retried.status, JSON.stringify(retried.json)).toBe(201);
    expect(retried.json.refund).toEqual(completed[0]);
    expect(await sentCount(setup.eoa)).toBe(sentBefore + 1);
    expect((await refundsOf(second, setup, paid.id)).total).toBe(1);

    await stopService(second.child, "SIGTERM");
    expect(await second.exited, second.output()).toEqual({ code: 0, signal: null });
    const final = await store.read(async (database) => ({
      ...(await transfersOut(database, setup)),
      refunded: await refundedAmountOf(database, paid.id),
    }));
    expect(final.rows).toEqual([
      expect.objectContaining({ id: refundId, kind: "refund", status: "completed", tx_hash: recordedHash }),
    ]);
    expect(final.sent).toEqual([expect.objectContaining({ tx_hash: recordedHash, status: "mined" })]);
    expect(final.refunded).toBe("12500000");
    expect(final.events.map((e) => e.event_type)).toEqual(["refund.completed"]);
    expect(final.events[0]?.payload).toMatchObject({
      id: refundId,
      status: "completed",
      txHash: recordedHash,
    });
    console.info(
      `[refunds-crash] EOA refund: killed after ${((killedAt - started) / 1000).toFixed(1)} s, completed ${((finishedAt - killedAt) / 1000).toFixed(1)} s after the kill (restart included)`,
    );
  }, 300_000);
});

describe("the return of an unmatched transfer, the process killed -9 between its record and its broadcast", () => {
  it("ends completed exactly once after a restart: the sender paid back once, the transfer returned", async () => {
    const started = performance.now();
    const store = await newStore();
    const proxy = await holdingProxy();
    const first = await startServer(store, { LIVE_RPC_URL: proxy.url });
    const setup = await newWorkspace(first);
    await clients.fund(setup.eoa, { ETH: "1" });
    await mintToken(devnet, "USDC", setup.eoa, "20"); // money of its own besides the stray transfer
    const payer = await newPayer();
    const strayHash = await payer.payUsdc(setup.eoa, 6_660_000n);
    const transfer = await until("the stray transfer in the unmatched inbox", 60_000, async () => {
      const res = await api(first, "GET", "/api/v1/transfers/unmatched?limit=100", setup.liveKey);
      expect(res.status).toBe(200);
      return (res.json.transfers as Json[]).find((u) => same(u.txHash, strayHash));
    });
    expect(transfer).toMatchObject({ status: "open", amount: "6.66", paymentId: null });
    const payerBefore = await usdc(payer.address);
    const sentBefore = await sentCount(setup.eoa);

    proxy.arm(setup.eoa);
    // Returned once the chain confirms it (D19, as a payment is confirmed).
    await untilConfirmed(chain, strayHash);
    const path = `/api/v1/transfers/unmatched/${transfer.id}/return`;
    const hanging = hangingPost(first, path, setup.liveKey, {}, "crash-return-1");
    await proxy.whenHeld(first);
    await stopService(first.child, "SIGKILL");
    expect(await first.exited).toEqual({ code: null, signal: "SIGKILL" });
    proxy.drop();
    const killedAt = performance.now();
    expect(await hanging).toHaveProperty("error");

    expect(await usdc(payer.address)).toBe(payerBefore);
    expect(await sentCount(setup.eoa)).toBe(sentBefore);
    const left = await store.read(async (database) => ({
      ...(await transfersOut(database, setup)),
      inbox: await database.db
        .selectFrom("unmatched_transfers")
        .select(["status"])
        .where("id", "=", transfer.id as string)
        .executeTakeFirstOrThrow(),
    }));
    expect(left.rows).toEqual([
      expect.objectContaining({
        kind: "return",
        status: "processing",
        unmatched_transfer_id: transfer.id,
        amount: "6660000",
      }),
    ]);
    const returnId = left.rows[0]?.id as string;
    expect(left.sent).toEqual([
      expect.objectContaining({ purpose: "return", status: "signed", payout_id: returnId }),
    ]);
    const recordedHash = left.sent[0]?.tx_hash as Hex;
    expect(await rpc("eth_getTransactionByHash", [recordedHash])).toBeNull();
    expect(left.inbox.status).toBe("returned"); // claimed when the return was recorded

    const second = await startServer(store);
    // The client's retry with its key answers the return as it stands, until it completed.
    const done = await until("the return to complete after the restart", 120_000, async () => {
      const res = await api(second, "POST", path, setup.liveKey, {}, { "idempotency-key": "crash-return-1" });
      expect(res.status, JSON.stringify(res.json)).toBe(201);
      const r = res.json.refund as Json;
      return r.status === "completed" ? r : undefined;
    });
    const finishedAt = performance.now();
    expect(done).toMatchObject({
      id: returnId,
      paymentId: null,
      amount: "6.66",
      status: "completed",
      txHash: recordedHash,
    });
    expect(same(done.destinationAddress, payer.address)).toBe(true);

    await sleep(3_000);
    expect((await usdc(payer.address)) - payerBefore).toBe(6_660_000n);
    expect(await usdc(setup.eoa)).toBe(parseUnits("20", 6));
    expect(await sentCount(setup.eoa)).toBe(sentBefore + 1);
    const listed = await api(second, "GET", "/api/v1/transfers/unmatched?limit=100", setup.liveKey);
    expect((listed.json.transfers as Json[]).find((u) => u.id === transfer.id)).toMatchObject({
      status: "returned",
    });
    const again = await api(second, "POST", path, setup.liveKey, {});
    expect(again.status, JSON.stringify(again.json)).toBe(409);

    await stopService(second.child, "SIGTERM");
    expect(await second.exited, second.output()).toEqual({ code: 0, signal: null });
    const final = await store.read((database) => transfersOut(database, setup));
    expect(final.rows).toEqual([
      expect.objectContaining({ id: returnId, kind: "return", status: "completed", tx_hash: recordedHash }),
    ]);
    expect(final.sent).toEqual([expect.objectContaining({ tx_hash: recordedHash, status: "mined" })]);
    expect(final.events.map((e) => e.event_type)).toEqual(["refund.completed"]);
    expect(final.events[0]?.payload).toMatchObject({ id: returnId, paymentId: null, status: "completed" });
    console.info(
      `[refunds-crash] return: killed after ${((killedAt - started) / 1000).toFixed(1)} s, completed ${((finishedAt - killedAt) / 1000).toFixed(1)} s after the kill (restart included)`,
    );
  }, 300_000);
});

describe("a smart wallet refund, the process killed -9 with its user operation recorded and not mined", () => {
  it("ends completed exactly once after a restart, by the operation recorded before the crash", async () => {
    const started = performance.now();
    const store = await newStore();
    const first = await startServer(store);
    const setup = await newWorkspace(first);
    const wallet = await api(
      first,
      "POST",
      `/api/v1/workspaces/${setup.workspaceId}/smart-wallet`,
      setup.liveKey,
    );
    expect([200, 201], JSON.stringify(wallet.json)).toContain(wallet.status);
    const smart = (wallet.json.smartWallet as { address: Address }).address;
    const payer = await newPayer();
    const paid = await forwardedPayment(first, setup, payer, "20", "smart_wallet");
    expect(paid.receivingAddress).toBe(smart);
    await mintToken(devnet, "USDC", smart, "20");
    const payerBefore = await usdc(payer.address);

    // No more blocks: the operation is recorded and sent; the bundler's transaction waits in the pool.
    await stopMining();
    const hanging = hangingPost(
      first,
      `/api/v1/payments/${paid.id}/refunds`,
      setup.liveKey,
      { amount: "8", walletType: "smart_wallet" },
      "crash-smart-1",
    );
    const pending = await until("the refund's bundle in the node's pool", 60_000, async () => {
      if (first.child.exitCode !== null) throw new Error(`the service exited\n${first.output()}`);
      const txs = await pendingWhere((tx) => same(tx.to, aa.entryPoint));
      return txs.length > 0 ? txs : undefined;
    });
    expect(pending, `bundler: ${bundlerLog}`).toHaveLength(1);
    const bundleHash = pending[0]?.hash as Hex;
    await stopService(first.child, "SIGKILL");
    expect(await first.exited).toEqual({ code: null, signal: "SIGKILL" });
    const killedAt = performance.now();
    expect(await hanging).toHaveProperty("error");
    expect(await usdc(payer.address)).toBe(payerBefore);
    expect(await usdc(smart)).toBe(parseUnits("20", 6));

    const left = await store.read(async (database) => ({
      ...(await transfersOut(database, setup)),
      refunded: await refundedAmountOf(database, paid.id),
    }));
    expect(left.rows).toEqual([
      expect.objectContaining({
        kind: "refund",
        status: "processing",
        tx_hash: null,
        user_op_hash: expect.stringMatching(TX_HASH),
        user_operation: expect.any(String),
      }),
    ]);
    const refundId = left.rows[0]?.id as string;
    const userOpHash = left.rows[0]?.user_op_hash as Hex;
    expect(left.refunded).toBe("8000000");

    await restoreMining();
    const second = await startServer(store);
    const completed = await until(
      "the smart wallet refund to complete after the restart",
      120_000,
      async () => {
        const { refunds } = await refundsOf(second, setup, paid.id);
        return refunds[0]?.status === "completed" ? refunds : undefined;
      },
    );
    const finishedAt = performance.now();
    expect(completed).toEqual([
      expect.objectContaining({
        id: refundId,
        amount: "8.00",
        status: "completed",
        txHash: bundleHash,
        userOpHash,
      }),
    ]);
    const op = await bundler.getUserOperationReceipt({ hash: userOpHash });
    expect(op.success).toBe(true);
    expect(op.receipt.transactionHash).toBe(bundleHash);
    expect(same(op.sender, smart)).toBe(true);

    await sleep(3_000);
    expect((await usdc(payer.address)) - payerBefore).toBe(8_000_000n);
    expect(await usdc(smart)).toBe(parseUnits("12", 6));
    expect((await paymentOf(second, setup, paid.id)).refundedAmount).toBe("8.00");
    expect((await refundsOf(second, setup, paid.id)).total).toBe(1);

    await stopService(second.child, "SIGTERM");
    expect(await second.exited, second.output()).toEqual({ code: 0, signal: null });
    const final = await store.read(async (database) => ({
      ...(await transfersOut(database, setup)),
      refunded: await refundedAmountOf(database, paid.id),
    }));
    expect(final.rows).toEqual([
      expect.objectContaining({
        id: refundId,
        status: "completed",
        tx_hash: bundleHash,
        user_op_hash: userOpHash,
      }),
    ]);
    expect(final.refunded).toBe("8000000");
    expect(final.events.map((e) => e.event_type)).toEqual(["refund.completed"]);
    expect(final.events[0]?.payload).toMatchObject({ id: refundId, txHash: bundleHash, userOpHash });
    // Nothing left the EOA for it.
    expect(final.sent).toEqual([]);
    console.info(
      `[refunds-crash] smart wallet refund: killed after ${((killedAt - started) / 1000).toFixed(1)} s, completed ${((finishedAt - killedAt) / 1000).toFixed(1)} s after the kill (restart included)`,
    );
  }, 300_000);
});

describe("an EOA refund, the process killed -9 after its record and before its transaction is signed", () => {
  it("fails as never sent after a restart: nothing paid, its amount given back, refund.failed; a new refund then pays once", async () => {
    const store = await newStore();
    // Once armed, the node's pending count of the wallet (read by the sender after the refund is
    // recorded, before it signs) is never answered.
    let armed: string | undefined;
    let held = false;
    const proxy = await startRpcProxy(devnet.rpcUrl, async ({ method, params }) => {
      if (
        armed === undefined ||
        method !== "eth_getTransactionCount" ||
        params[1] !== "pending" ||
        !same(params[0], armed)
      )
        return undefined;
      held = true;
      return new Promise<undefined>(() => undefined);
    });
    cleanups.push(() => proxy.close());
    const first = await startServer(store, { LIVE_RPC_URL: proxy.url });
    const setup = await newWorkspace(first);
    await clients.fund(setup.eoa, { ETH: "1" });
    const payer = await newPayer();
    const paid = await forwardedPayment(first, setup, payer, "10");
    await mintToken(devnet, "USDC", setup.eoa, "10");
    const payerBefore = await usdc(payer.address);
    const sentBefore = await sentCount(setup.eoa);

    armed = setup.eoa;
    const path = `/api/v1/payments/${paid.id}/refunds`;
    const hanging = hangingPost(first, path, setup.liveKey, { amount: "4" }, "crash-unsigned-1");
    await until("the refund's sender to ask for the wallet's nonce", 60_000, async () => {
      if (first.child.exitCode !== null) throw new Error(`the service exited\n${first.output()}`);
      return held ? true : undefined;
    });
    await stopService(first.child, "SIGKILL");
    expect(await first.exited).toEqual({ code: null, signal: "SIGKILL" });
    expect(await hanging).toHaveProperty("error");

    const left = await store.read(async (database) => ({
      ...(await transfersOut(database, setup)),
      refunded: await refundedAmountOf(database, paid.id),
    }));
    expect(left.rows).toEqual([
      expect.objectContaining({ kind: "refund", status: "processing", tx_hash: null }),
    ]);
    const refundId = left.rows[0]?.id as string;
    expect(left.sent).toEqual([]); // nothing signed
    expect(left.refunded).toBe("4000000");

    // After a restart the reconciler fails it once its lease has run out: it was never sent.
    const second = await startServer(store);
    const failed = await until("the unsent refund to be failed", 120_000, async () => {
      const { refunds } = await refundsOf(second, setup, paid.id);
      return refunds[0]?.status === "failed" ? refunds[0] : undefined;
    });
    expect(failed).toMatchObject({ id: refundId, amount: "4.00", txHash: null });
    expect((await paymentOf(second, setup, paid.id)).refundedAmount).toBe("0.00");
    expect(await usdc(payer.address)).toBe(payerBefore);
    expect(await sentCount(setup.eoa)).toBe(sentBefore);
    // The client's retry with its key is answered with that refund, failed: nothing is sent.
    const retried = await api(
      second,
      "POST",
      path,
      setup.liveKey,
      { amount: "4" },
      {
        "idempotency-key": "crash-unsigned-1",
      },
    );
    expect(retried.status, JSON.stringify(retried.json)).toBe(201);
    expect(retried.json.refund).toMatchObject({ id: refundId, status: "failed" });
    expect(await sentCount(setup.eoa)).toBe(sentBefore);

    // The whole amount is refundable again, and paid exactly once.
    const fresh = await api(
      second,
      "POST",
      path,
      setup.liveKey,
      {},
      { "idempotency-key": "crash-unsigned-2" },
    );
    expect(fresh.status, JSON.stringify(fresh.json)).toBe(201);
    expect(fresh.json.refund).toMatchObject({ amount: "10.00", status: "completed" });
    await sleep(2_000);
    expect((await usdc(payer.address)) - payerBefore).toBe(10_000_000n);
    expect(await sentCount(setup.eoa)).toBe(sentBefore + 1);
    expect((await paymentOf(second, setup, paid.id)).refundedAmount).toBe("10.00");

    await stopService(second.child, "SIGTERM");
    expect(await second.exited, second.output()).toEqual({ code: 0, signal: null });
    const final = await store.read(async (database) => ({
      ...(await transfersOut(database, setup)),
      refunded: await refundedAmountOf(database, paid.id),
    }));
    expect(final.refunded).toBe("10000000");
    expect(final.rows.map((r) => [r.id === refundId, r.status]).sort()).toEqual([
      [false, "completed"],
      [true, "failed"],
    ]);
    // D19's events: the failed refund is announced (refund.failed), the new one completed.
    expect(final.events.map((e) => e.event_type).sort()).toEqual(["refund.completed", "refund.failed"]);
  }, 300_000);
});
