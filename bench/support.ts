import { resolve } from "node:path";
import { fileURLToPath } from "node:url";

// What the benches share: JSON over HTTP, latency summaries (nearest-rank percentiles) and a
// registry of undo steps, run in reverse order exactly once, also when a bench fails or is interrupted.

/**
 * BENCH_QUICK=1: every bench runs a short version of itself (fewer items, shorter windows, no
 * waiting for an idle machine), so that all of `npm run bench` takes a few minutes and a change can
 * be checked quickly. An explicit setting (BENCH_DURATION…) still wins over the quick default.
 */
export const QUICK = process.env.BENCH_QUICK === "1";

/** " (BENCH_QUICK=1)" in a quick run, "" otherwise: for the headings the benches print. */
export const QUICK_TAG = QUICK ? " (BENCH_QUICK=1)" : "";

/** What a quick run prints under its table. */
export const QUICK_NOTE =
  "Quick run (BENCH_QUICK=1): fewer items and shorter windows than the full run, so the figures are rough; they show that everything runs, not whether the goals are met.";

/**
 * A whole number from the environment, or `fallback` when unset; `min` to `max` (a positive
 * number unless told).
 */
export function envInt(name: string, fallback: number, min = 1, max = Number.MAX_SAFE_INTEGER): number {
  const raw = process.env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(
      max === Number.MAX_SAFE_INTEGER
        ? `${name} must be a whole number of at least ${min}, got "${raw}"`
        : `${name} must be a whole number from ${min} to ${max}, got "${raw}"`,
    );
  }
  return value;
}

/**
 * Who pays the smart wallet benches' gas: the devnet's ERC-7677 paymaster service (the default, as
 * `npm run devnet` configures it: asked for a stub and a signature per operation, validated by the
 * VerifyingPaymaster), or with BENCH_PAYMASTER=address the bare SponsoringPaymaster, which nothing
 * is asked of: the setup of trees older than signing paymasters, for a like-for-like comparison.
 */
export function benchPaymaster(): "service" | "address" {
  const raw = process.env.BENCH_PAYMASTER?.trim() || "service";
  if (raw !== "service" && raw !== "address")
    throw new Error(`BENCH_PAYMASTER must be "service" or "address", got "${raw}"`);
  return raw;
}

/** A goal and whether it was met, as the benches list them under their tables. */
export interface Goal {
  text: string;
  met: boolean;
}

/** `- [x] <goal> — **met**` lines (`[ ]` and **missed** for a missed one). */
export function goalLines(goals: readonly Goal[]): string[] {
  return goals.map((g) => `- [${g.met ? "x" : " "}] ${g.text} — **${g.met ? "met" : "missed"}**`);
}

/** POSTs `body` as JSON; the answer's status and its JSON (its text when it is not JSON). */
export async function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string>,
): Promise<{ status: number; json: unknown }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  let json: unknown = text;
  try {
    json = JSON.parse(text);
  } catch {
    // keep the text for the error message
  }
  return { status: res.status, json };
}

/** The value at `path` inside parsed JSON; undefined where a step is not an object. */
export function dig(value: unknown, ...path: string[]): unknown {
  let current = value;
  for (const key of path) {
    if (typeof current !== "object" || current === null) return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

export interface LatencySummary {
  p50: number;
  p99: number;
  mean: number;
  min: number;
  max: number;
}

/** Nearest rank of an ascending list; NaN when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return (
    sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN
  );
}

export function summarize(values: readonly number[]): LatencySummary {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    mean: sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length),
    min: sorted[0] ?? Number.NaN,
    max: sorted.at(-1) ?? Number.NaN,
  };
}

export interface Cleanups {
  /** Registers an undo step; the returned function runs it now (once) and takes it off the list. */
  defer(name: string, fn: () => Promise<void>): () => Promise<void>;
  /** Runs every step still registered, newest first; a failing step is logged, the rest still run. */
  cleanupAll(): Promise<void>;
}

export function cleanups(log: (message: string) => void): Cleanups {
  const steps: { name: string; run: () => Promise<void> }[] = [];
  let pass: Promise<void> | undefined;
  return {
    defer(name, fn) {
      let running: Promise<void> | undefined;
      const entry = { name, run: () => (running ??= fn()) };
      steps.push(entry);
      return async () => {
        const index = steps.indexOf(entry);
        if (index >= 0) steps.splice(index, 1);
        await entry.run();
      };
    },
    cleanupAll() {
      // A signal during the cleanup after a failure joins the pass under way.
      pass ??= (async () => {
        for (let entry = steps.pop(); entry; entry = steps.pop()) {
          try {
            await entry.run();
          } catch (err) {
            log(`cleanup of ${entry.name} failed: ${err instanceof Error ? err.message : String(err)}`);
          }
        }
        pass = undefined;
      })();
      return pass;
    },
  };
}

/** 128 + the signal's number, as a shell reports a process the signal ended. */
const SIGNAL_EXIT_CODES = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129 } as const;

/**
 * Runs `body` when `moduleUrl` is the script node was started with (not when it is imported): a
 * signal or a failure still runs every cleanup step; the exit code says whether it succeeded.
 */
export async function runAsScript(
  moduleUrl: string,
  log: (message: string) => void,
  body: () => Promise<void>,
  steps?: Cleanups,
): Promise<void> {
  if (!process.argv[1] || resolve(process.argv[1]) !== fileURLToPath(moduleUrl)) return;
  const cleanup = () => steps?.cleanupAll() ?? Promise.resolve();
  for (const [signal, exitCode] of Object.entries(SIGNAL_EXIT_CODES)) {
    process.on(signal, () => {
      log(`${signal}: cleaning up…`);
      void cleanup().finally(() => process.exit(exitCode));
    });
  }
  process.on("uncaughtException", (err) => {
    log(`uncaught: ${err.stack ?? err.message}`);
    void cleanup().finally(() => process.exit(1));
  });
  let code = 0;
  try {
    await body();
  } catch (err) {
    log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    if (err instanceof Error && err.cause) log(`cause: ${String(err.cause)}`);
    code = 1;
  } finally {
    await cleanup();
  }
  process.exit(code);
}
