import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type RawBuilder, sql } from "kysely";
import { type Address, http, parseEventLogs, parseUnits, recoverTransactionAddress } from "viem";
import { type BundlerClient, createBundlerClient } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { rpc as devnetRpc, startDevnet, UNISWAP_V3_POOL_ABI } from "../../src/devnet/chain.ts";
import { type Database, openDatabase, pgliteDirFor } from "../../src/platform/db/database.ts";
import { freshDatabaseUrl } from "../support/app.ts";
import { type DevnetClients, devnetClients } from "../support/devnet-clients.ts";
import { creditToken } from "../support/devnet-credit.ts";
import { CRASH_ENV, liveSmartWalletEnv } from "../support/devnet-env.ts";
import { untilDefined } from "../support/poll.ts";
import { startRpcProxy } from "../support/rpc-proxy.ts";
import { startService, stopAllServices, stopService } from "../support/service-process.ts";

// Crash safety of swaps (D16: a transfer of kind "swap" through the payout operation, recorded
// before broadcast, finished by its reconciler), with the real process killed -9 and restarted on
// the same data, as test/refunds/crash.test.ts does for refunds: EOA swaps whose legs (an approval and
// the router call, or the call alone) are recorded and held from the node; a smart wallet's user
// operation in a bundle not mined; an EOA swap recorded and killed before anything was signed.
// Gas top-ups are off (threshold 0): a wallet's ETH moves only by its swaps and their gas.

type Json = Record<string, unknown>;
type Hex = `0x${string}`;
type ServiceProcess = Awaited<ReturnType<typeof startService>>;
type Token = "USDC" | "ETH";
type Amounts = { sold: bigint; bought: bigint };
/** What holds a swap on its way while the process is killed (`crash`). */
type Hold = "broadcast" | "pending nonce" | "bundle";
type Logs = Parameters<typeof parseEventLogs>[0]["logs"];
type Setup = { workspaceId: string; eoa: Address; key: string };
const ADMIN = "swaps-crash-admin-secret-0123456789";
const TX_HASH = /^0x[0-9a-f]{64}$/;
const same = (a: unknown, b: string) => typeof a === "string" && a.toLowerCase() === b.toLowerCase();
const since = (start: number) => `${((performance.now() - start) / 1000).toFixed(1)} s`;

/** Polls `probe` every 100 ms until it gives a value (support/poll.ts), for at most `ms`. */
const until = <T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> =>
  untilDefined(what, probe, ms, 100);

let devnet: Awaited<ReturnType<typeof startDevnet>>;
let env: Record<string, string>;
let clients: DevnetClients;
let bundler: BundlerClient;
let bundlerLog = "";
const cleanups: Array<() => Promise<void>> = [];
const rpc = (method: string, params: unknown[]) => devnetRpc(devnet.rpcUrl, method, params);

/** Off: no blocks at all. On: the devnet's defaults, a block on every transaction and one a second. */
async function setMining(on: boolean): Promise<void> {
  await rpc("evm_setAutomine", [on]);
  await rpc("evm_setIntervalMining", [on ? 1000 : 0]);
}

beforeAll(async () => {
  const onBundlerOutput = (text: string) => {
    bundlerLog = (bundlerLog + text).slice(-20_000);
  };
  devnet = await startDevnet({ accountAbstraction: true, swaps: true, onBundlerOutput });
  const { aa, swap } = devnet;
  if (!aa || !swap) throw new Error("the devnet came up without account abstraction or swaps");
  env = liveSmartWalletEnv(devnet, aa, {
    LIVE_SWAP_ROUTER_ADDRESS: swap.router,
    LIVE_SWAP_QUOTER_ADDRESS: swap.quoter,
    LIVE_SWAP_FACTORY_ADDRESS: swap.factory,
    LIVE_WETH_ADDRESS: swap.weth,
    LIVE_SWAP_FEE_TIERS: "500,3000",
    LIVE_GAS_TOPUP_THRESHOLD_WEI: "0",
    ADMIN_SECRET: ADMIN,
    ...CRASH_ENV,
  });
  clients = devnetClients(devnet);
  bundler = createBundlerClient({ client: clients.chain, transport: http(aa.bundlerUrl) });
}, 240_000);

afterEach(async () => {
  await stopAllServices("SIGKILL");
  if (devnet) await setMining(true).catch(() => undefined);
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

afterAll(async () => {
  await stopAllServices("SIGKILL");
  await devnet?.stop();
});

// ---------------------------------------------------------------------------------------------
// The service, its data and its API

/** PGlite in a DATA_DIR (read only while no process has it open), or a fresh PostgreSQL database. */
async function newStore() {
  const dataDir = mkdtempSync(join(tmpdir(), "swaps-crash-"));
  cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
  const fresh = await freshDatabaseUrl();
  if (fresh) cleanups.push(() => fresh.drop());
  const database = fresh ? { databaseUrl: fresh.url, poolSize: 2 } : { pgliteDir: pgliteDirFor(dataDir) };
  const masterKey = randomBytes(32).toString("hex");
  const env: Record<string, string> = { DATA_DIR: dataDir };
  if (fresh) Object.assign(env, { DATABASE_URL: fresh.url, MASTER_KEY: masterKey });
  return {
    env,
    async read<T>(fn: (database: Database) => Promise<T>): Promise<T> {
      const opened = await openDatabase(database);
      return fn(opened).finally(() => opened.close());
    },
  };
}
type Store = Awaited<ReturnType<typeof newStore>>;

const startServer = (store: Store, extra: Record<string, string> = {}) =>
  startService({ ...env, ...store.env, ...extra });

/** A JSON request (a POST when it has a body), `key` as its Idempotency-Key. */
async function call(server: ServiceProcess, token: string, path: string, body?: Json, key?: string) {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (key !== undefined) headers["idempotency-key"] = key;
  const method = body === undefined ? "GET" : "POST";
  const init = { method, headers, body: JSON.stringify(body), signal: AbortSignal.timeout(30_000) };
  const res = await fetch(`${server.baseUrl}${path}`, init);
  return { status: res.status, json: (await res.json()) as Json, headers: res.headers };
}

async function newWorkspace(server: ServiceProcess): Promise<Setup> {
  const [name, settlementAddress] = ["Swaps Crash Co", privateKeyToAccount(generatePrivateKey()).address];
  const created = await call(server, ADMIN, "/api/v1/workspaces", { name, settlementAddress });
  expect(created.status, JSON.stringify(created.json)).toBe(201);
  const workspace = created.json.workspace as { id: string; eoa: { address: Address } };
  const key = (created.json.apiKeys as { live: { key: string } }).live.key;
  return { workspaceId: workspace.id, eoa: workspace.eoa.address, key };
}

/** The swap API of `setup`'s workspace on `server`. */
function swapsApi(server: ServiceProcess, setup: Setup) {
  const post = (quoteId: string, key: string) => call(server, setup.key, "/api/v1/swap", { quoteId }, key);
  return {
    post,
    async quote(sell: Token, buy: Token, amount: string, walletType = "eoa") {
      const query = `sellToken=${sell}&buyToken=${buy}&sellAmount=${amount}&walletType=${walletType}`;
      const res = await call(server, setup.key, `/api/v1/swap/quote?${query}`);
      expect(res.status, JSON.stringify(res.json)).toBe(200);
      const [hop, ...more] = res.json.route as Array<{ pool: Address }>;
      expect(more).toEqual([]);
      const { quoteId, fromAddress } = res.json;
      return { quoteId: String(quoteId), pool: hop?.pool ?? "0x", from: String(fromAddress) };
    },
    /** POST /api/v1/swap with the process killed under it: resolves with its answer, or the error it met. */
    hanging: (quoteId: string, key: string) => post(quoteId, key).catch((err: Error) => err),
    /** The one swap, listed pending (recorded) while its request is held on the chain. */
    listedPending: () =>
      until("the swap to be listed pending", 30_000, async () => {
        const swaps = (await call(server, setup.key, "/api/v1/swaps")).json.swaps as Json[];
        return swaps[0]?.status === "pending" ? String(swaps[0].swapId) : undefined;
      }),
    ended: (id: string, status: "completed" | "failed") =>
      until(`swap ${id} to be ${status}`, 120_000, async () => {
        const res = await call(server, setup.key, `/api/v1/swaps/${id}`);
        expect(res.status, JSON.stringify(res.json)).toBe(200);
        return res.json.status === status ? res.json : undefined;
      }),
  };
}

/** Kills the process -9 under its hanging swap request; returns when. */
async function kill(server: ServiceProcess, hanging: Promise<unknown>): Promise<number> {
  await stopService(server.child, "SIGKILL");
  expect(await server.exited).toEqual({ code: null, signal: "SIGKILL" });
  expect(await hanging).toBeInstanceOf(Error);
  return performance.now();
}

async function stopCleanly(server: ServiceProcess): Promise<void> {
  await stopService(server.child, "SIGTERM");
  expect(await server.exited, server.output()).toEqual({ code: 0, signal: null });
}

/** What the service recorded: the workspace's transfers and swaps, its EOA's transactions, swap.* events. */
async function recorded(database: Database, { workspaceId, eoa }: Setup) {
  const all = (query: RawBuilder<Json>) => query.execute(database.db).then((result) => result.rows);
  return {
    rows: await all(sql<Json>`SELECT id, kind, status, tx_hash, user_op_hash, user_operation
      FROM payouts WHERE workspace_id = ${workspaceId} ORDER BY created_at`),
    swaps: await all(sql<Json>`SELECT id, sold_amount::text AS sold, bought_amount::text AS bought
      FROM swaps WHERE workspace_id = ${workspaceId} ORDER BY created_at`),
    sent: await all(sql<Json>`SELECT tx_hash, status, purpose, payout_id, nonce::int AS nonce
      FROM chain_transactions WHERE lower(from_address) = ${eoa.toLowerCase()} ORDER BY nonce`),
    events: await all(sql<Json>`SELECT event_type, payload FROM outbox_events
      WHERE workspace_id = ${workspaceId} AND event_type LIKE 'swap.%' ORDER BY id`),
  };
}

/** After the last process stopped: the swap completed once, its amounts stored, one swap.completed. */
async function expectCompletedOnce(store: Store, setup: Setup, done: Json, amounts: Amounts) {
  const final = await store.read((database) => recorded(database, setup));
  const { swapId: id, txHash, userOpHash = null } = done;
  expect(final.rows).toEqual([expect.objectContaining({ id, status: "completed", tx_hash: txHash })]);
  expect(final.rows[0]?.user_op_hash).toBe(userOpHash);
  expect(final.swaps).toEqual([{ id, sold: String(amounts.sold), bought: String(amounts.bought) }]);
  expect(final.events.map((e) => e.event_type)).toEqual(["swap.completed"]);
  expect(final.events[0]?.payload).toMatchObject({ swapId: id, status: "completed", txHash });
  expectAmounts(final.events[0]?.payload, amounts, String(done.sellToken), String(done.buyToken));
  return final;
}

// ---------------------------------------------------------------------------------------------
// The chain

const tokenAddress = (token: string) => (token === "ETH" ? devnet.swap?.weth : devnet.tokens.USDC) ?? "0x";
const decimals = (token: string) => (token === "ETH" ? 18 : 6);
const nonceOf = (address: Address) => clients.chain.getTransactionCount({ address });
const balances = async (address: Address): Promise<Record<Token, bigint>> => ({
  ETH: await clients.chain.getBalance({ address }),
  USDC: await clients.usdcBalance(address),
});
const receiptOf = (hash: unknown) => clients.chain.getTransactionReceipt({ hash: String(hash) as Hex });

/** What `pool`'s one Swap event among `logs` says was sold and bought (its positive amount came in). */
function poolSwap(logs: Logs, pool: string, sell: Token, buy: Token): Amounts {
  const events = parseEventLogs({ abi: UNISWAP_V3_POOL_ABI, eventName: "Swap", logs });
  const [event, ...more] = events.filter((l) => same(l.address, pool));
  expect(more).toEqual([]);
  if (!event) throw new Error(`no Swap event of pool ${pool}`);
  const { amount0, amount1 } = event.args;
  const sellIsToken0 = BigInt(tokenAddress(sell)) < BigInt(tokenAddress(buy));
  const [sold, bought] = sellIsToken0 ? [amount0, -amount1] : [amount1, -amount0];
  expect(sold > 0n && bought > 0n).toBe(true);
  return { sold, bought };
}

/** A swap view's (or event's) amounts, in smallest units, are the pool's. */
function expectAmounts(view: unknown, amounts: Amounts, sell: string, buy: string) {
  const { sellAmount, buyAmount } = view as { sellAmount: string; buyAmount: string };
  const sold = parseUnits(sellAmount, decimals(sell));
  expect({ sold, bought: parseUnits(buyAmount, decimals(buy)) }).toEqual(amounts);
}

/** `count` more blocks (one a second), and as many of the service's reconcile rounds. */
async function blocksPass(count: number): Promise<void> {
  const from = await clients.chain.getBlockNumber();
  await until(`${count} more blocks`, 30_000, async () =>
    (await clients.chain.getBlockNumber()) >= from + BigInt(count) ? true : undefined,
  );
}

/**
 * An RPC proxy in front of the devnet that, once armed with a wallet, holds (never answers) its
 * first broadcast of a transaction that wallet signed, or every read of its pending nonce.
 */
async function holdingProxy(what: Exclude<Hold, "bundle">) {
  const armed: { wallet?: string } = {};
  let held = false;
  const proxy = await startRpcProxy(devnet.rpcUrl, async ({ method, params }) => {
    const [[first, second], wallet] = [params, armed.wallet];
    if (wallet === undefined || (what === "broadcast" && held)) return undefined;
    if (what === "pending nonce" && method === "eth_getTransactionCount" && second === "pending") {
      if (!same(first, wallet)) return undefined;
    } else if (what === "broadcast" && method === "eth_sendRawTransaction") {
      const serializedTransaction = first as `0x02${string}`;
      if (!same(await recoverTransactionAddress({ serializedTransaction }), wallet)) return undefined;
    } else return undefined;
    held = true;
    return new Promise<undefined>(() => undefined);
  });
  cleanups.push(() => proxy.close());
  const whenHeld = (server: ServiceProcess) =>
    until(`the wallet's ${what} to be held`, 60_000, async () => {
      if (server.child.exitCode !== null) throw new Error(`the service exited\n${server.output()}`);
      return held ? true : undefined;
    });
  return { url: proxy.url, armed, whenHeld };
}

/**
 * A swap of a fresh workspace (its EOA: 1 ETH; the selling wallet: 500 USDC), the process killed
 * -9 once it is held: its EOA's broadcast or pending nonce by a proxy, or its smart wallet's bundle
 * in the node's pool (no blocks). Nothing moved; the swap recorded processing, nothing announced.
 */
async function crash(hold: Hold, sell: Token, buy: Token, amount: string) {
  const store = await newStore();
  const proxy = await holdingProxy(hold === "pending nonce" ? hold : "broadcast");
  const first = await startServer(store, { LIVE_RPC_URL: proxy.url });
  const setup = await newWorkspace(first);
  await clients.credit(setup.eoa, { ETH: "1" });
  let wallet = setup.eoa;
  if (hold === "bundle") {
    const created = await call(first, setup.key, `/api/v1/workspaces/${setup.workspaceId}/smart-wallet`, {});
    expect([200, 201], JSON.stringify(created.json)).toContain(created.status);
    wallet = (created.json.smartWallet as { address: Address }).address;
  }
  await creditToken(devnet, "USDC", wallet, "500");
  const [before, nonce] = [await balances(wallet), await nonceOf(setup.eoa)];
  const q = await swapsApi(first, setup).quote(sell, buy, amount, hold === "bundle" ? "smart_wallet" : "eoa");
  expect(same(q.from, wallet)).toBe(true);
  if (hold === "bundle") await setMining(false);
  else proxy.armed.wallet = setup.eoa;
  const hanging = swapsApi(first, setup).hanging(q.quoteId, "crash-1");
  // The bundle's transaction hash (smart wallet); for an EOA, only that the proxy holds the wallet.
  const bundle = hold === "bundle" ? await bundleInPool(first) : await proxy.whenHeld(first);
  const id = await swapsApi(first, setup).listedPending();
  const killedAt = await kill(first, hanging);
  expect([await balances(wallet), await nonceOf(setup.eoa)]).toEqual([before, nonce]);
  const left = await store.read((database) => recorded(database, setup));
  const processing = { id, kind: "swap", status: "processing", tx_hash: null };
  expect(left.rows).toEqual([expect.objectContaining(processing)]);
  expect([left.swaps, left.events]).toEqual([[{ id, sold: null, bought: null }], []]);
  return { store, setup, wallet, before, nonce, q, id, left, killedAt, bundle };
}

/** The one bundle (to the EntryPoint) in the node's pool, while no blocks are mined. */
const bundleInPool = (server: ServiceProcess) =>
  until("the swap's bundle in the node's pool", 60_000, async () => {
    if (server.child.exitCode !== null) throw new Error(`the service exited\n${server.output()}`);
    const block = (await rpc("eth_getBlockByNumber", ["pending", true])) as { transactions: Json[] } | null;
    const txs = (block?.transactions ?? []).filter((tx) => same(tx.to, devnet.aa?.entryPoint ?? ""));
    expect(txs.length, `bundler: ${bundlerLog}`).toBeLessThanOrEqual(1);
    return txs[0]?.hash;
  });

/** An EOA swap whose `legs` are recorded and held from the node, killed -9, then restarted. */
async function completesOnceAfterRestart(sell: Token, buy: Token, amount: string, legs: readonly string[]) {
  const { store, setup, before, nonce, q, id, left, killedAt } = await crash("broadcast", sell, buy, amount);
  // Every leg signed and recorded, in nonce order, and unknown to the node.
  expect(left.sent.map((t) => [t.purpose, t.status, t.payout_id, t.nonce])).toEqual(
    legs.map((purpose, i) => [purpose, "signed", id, nonce + i]),
  );
  for (const t of left.sent) expect(await rpc("eth_getTransactionByHash", [t.tx_hash])).toBeNull();

  const second = await startServer(store);
  const done = await swapsApi(second, setup).ended(id, "completed");
  const took = since(killedAt);
  const swapHash = left.sent.at(-1)?.tx_hash;
  expect(done).toMatchObject({ quoteId: q.quoteId, txHash: swapHash, walletType: "eoa" });
  const receipts = await Promise.all(left.sent.map((t) => receiptOf(t.tx_hash)));
  expect(receipts.map((r) => r.status)).toEqual(legs.map(() => "success"));
  const amounts = poolSwap(receipts.at(-1)?.logs ?? [], q.pool, sell, buy);
  expectAmounts(done, amounts, sell, buy);

  // More blocks and reconcile rounds: nothing sent again; the wallet paid once, and the gas.
  await blocksPass(3);
  const gas = receipts.reduce((sum, r) => sum + r.gasUsed * r.effectiveGasPrice, 0n);
  const after = await balances(setup.eoa);
  expect(after[sell]).toBe(before[sell] - amounts.sold - (sell === "ETH" ? gas : 0n));
  expect(after[buy]).toBe(before[buy] + amounts.bought - (buy === "ETH" ? gas : 0n));
  // The client's retry with its key is answered with that swap: nothing new.
  const retried = await swapsApi(second, setup).post(q.quoteId, "crash-1");
  const replayed = retried.headers.get("idempotent-replayed");
  expect([retried.status, replayed, retried.json]).toEqual([200, "true", done]);
  expect(await nonceOf(setup.eoa)).toBe(nonce + legs.length);

  await stopCleanly(second);
  const final = await expectCompletedOnce(store, setup, done, amounts);
  expect(final.sent.map((t) => t.status)).toEqual(legs.map(() => "mined"));
  console.info(`[swaps-crash] EOA ${sell} → ${buy}: completed ${took} after the kill (restart included)`);
  // The event's data is the swap as the API answers it (D16), completedAt included.
  expect(final.events[0]?.payload).toEqual(done);
}

// ---------------------------------------------------------------------------------------------

describe("a swap, the process killed -9 while it is on its way", () => {
  it(
    "EOA USDC → ETH, its approval and router call recorded, not broadcast: completed exactly once after a restart",
    () => completesOnceAfterRestart("USDC", "ETH", "300", ["swap_approval", "swap"]),
    300_000,
  );
  it(
    "EOA ETH → USDC, its router call recorded, not broadcast: completed exactly once after a restart",
    () => completesOnceAfterRestart("ETH", "USDC", "0.05", ["swap"]),
    300_000,
  );

  it("smart wallet USDC → ETH, its user operation in a bundle not mined: completed exactly once after a restart, by it", async () => {
    const crashed = await crash("bundle", "USDC", "ETH", "200");
    const { store, setup, wallet: smart, before, nonce, q, id, left, killedAt, bundle } = crashed;
    const recordedOp = { user_op_hash: expect.stringMatching(TX_HASH), user_operation: expect.any(String) };
    expect(left.rows).toEqual([expect.objectContaining(recordedOp)]);
    expect(left.sent).toEqual([]);

    await setMining(true);
    const second = await startServer(store);
    const done = await swapsApi(second, setup).ended(id, "completed");
    const took = since(killedAt);
    const userOpHash = left.rows[0]?.user_op_hash;
    expect(done).toMatchObject({ txHash: bundle, userOpHash, walletType: "smart_wallet" });
    const op = await bundler.getUserOperationReceipt({ hash: String(userOpHash) as Hex });
    expect(op).toMatchObject({ success: true, receipt: { transactionHash: bundle } });
    expect(same(op.sender, smart)).toBe(true);
    const amounts = poolSwap(op.logs, q.pool, "USDC", "ETH");
    expectAmounts(done, amounts, "USDC", "ETH");

    // Sponsored: the smart wallet's balances moved by the swap alone, once; nothing left the EOA.
    await blocksPass(3);
    const after = { USDC: before.USDC - amounts.sold, ETH: before.ETH + amounts.bought };
    expect([await balances(smart), await nonceOf(setup.eoa)]).toEqual([after, nonce]);

    await stopCleanly(second);
    const final = await expectCompletedOnce(store, setup, done, amounts);
    expect(final.sent).toEqual([]);
    console.info(`[swaps-crash] smart wallet: completed ${took} after the kill (restart included)`);
    expect(final.events[0]?.payload).toEqual(done);
  }, 300_000);

  it("EOA USDC → ETH, killed before anything was signed: failed as never sent, swap.failed; a new swap then completes", async () => {
    // The node's pending count of the wallet, asked for as the swap is checked and awaited only
    // once it is recorded, before it signs, is never answered.
    const { store, setup, before, nonce, q, id, left } = await crash("pending nonce", "USDC", "ETH", "100");
    expect(left.sent).toEqual([]); // nothing signed

    // After a restart the reconciler fails it once its lease has run out: it was never sent.
    const second = await startServer(store);
    const api = swapsApi(second, setup);
    const failed = await api.ended(id, "failed");
    expect(failed).toMatchObject({ txHash: null, error: expect.stringContaining("not sent") });
    expect([await balances(setup.eoa), await nonceOf(setup.eoa)]).toEqual([before, nonce]);
    const retried = await api.post(q.quoteId, "crash-1");
    expect([retried.status, retried.json]).toEqual([200, failed]);

    // A new quote and swap: an approval and the router call, completed, paid once.
    const again = await api.quote("USDC", "ETH", "100");
    const fresh = await api.post(again.quoteId, "crash-2");
    const freshId = fresh.json.swapId;
    expect(fresh.status, JSON.stringify(fresh.json)).toBe(200);
    expect(fresh.json).toMatchObject({ status: "completed", txHash: expect.stringMatching(TX_HASH) });
    const amounts = poolSwap((await receiptOf(fresh.json.txHash)).logs, again.pool, "USDC", "ETH");
    expectAmounts(fresh.json, amounts, "USDC", "ETH");
    await blocksPass(2);
    expect((await balances(setup.eoa)).USDC).toBe(before.USDC - amounts.sold);
    expect(await nonceOf(setup.eoa)).toBe(nonce + 2);

    await stopCleanly(second);
    const final = await store.read((database) => recorded(database, setup));
    expect(final.rows.map((r) => `${r.id} ${r.status}`)).toEqual([`${id} failed`, `${freshId} completed`]);
    expect(final.swaps[0]).toEqual({ id, sold: null, bought: null });
    expect(final.sent.map((t) => `${t.purpose} ${t.status}`)).toEqual(["swap_approval mined", "swap mined"]);
    // The swap kind announces a failure before sending: whoever asked may never have had an answer.
    const events = final.events.map((e) => `${e.event_type} ${(e.payload as Json).swapId}`);
    expect(events).toEqual([`swap.failed ${id}`, `swap.completed ${freshId}`]);
    expect(final.events[0]?.payload).toEqual({ ...failed, error: expect.stringContaining("not sent") });
  }, 300_000);
});
