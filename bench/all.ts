import { spawn } from "node:child_process";
import { resolve } from "node:path";
import { QUICK, QUICK_TAG } from "./support.ts";

// `npm run bench`: every bench in turn, each its own `node` process writing to this terminal,
// stopping at the first that fails (its exit code is this one's); at the end, how long each took.
// BENCH_QUICK=1 (and any other BENCH_* setting) reaches every bench through the environment; a
// quick run, whose figures are rough anyway, runs two benches at once (each one's output shown
// whole when it ends) so that the whole set takes under three minutes.
// One bench alone: `node bench/<name>.ts` (bench/run.ts is also `npm run bench:payments`).

const BENCHES: ReadonlyArray<readonly [string, ...string[]]> = [
  ["bench/run.ts"],
  ["bench/webhooks.ts"],
  ["bench/chain-watcher.ts", "--pg"],
  ["bench/chain-watcher-networks.ts", "--pg"],
  ["bench/payouts.ts"],
  ["bench/hosted-page.ts"],
  ["bench/smart-wallet-payouts.ts"],
  ["bench/settlement.ts"],
  ["bench/dashboard.ts"],
  ["bench/splits.ts"],
  ["bench/swaps.ts"],
  ["bench/x402.ts"],
];

const ROOT = resolve(import.meta.dirname, "..");
/** Benches running at once: their ports and databases are their own. */
const AT_ONCE = QUICK ? 2 : 1;

/**
 * Runs one bench; its exit code (128 + the signal's number when a signal ended it). `held`: its
 * output is kept, in order, and written once it ends (another bench writes meanwhile).
 */
function run(args: readonly string[], held: boolean): Promise<number> {
  return new Promise((done) => {
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      stdio: held ? ["inherit", "pipe", "pipe"] : "inherit",
    });
    const output: Array<{ to: NodeJS.WriteStream; chunk: Buffer }> = [];
    child.stdout?.on("data", (chunk: Buffer) => output.push({ to: process.stdout, chunk }));
    child.stderr?.on("data", (chunk: Buffer) => output.push({ to: process.stderr, chunk }));
    const finish = (code: number) => {
      for (const { to, chunk } of output) to.write(chunk);
      done(code);
    };
    child.once("error", () => finish(1));
    // "close", not "exit": its output has all been read by then.
    child.once("close", (code, signal) => finish(code ?? (signal === "SIGINT" ? 130 : 1)));
  });
}

// A signal from the terminal reaches the running bench too, which cleans up and exits: this
// runner waits for it, then stops instead of starting the next.
let interrupted = false;
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const)
  process.on(signal, () => {
    interrupted = true;
  });

const times: Array<{ index: number; name: string; seconds: number; code: number }> = [];
const started = performance.now();
let code = 0;
let next = 0;
/** Takes the next bench until none is left, one fails or the run is interrupted. */
async function runner(): Promise<void> {
  while (next < BENCHES.length && code === 0 && !interrupted) {
    const index = next++;
    const args = BENCHES[index] ?? [];
    const begin = performance.now();
    const exit = await run(args, AT_ONCE > 1);
    times.push({ index, name: args.join(" "), seconds: (performance.now() - begin) / 1000, code: exit });
    if (exit !== 0 && code === 0) code = exit;
  }
}
await Promise.all(Array.from({ length: AT_ONCE }, runner));
if (interrupted) code ||= 130;
times.sort((a, b) => a.index - b.index);
const total = (performance.now() - started) / 1000;
const rows = times.map(
  (t) => `| ${t.name} | ${t.seconds.toFixed(1)} |${t.code === 0 ? "" : ` exit ${t.code}`}`,
);
process.stdout.write(
  [
    "",
    `Bench times${QUICK_TAG}:`,
    "",
    "| Bench | Seconds |",
    "| :-- | --: |",
    ...rows,
    `| total | ${total.toFixed(1)} |`,
    ...(AT_ONCE > 1 ? ["", `${AT_ONCE} benches at a time: the total is the run's wall time.`] : []),
    ...(times.length < BENCHES.length
      ? ["", `Stopped after ${times.length} of ${BENCHES.length} benches.`]
      : []),
    "",
  ].join("\n"),
);
process.exit(code);
