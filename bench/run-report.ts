import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { type OverheadRow, renderOverhead } from "./metrics-overhead.ts";
import type { DbSetup } from "./run-db.ts";
import { type Measurement, peakResets, type ServerRun } from "./run-measure.ts";
import {
  CREATE_BODY,
  type DbKind,
  DISTURBED_CORES,
  type Endpoint,
  GET_ROWS,
  GET_WORKSPACES,
  GOALS,
  POOL_SIZE,
  QUIET_BUSY,
  RATE_LIMIT_SANDBOX,
  type ServerKind,
  settings,
} from "./run-settings.ts";
import { QUICK, QUICK_NOTE, QUICK_TAG } from "./support.ts";

// bench/run.ts's report: the tables and goals it prints, and its section of bench/RESULTS.md,
// which it replaces between its markers, keeping the rest of the file (other benches' sections).

const execFileAsync = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "..");

export const fmtRps = (value: number) => Math.round(value).toLocaleString("en-US");
export const fmtMs = (value: number) => (Number.isInteger(value) ? String(value) : value.toFixed(2));
export const fmtMiB = (kib: number | undefined) => (kib === undefined ? "n/a" : (kib / 1024).toFixed(0));
const fmtPct = (ratio: number) => `${(ratio * 100).toFixed(0)}%`;
const fmtTimes = (ratio: number) => `${ratio.toFixed(2)}×`;

/** A markdown table: the first `textColumns` columns left-aligned, the figures right-aligned. */
function table(header: string[], rows: string[][], textColumns: number): string {
  const align = header.map((_, i) => (i < textColumns ? ":--" : "--:"));
  return [header, align, ...rows].map((cells) => `| ${cells.join(" | ")} |`).join("\n");
}

export interface DbReport {
  setup: DbSetup;
  baseline: ServerRun;
  /** Metrics off (the default). */
  service: ServerRun;
  /** With metrics on, and off again after the first service run (the ABBA rounds). */
  metricsRuns?: { on: ServerRun[]; off: ServerRun[] };
}

interface GoalCheck {
  text: string;
  met: boolean;
  binding: boolean;
}

function find(report: DbReport, server: ServerKind, endpoint: Endpoint): Measurement {
  const found = report[server].measurements.find((m) => m.endpoint === endpoint);
  if (!found) throw new Error(`no ${server} ${endpoint} measurement`);
  return found;
}

const DB_NAMES: Record<DbKind, string> = { postgres: "PostgreSQL", pglite: "PGlite" };
const ENDPOINT_NAMES: Record<Endpoint, string> = {
  create: "POST /api/v1/payments",
  get: "GET /api/v1/payments/{id}",
};
const BASELINE_NAMES: Record<Endpoint, string> = {
  create: "POST /baseline/payments",
  get: "GET /baseline/payments/{id}",
};

/** The service's figure over the baseline's: req/s and p99. */
function versus(report: DbReport, endpoint: Endpoint) {
  const service = find(report, "service", endpoint);
  const baseline = find(report, "baseline", endpoint);
  return {
    service,
    baseline,
    rpsRatio: service.rps / baseline.rps,
    p99Ratio: service.p99 / Math.max(baseline.p99, 0.001),
  };
}

function goalChecks(report: DbReport): GoalCheck[] {
  const binding = report.setup.kind === "postgres";
  const checks: GoalCheck[] = [];
  const create = versus(report, "create");
  checks.push({
    text: `create ≥ ${fmtPct(GOALS.createRatio)} of baseline req/s: ${fmtRps(create.service.rps)} vs ${fmtRps(create.baseline.rps)} = ${fmtPct(create.rpsRatio)}`,
    met: create.rpsRatio >= GOALS.createRatio,
    binding,
  });
  checks.push({
    text: `create p99 ≤ ${GOALS.createP99Factor}× the baseline's: ${fmtMs(create.service.p99)} ms vs ${fmtMs(create.baseline.p99)} ms = ${fmtTimes(create.p99Ratio)}`,
    met: create.p99Ratio <= GOALS.createP99Factor,
    binding,
  });
  const get = versus(report, "get");
  checks.push({
    text: `GET ≥ ${fmtPct(GOALS.getRatio)} of baseline req/s: ${fmtRps(get.service.rps)} vs ${fmtRps(get.baseline.rps)} = ${fmtPct(get.rpsRatio)}`,
    met: get.rpsRatio >= GOALS.getRatio,
    binding,
  });
  const failed = [...report.service.measurements, ...report.baseline.measurements].reduce(
    (sum, m) => sum + m.failed,
    0,
  );
  checks.push({ text: `no failed requests: ${failed} failed`, met: failed === 0, binding });
  return checks;
}

/** The metrics on / off comparison, when it was run (bench/metrics-overhead.ts). */
function overheadSection(reports: DbReport[]): string[] {
  const rows: OverheadRow[] = [];
  for (const report of reports) {
    const runs = report.metricsRuns;
    if (!runs) continue;
    for (const endpoint of ["create", "get"] as const) {
      const pick = (run: ServerRun) => {
        const m = run.measurements.find((x) => x.endpoint === endpoint);
        if (!m) throw new Error(`no service ${endpoint} measurement`);
        return { rps: m.rps, p99: m.p99, cpuMsPerRequest: m.serverCpuMsPerRequest };
      };
      rows.push({
        database: DB_NAMES[report.setup.kind],
        endpoint: endpoint === "create" ? "create" : "GET",
        off: [report.service, ...runs.off].map(pick),
        on: runs.on.map(pick),
      });
    }
  }
  return rows.length === 0 ? [] : [...renderOverhead(rows).lines, ""];
}

function resultRow(report: DbReport, server: ServerKind, endpoint: Endpoint): string[] {
  const m = find(report, server, endpoint);
  return [
    DB_NAMES[report.setup.kind],
    server === "service" ? ENDPOINT_NAMES[endpoint] : BASELINE_NAMES[endpoint],
    server,
    fmtRps(m.rps),
    fmtMs(m.p50),
    fmtMs(m.p99),
    fmtMiB(m.peakRssKiB),
    m.serverCpuMsPerRequest.toFixed(3),
    m.postgresCpuMsPerRequest === undefined ? "in-process" : m.postgresCpuMsPerRequest.toFixed(3),
    m.requests.toLocaleString("en-US"),
    String(m.failed),
    `${m.otherCores.toFixed(2)}${m.otherCores > DISTURBED_CORES ? " ⚠" : ""}${m.attempts > 1 ? ` (${m.attempts} tries)` : ""}`,
  ];
}

function ratioRow(report: DbReport, endpoint: Endpoint): string[] {
  const { service, baseline, rpsRatio, p99Ratio } = versus(report, endpoint);
  const goal = endpoint === "create" ? GOALS.createRatio : GOALS.getRatio;
  const p99Met = endpoint === "get" || p99Ratio <= GOALS.createP99Factor;
  return [
    DB_NAMES[report.setup.kind],
    endpoint === "create" ? "create" : "GET",
    fmtRps(service.rps),
    fmtRps(baseline.rps),
    fmtPct(rpsRatio),
    `≥ ${fmtPct(goal)}`,
    fmtTimes(p99Ratio),
    endpoint === "create" ? `≤ ${GOALS.createP99Factor}×` : "",
    rpsRatio >= goal && p99Met ? "yes" : "no",
  ];
}

/** The tables and goals (also what the run prints). */
function tables(reports: DbReport[]): string[] {
  const resultRows: string[][] = [];
  const ratioRows: string[][] = [];
  for (const report of reports) {
    for (const endpoint of ["create", "get"] as const) {
      for (const server of ["service", "baseline"] as const)
        resultRows.push(resultRow(report, server, endpoint));
      ratioRows.push(ratioRow(report, endpoint));
    }
  }
  const checks = reports.flatMap((report) =>
    goalChecks(report).map((check) => ({ ...check, db: DB_NAMES[report.setup.kind] })),
  );
  const goalLines = checks.map(
    (c) =>
      `- [${c.met ? "x" : " "}] ${c.db}: ${c.text} — **${c.met ? "met" : "missed"}**${c.binding ? "" : " (informational: the goals are set for PostgreSQL)"}`,
  );
  const binding = checks.filter((c) => c.binding);
  const bindingMissed = binding.filter((c) => !c.met);
  const notAt64 =
    settings.connections !== GOALS.connections
      ? `\n> The goals are defined at ${GOALS.connections} connections; this run used ${settings.connections}.\n`
      : "";
  return [
    `### Results${QUICK_TAG}`,
    "",
    table(
      [
        "Database",
        "Endpoint",
        "Server",
        "Req/s",
        "p50 ms",
        "p99 ms",
        "Peak RSS MiB",
        "Server CPU ms/req",
        "DB CPU ms/req",
        "Requests",
        "Failed",
        "Other load (cores)",
      ],
      resultRows,
      3,
    ),
    "",
    "### Service / baseline",
    "",
    table(
      [
        "Database",
        "Endpoint",
        "Service req/s",
        "Baseline req/s",
        "Ratio",
        "Goal",
        "p99 service/baseline",
        "p99 goal",
        "Met",
      ],
      ratioRows,
      2,
    ),
    "",
    ...overheadSection(reports),
    "### Goals",
    notAt64,
    ...goalLines,
    "",
    binding.length === 0
      ? "No PostgreSQL run: the goals are set for PostgreSQL."
      : bindingMissed.length === 0
        ? "All PostgreSQL goals met."
        : `PostgreSQL goals missed: ${bindingMissed.length} of ${binding.length}.`,
    ...(QUICK ? ["", QUICK_NOTE] : []),
  ];
}

export interface SourceState {
  commit: string;
  /** Uncommitted changes under src/ (the service runs from the working tree). */
  dirty: boolean;
}

export async function sourceState(): Promise<SourceState | undefined> {
  try {
    const head = await execFileAsync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT });
    const status = await execFileAsync("git", ["status", "--porcelain", "--", "src"], { cwd: ROOT });
    return { commit: head.stdout.trim(), dirty: status.stdout.trim() !== "" };
  } catch {
    return undefined;
  }
}

export const describeSource = (state: SourceState | undefined) =>
  state ? `${state.commit}${state.dirty ? " with uncommitted changes in src/" : ""}` : "unknown (no git)";

function readPackageVersion(name: string): string {
  try {
    const pkg = JSON.parse(readFileSync(join(ROOT, "node_modules", name, "package.json"), "utf8")) as {
      version?: string;
    };
    return pkg.version ?? "unknown";
  } catch {
    return "unknown";
  }
}

/** bench/RESULTS.md's section of this run (markdown) and what to print (the tables and goals). */
export function render(
  reports: DbReport[],
  started: Date,
  source: { before: SourceState | undefined; after: SourceState | undefined },
): { markdown: string; summary: string } {
  const cpus = os.cpus();
  const pg = reports.find((r) => r.setup.kind === "postgres");
  const pglite = reports.find((r) => r.setup.kind === "pglite");
  const lifetime = reports.map(
    (r) =>
      `${DB_NAMES[r.setup.kind]}: service ${fmtMiB(r.service.lifetimePeakKiB)} MiB, baseline ${fmtMiB(r.baseline.lifetimePeakKiB)} MiB`,
  );
  const disturbed = reports.some((r) =>
    [...r.service.measurements, ...r.baseline.measurements].some((m) => m.otherCores > DISTURBED_CORES),
  );
  const body = tables(reports);
  const quietWait =
    settings.quietWait > 0
      ? `Before each scenario the runner waits (up to ${settings.quietWait} s) for the machine to be under ${fmtPct(QUIET_BUSY)} busy.`
      : "The runner did not wait for an idle machine (BENCH_QUIET_WAIT=0).";
  const markdown = [
    "## Payments API: `POST`/`GET /api/v1/payments` vs a bare baseline (`bench/run.ts`)",
    "",
    "Written by `npm run bench` (`bench/run.ts`), which replaces this section (between its markers) with each full run, so it holds the latest one; the rest of the file is kept.",
    "",
    `- Date: ${started.toISOString()}`,
    `- Machine: ${cpus.length} cores (${cpus[0]?.model.trim() ?? "unknown CPU"}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${os.type()} ${os.release()} ${os.arch()}`,
    `- Code: ${describeSource(source.before)}${
      describeSource(source.before) === describeSource(source.after)
        ? ""
        : ` — **src changed during the run** (now ${describeSource(source.after)}): service figures may come from different versions`
    }`,
    `- Node: ${process.version}`,
    `- PostgreSQL: ${pg ? `${pg.baseline.serverVersion ?? "unknown"} (Debian package, scripts/local-postgres.sh, durable defaults: fsync on)` : "not run"}`,
    `- PGlite: ${pglite ? `@electric-sql/pglite ${readPackageVersion("@electric-sql/pglite")} (PostgreSQL ${pglite.baseline.serverVersion ?? "unknown"}), file-backed in DATA_DIR` : "not run"}`,
    `- Load: autocannon ${readPackageVersion("autocannon")} as a library in the runner process (same machine), ${settings.connections} connections, no pipelining, ${settings.warmup} s warm-up then ${settings.duration} s measured per scenario`,
    `- Service: \`node src/main.ts\`, LOG_LEVEL=warn, RATE_LIMIT_SANDBOX=${RATE_LIMIT_SANDBOX} (limiter active), pool of ${POOL_SIZE}; sandbox keys of ${GET_WORKSPACES} workspaces in turn, body \`${CREATE_BODY}\`; GETs go round ${GET_ROWS} payments of those workspaces, each with its workspace's key`,
    `- Baseline: \`bench/baseline-server.ts\`, bare Fastify, one INSERT … RETURNING / one SELECT by primary key into \`bench_baseline\` of the same database (pg Pool of ${POOL_SIZE}; PGlite directly)`,
    "",
    ...body,
    "",
    "### How the figures are taken",
    "",
    "- Req/s is autocannon's mean of per-second samples; p50/p99 are its latency percentiles over the measured window (the warm-up is discarded).",
    `- Peak RSS is the server process's VmHWM from /proc/<pid>/status, ${peakResets() ? "reset (clear_refs 5) at the start of each scenario, so it is that scenario's peak including its warm-up" : "over the process lifetime (resetting it was not permitted)"}. Whole-lifetime peaks: ${lifetime.join("; ")}.`,
    `- Order per database: baseline (create, GET), then the service (create, GET)${settings.metricsComparison ? ", then the service with metrics on twice and off once more, and BENCH_METRICS_ROUNDS − 1 more rounds of off, on, on, off (BENCH_METRICS=0 skips them)" : ""}, each server in its own process, started fresh on the same database. Failed counts non-2xx answers, connection errors and timeouts.`,
    `- GETs go round ${GET_ROWS} rows created just before (the service's: ${GET_WORKSPACES} workspaces, each request with the key of the payment's workspace), so that concurrent requests ask for different rows; ${settings.analyze ? "on PostgreSQL the runner runs ANALYZE between create and GET, as autovacuum would within a minute (without statistics the planner reads the service's payment through payments_list_status instead of the primary key). PGlite runs no autovacuum and the runner cannot reach the server's embedded database, so its tables stay unanalyzed." : "no ANALYZE was run (BENCH_ANALYZE=0): the tables may have no planner statistics."}`,
    "- Server CPU ms/req is the server process's user + system CPU time over the measured window divided by the requests completed; DB CPU ms/req is the same for all processes of the PostgreSQL server (PGlite runs inside the server process, so its cost is in the server's figure).",
    `- ${quietWait} Other load is the CPU that processes outside the benchmark (not the runner, the server or PostgreSQL) took during the measured window, in cores; above ${DISTURBED_CORES} the scenario is measured again (up to ${settings.attempts} tries, the least disturbed kept) and a row still above is marked ⚠ as suspect.${disturbed ? " **This run has disturbed rows.**" : ""}`,
    "- The load generator shares the 2 cores with the server and the database, so absolute figures are lower than on separate machines; the ratios are what the goals compare.",
  ].join("\n");
  return { markdown, summary: body.join("\n") };
}

// ---------------------------------------------------------------------------------------------
// bench/RESULTS.md: this run's section between two markers; everything else in the file is kept.

const BEGIN = "<!-- bench/run.ts: begin";
const BEGIN_LINE = `${BEGIN} (npm run bench replaces what is between these markers) -->`;
const END = "<!-- bench/run.ts: end -->";
const TITLE = "# Benchmark results";

/**
 * `existing` (the file's text, "" when there is none) with bench/run.ts's section replaced by
 * `section`. Without markers (a file from before them) the section goes after the title, first,
 * and everything already there stays below it.
 */
export function replaceSection(existing: string, section: string): string {
  const block = `${BEGIN_LINE}\n${section.trim()}\n${END}`;
  const start = existing.indexOf(BEGIN);
  const end = existing.indexOf(END, start);
  if (start >= 0 && end > start)
    return `${existing.slice(0, start)}${block}${existing.slice(end + END.length)}`;
  const rest = existing.startsWith(TITLE) ? existing.slice(TITLE.length).trimStart() : existing.trimStart();
  return `${TITLE}\n\n${block}\n${rest ? `\n${rest}` : ""}`;
}

/** Writes the section into `file`, keeping the rest of it. */
export function writeSection(file: string, section: string): void {
  let existing = "";
  try {
    existing = readFileSync(file, "utf8");
  } catch {
    // no file yet
  }
  writeFileSync(file, replaceSection(existing, section));
}
