// What the refund crash suites (test/refunds/crash*.test.ts) share.

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
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import { type Devnet, rpc as devnetRpc, mintToken, startDevnet } from "../../src/devnet/chain.ts";
import { type Database, openDatabase, pgliteDirFor } from "../../src/platform/db/database.ts";
import { freshDatabaseUrl } from "./app.ts";
import { type DevnetClients, devnetClients } from "./devnet-clients.ts";
import { liveSmartWalletEnv } from "./devnet-env.ts";
import { type RpcHook, startRpcProxy } from "./rpc-proxy.ts";
import {
  callService,
  type Json,
  type ServiceProcess,
  startService,
  stopAllServices,
} from "./service-process.ts";

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
export const MASTER_KEY = randomBytes(32).toString("hex");
export const TX_HASH = /^0x[0-9a-f]{64}$/;

export const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
export const same = (a: unknown, b: string) => typeof a === "string" && a.toLowerCase() === b.toLowerCase();
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function until<T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(100);
  }
}

export let devnet: Devnet;
export let aa: NonNullable<Devnet["aa"]>;
export let env: Record<string, string>;
export let chain: PublicClient;
export let bundler: BundlerClient;
export let clients: DevnetClients;
export let bundlerLog = "";
export const cleanups: Array<() => Promise<void>> = [];

export const rpc = (method: string, params: unknown[]) => devnetRpc(devnet.rpcUrl, method, params);

/** The devnet's defaults: a block on every transaction and one every second. */
export async function restoreMining(): Promise<void> {
  await rpc("evm_setAutomine", [true]);
  await rpc("evm_setIntervalMining", [1000]);
}

export async function stopMining(): Promise<void> {
  await rpc("evm_setAutomine", [false]);
  await rpc("evm_setIntervalMining", [0]);
}

// ---------------------------------------------------------------------------------------------
// Where the service keeps its data

export interface Store {
  env: Record<string, string>;
  read<T>(fn: (database: Database) => Promise<T>): Promise<T>;
}

/** PGlite in a DATA_DIR (read only while no process has it open), or a fresh PostgreSQL database. */
export async function newStore(): Promise<Store> {
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

export const startServer = (store: Store, extra: Record<string, string> = {}) =>
  startService({ ...env, ...store.env, ADMIN_SECRET: ADMIN, ...extra });

/** Requests here may take up to 30 s (callService's default is 15 s). */
export const api = (
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

/** Transactions in the node's pool (the pending block) matching `predicate`. */
export async function pendingWhere(
  predicate: (tx: { hash: Hex; from: string; to: string | null }) => boolean,
) {
  const block = (await rpc("eth_getBlockByNumber", ["pending", true])) as {
    transactions: Array<{ hash: Hex; from: string; to: string | null }>;
  } | null;
  return (block?.transactions ?? []).filter(predicate);
}

/**
 * An RPC proxy in front of the devnet that, once armed with a wallet, holds the first broadcast of
 * a transaction that wallet signed; `drop()` then loses it (the node never gets it).
 */
export async function holdingProxy() {
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
  const payment = await until(`payment ${id} to be forwarded`, 120_000, async () => {
    const p = await paymentOf(server, setup, id);
    if (p.status === "failed") throw new Error(`payment failed: ${String(p.failureReason)}`);
    return p.status === "forwarded" ? p : undefined;
  });
  expect(same(payment.payerAddress, payer.address)).toBe(true);
  return { id, merchant, receivingAddress };
}

export async function refundsOf(server: ServiceProcess, setup: Setup, paymentId: string) {
  const res = await api(server, "GET", `/api/v1/payments/${paymentId}/refunds`, setup.liveKey);
  expect(res.status, JSON.stringify(res.json)).toBe(200);
  return res.json as { refunds: Json[]; total: number };
}

/** The workspace's transfers out (payouts table, every kind) and their chain transactions and events. */
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
}
