import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Hex, http, recoverTransactionAddress } from "viem";
import { type BundlerClient, createBundlerClient } from "viem/account-abstraction";
import { afterAll, afterEach, beforeAll } from "vitest";
import { type Devnet, rpc as devnetRpc, startDevnet } from "../../src/devnet/chain.ts";
import { type Database, openDatabase, pgliteDirFor } from "../../src/platform/db/database.ts";
import { freshDatabaseUrl } from "./app.ts";
import { type DevnetClients, devnetClients } from "./devnet-clients.ts";
import { CRASH_ENV, liveSmartWalletEnv } from "./devnet-env.ts";
import {
  copyMigratedDatabase,
  prepareMigratedDatabase,
  removeMigratedTemplate,
} from "./migrated-template.ts";
import { untilDefined } from "./poll.ts";
import { type RpcHook, startRpcProxy } from "./rpc-proxy.ts";
import {
  callService,
  type Json,
  type ServiceProcess,
  startService,
  stopAllServices,
} from "./service-process.ts";

// The harness of the crash suites (refunds, splits, smart wallet payouts), written once: a devnet
// with account abstraction whose mining the test can stop, the real service process (`node src/main.ts`)
// started on a store of its own and killed -9 at the worst moments, and an RPC proxy that holds a
// wallet's broadcast while it is killed. Module state is per test file (vitest isolates files).

export const MASTER_KEY = randomBytes(32).toString("hex");

/** What the suite's hooks started, handed to it once the devnet is up. */
export interface CrashDevnet {
  devnet: Devnet;
  aa: NonNullable<Devnet["aa"]>;
  /** The service's variables for that devnet (live EOA and smart wallet). */
  env: Record<string, string>;
  clients: DevnetClients;
  bundler: BundlerClient;
}

let devnet: Devnet | undefined;
let env: Record<string, string> = {};
let adminSecret = "";
/** The last 20,000 characters the bundler wrote, for failure messages. */
export let bundlerLog = "";
/** Run after each test, last pushed first: temporary folders, databases, proxies. */
export const cleanups: Array<() => Promise<void>> = [];

function started(): Devnet {
  if (!devnet) throw new Error("the crash harness's devnet is not started (useCrashDevnet)");
  return devnet;
}

/**
 * Registers the file's hooks: before all, a devnet with account abstraction (handed to `ready`);
 * after each test, every service process killed, mining restored and the cleanups run; after all,
 * the devnet stopped. `admin` is the ADMIN_SECRET of the processes startServer starts.
 */
export function useCrashDevnet(admin: string, ready: (d: CrashDevnet) => void): void {
  adminSecret = admin;
  beforeAll(async () => {
    // The stores' migrated database is made while the devnet starts.
    [devnet] = await Promise.all([
      startDevnet({
        accountAbstraction: true,
        onBundlerOutput: (text) => {
          bundlerLog = (bundlerLog + text).slice(-20_000);
        },
      }),
      prepareMigratedDatabase(),
    ]);
    if (!devnet.aa) throw new Error("startDevnet({ accountAbstraction: true }) returned no aa");
    const aa = devnet.aa;
    env = liveSmartWalletEnv(devnet, aa, CRASH_ENV);
    const clients = devnetClients(devnet);
    const bundler = createBundlerClient({
      client: clients.chain,
      transport: http(aa.bundlerUrl),
      pollingInterval: 100,
    });
    ready({ devnet, aa, env, clients, bundler });
  }, 180_000);

  afterEach(async () => {
    await stopAllServices("SIGKILL");
    if (devnet) await restoreMining().catch(() => undefined);
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  });

  afterAll(async () => {
    await stopAllServices("SIGKILL");
    await devnet?.stop();
    devnet = undefined;
    await removeMigratedTemplate();
  });
}

export const rpc = (method: string, params: unknown[]) => devnetRpc(started().rpcUrl, method, params);

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
  /** The variables that point a service process at it. */
  env: Record<string, string>;
  /** PostgreSQL: readable while the service runs; PGlite only once it has stopped. */
  shared: boolean;
  read<T>(fn: (database: Database) => Promise<T>): Promise<T>;
}

/**
 * PGlite in a DATA_DIR (read only while no process has it open), migrated already
 * (migrated-template.ts), or a fresh PostgreSQL database.
 */
export async function newStore(prefix: string): Promise<Store> {
  const dataDir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
  const fresh = await freshDatabaseUrl();
  if (fresh) cleanups.push(() => fresh.drop());
  else await copyMigratedDatabase(dataDir);
  const open = () =>
    fresh
      ? openDatabase({ databaseUrl: fresh.url, poolSize: 2 })
      : openDatabase({ pgliteDir: pgliteDirFor(dataDir) });
  return {
    env: fresh ? { DATA_DIR: dataDir, DATABASE_URL: fresh.url, MASTER_KEY } : { DATA_DIR: dataDir },
    shared: fresh !== undefined,
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
  startService({ ...env, ...store.env, ADMIN_SECRET: adminSecret, ...extra });

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

// ---------------------------------------------------------------------------------------------
// The node seen by the service

/** Transactions in the node's pool (the pending block) matching `predicate`. */
export async function pendingWhere(
  predicate: (tx: { hash: Hex; from: string; to: string | null }) => boolean,
) {
  const block = (await rpc("eth_getBlockByNumber", ["pending", true])) as {
    transactions: Array<{ hash: Hex; from: string; to: string | null }>;
  } | null;
  return (block?.transactions ?? []).filter(predicate);
}

const same = (a: string | null | undefined, b: string) => a?.toLowerCase() === b.toLowerCase();

/**
 * An RPC proxy in front of the devnet that, once armed with a wallet, holds the `nth` broadcast
 * of a transaction that wallet signed (the ones before pass); `drop()` then loses it (the node
 * never gets it), `pass()` hands it to the node. `whenHeld` waits for it (bounded, `what` naming
 * it) and throws if the server exits first.
 */
export async function holdingProxy(options: { nth: number; what: string; whenHeldMs: number }) {
  let from: string | undefined;
  let seen = 0;
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
    seen += 1;
    if (seen !== options.nth) return undefined;
    held = true;
    return released;
  };
  const proxy = await startRpcProxy(started().rpcUrl, hook);
  cleanups.push(async () => {
    release("drop");
    await proxy.close();
  });
  return {
    url: proxy.url,
    arm: (wallet: string) => {
      from = wallet;
    },
    whenHeld: (server: ServiceProcess, ms = options.whenHeldMs) =>
      untilDefined(
        options.what,
        async () => {
          if (server.child.exitCode !== null || server.child.signalCode !== null)
            throw new Error(`the service exited\n${server.output()}`);
          return held ? true : undefined;
        },
        ms,
      ),
    drop: () => release("drop"),
    pass: () => release(undefined),
  };
}
