import { spawn } from "node:child_process";
import { resolve } from "node:path";
import { QUICK_TAG } from "./support.ts";

// `npm run bench`: every bench in turn, each its own `node` process writing to this terminal,
// stopping at the first that fails (its exit code is this one's); at the end, how long each took.
// BENCH_QUICK=1 (and any other BENCH_* setting) reaches every bench through the environment.
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

/** Runs one bench; its exit code (128 + the signal's number when a signal ended it). */
function run(args: readonly string[]): Promise<number> {
  return new Promise((done) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: "inherit" });
    child.once("error", () => done(1));
    child.once("exit", (code, signal) => done(code ?? (signal === "SIGINT" ? 130 : 1)));
  });
}

// A signal from the terminal reaches the running bench too, which cleans up and exits: this
// runner waits for it, then stops instead of starting the next.
let interrupted = false;
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const)
  process.on(signal, () => {
    interrupted = true;
  });

const times: Array<{ name: string; seconds: number; code: number }> = [];
const started = performance.now();
let code = 0;
for (const args of BENCHES) {
  const begin = performance.now();
  code = await run(args);
  times.push({ name: args.join(" "), seconds: (performance.now() - begin) / 1000, code });
  if (code !== 0 || interrupted) {
    code ||= 130;
    break;
  }
}
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
    ...(times.length < BENCHES.length
      ? ["", `Stopped after ${times.length} of ${BENCHES.length} benches.`]
      : []),
    "",
  ].join("\n"),
);
process.exit(code);
