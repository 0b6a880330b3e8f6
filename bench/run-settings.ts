import { resolve } from "node:path";
import { cleanups, envInt, QUICK } from "./support.ts";

// bench/run.ts's settings (from the environment; see its header), its constants and goals, and the
// log and cleanup steps its modules share.

export type DbKind = "postgres" | "pglite";
export type Endpoint = "create" | "get";
export type ServerKind = "service" | "baseline";

export const HOST = "127.0.0.1";
export const POOL_SIZE = 10; // the service's default pool (src/platform/db/database.ts)
export const RATE_LIMIT_SANDBOX = "10000000"; // the limiter keeps running, it just never says 429
export const SETTLEMENT_ADDRESS = "0x1111111111111111111111111111111111111111";
export const CREATE_BODY = JSON.stringify({ tokenSymbol: "USDC", amount: "100" });

/**
 * Issue 43: create at least the baseline's req/s with a p99 within 1.2× the baseline's; GET at
 * least 70% of the baseline's req/s; at 64 connections, on PostgreSQL.
 */
export const GOALS = { createRatio: 1, createP99Factor: 1.2, getRatio: 0.7, connections: 64 };

/**
 * The GETs read this many different payments, of GET_WORKSPACES workspaces (each its own key),
 * in turn: concurrent requests for one row with one key would flatter a server that coalesces
 * concurrent lookups (the service does).
 */
export const GET_ROWS = 256;
export const GET_WORKSPACES = 8;

/** More CPU than this taken by other processes during a scenario makes its figures suspect. */
export const DISTURBED_CORES = 0.2;
/** Busy share of the whole machine under which it counts as quiet. */
export const QUIET_BUSY = 0.1;

function envDbs(): DbKind[] {
  // A quick run measures PostgreSQL only (the goals are set for it; PGlite's figures inform).
  const raw = (process.env.BENCH_DB ?? "").trim() || (QUICK ? "postgres" : "both");
  if (raw === "both") return ["postgres", "pglite"];
  if (raw === "postgres" || raw === "pglite") return [raw];
  throw new Error(`BENCH_DB must be postgres, pglite or both, got "${raw}"`);
}

export const settings = {
  duration: envInt("BENCH_DURATION", QUICK ? 2 : 10, 1, 3600),
  warmup: envInt("BENCH_WARMUP", QUICK ? 1 : 2, 0, 600),
  connections: envInt("BENCH_CONNECTIONS", 64, 1, 10_000),
  dbs: envDbs(),
  /** 0: measure at once, without looking whether the machine is idle. */
  quietWait: envInt("BENCH_QUIET_WAIT", QUICK ? 0 : 120, 0, 3600),
  attempts: envInt("BENCH_ATTEMPTS", QUICK ? 1 : 3, 1, 20),
  analyze: (process.env.BENCH_ANALYZE ?? "1").trim() !== "0",
  cpuProfDir: process.env.BENCH_CPU_PROF?.trim() ? resolve(process.env.BENCH_CPU_PROF.trim()) : undefined,
  /** Also measure the service with metrics on (three more runs per database; bench/metrics-overhead.ts). */
  metricsComparison: (process.env.BENCH_METRICS ?? (QUICK ? "0" : "1")).trim() !== "0",
  /** ABBA rounds of that comparison (each after the first: off, on, on, off): more rounds, less noise. */
  metricsRounds: envInt("BENCH_METRICS_ROUNDS", 1, 1, 10),
};

export const log = (message: string) => process.stderr.write(`[bench] ${message}\n`);

/**
 * Everything started registers how to undo it; undone in reverse order, exactly once, whether
 * the run ends normally, throws or is interrupted.
 */
export const steps = cleanups(log);
