import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import os from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import autocannon from "autocannon";
import pg from "pg";
import { type OverheadRow, renderOverhead } from "./metrics-overhead.ts";
import { cleanups, dig, postJson, runAsScript } from "./support.ts";

// `npm run bench`: measures the service's sandbox `POST /api/v1/payments` and
// `GET /api/v1/payments/{id}` against PostgreSQL and embedded PGlite, next to a bare Fastify
// baseline doing one INSERT / one SELECT by primary key on the same database, and writes
// bench/RESULTS.md. Every child process and the throw-away PostgreSQL server are stopped on the
// way out, on failure and on SIGINT/SIGTERM/SIGHUP too.
//
// Environment: BENCH_DURATION (measured seconds per scenario, default 10), BENCH_WARMUP (seconds,
// default 2), BENCH_CONNECTIONS (default 64), BENCH_DB=postgres|pglite|both (default both),
// BENCH_CPU_PROF=<folder> (run the service under `node --cpu-prof`, profiles written there),
// BENCH_QUIET_WAIT (seconds to wait, before each scenario, for other processes to leave the CPU
// idle; default 120), BENCH_ATTEMPTS (tries per scenario when other processes disturbed the
// measurement; default 3), BENCH_ANALYZE=0 (skip the ANALYZE between create and GET on PostgreSQL).

const execFileAsync = promisify(execFile);

const ROOT = resolve(import.meta.dirname, "..");
const RESULTS_FILE = join(ROOT, "bench", "RESULTS.md");
const PG_SCRIPT = join(ROOT, "scripts", "local-postgres.sh");
const HOST = "127.0.0.1";
const POOL_SIZE = 10; // the service's default pool (src/platform/db/database.ts)
const RATE_LIMIT_SANDBOX = "10000000"; // the limiter keeps running, it just never says 429
const SETTLEMENT_ADDRESS = "0x1111111111111111111111111111111111111111";
const CREATE_BODY = JSON.stringify({ tokenSymbol: "USDC", amount: "100" });

const GOALS = { createRatio: 0.4, createP99Ms: 50, getRatio: 0.7, connections: 64 };

type DbKind = "postgres" | "pglite";
type Endpoint = "create" | "get";
type ServerKind = "service" | "baseline";

// ---------------------------------------------------------------------------------------------
// Settings

function envInt(name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(`${name} must be a whole number from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

function envDbs(): DbKind[] {
  const raw = (process.env.BENCH_DB ?? "both").trim() || "both";
  if (raw === "both") return ["postgres", "pglite"];
  if (raw === "postgres" || raw === "pglite") return [raw];
  throw new Error(`BENCH_DB must be postgres, pglite or both, got "${raw}"`);
}

const settings = {
  duration: envInt("BENCH_DURATION", 10, 1, 3600),
  warmup: envInt("BENCH_WARMUP", 2, 0, 600),
  connections: envInt("BENCH_CONNECTIONS", 64, 1, 10_000),
  dbs: envDbs(),
  quietWait: envInt("BENCH_QUIET_WAIT", 120, 0, 3600),
  attempts: envInt("BENCH_ATTEMPTS", 3, 1, 20),
  analyze: (process.env.BENCH_ANALYZE ?? "1").trim() !== "0",
  cpuProfDir: process.env.BENCH_CPU_PROF?.trim() ? resolve(process.env.BENCH_CPU_PROF.trim()) : undefined,
  /** Also measure the service with metrics on (three more runs per database; bench/metrics-overhead.ts). */
  metricsComparison: (process.env.BENCH_METRICS ?? "1").trim() !== "0",
  /** ABBA rounds of that comparison (each after the first: off, on, on, off): more rounds, less noise. */
  metricsRounds: envInt("BENCH_METRICS_ROUNDS", 1, 1, 10),
};

const log = (message: string) => process.stderr.write(`[bench] ${message}\n`);
const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));

// ---------------------------------------------------------------------------------------------
// Cleanup: everything started registers how to undo it; undone in reverse order, exactly once,
// whether the run ends normally, throws or is interrupted.

const steps = cleanups(log);
const { defer } = steps;

// ---------------------------------------------------------------------------------------------
// Child processes

interface Child {
  name: string;
  pid: number;
  proc: ChildProcess;
  /** The last lines the process wrote (stdout and stderr), for error messages. */
  tail: string[];
  /** Lines written in all: the service logs at warn, so anything here deserves a look. */
  lines: () => number;
  exited: Promise<void>;
  stop: () => Promise<void>;
}

function isRunning(proc: ChildProcess): boolean {
  return proc.exitCode === null && proc.signalCode === null;
}

function startNode(name: string, args: string[], env: Record<string, string>, ipc: boolean): Child {
  const proc = spawn(process.execPath, args, {
    cwd: ROOT,
    env,
    stdio: ipc ? ["ignore", "pipe", "pipe", "ipc"] : ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<void>((done) => {
    proc.once("exit", () => done());
    proc.once("error", () => done());
  });
  const stop = defer(name, async () => {
    if (!isRunning(proc)) return;
    proc.kill("SIGTERM");
    const graceful = await Promise.race([exited.then(() => true), sleep(20_000).then(() => false)]);
    if (!graceful && isRunning(proc)) {
      log(`${name} did not stop within 20 s: SIGKILL`);
      proc.kill("SIGKILL");
      await exited;
    }
  });
  if (proc.pid === undefined) throw new Error(`could not start ${name}`);
  const tail: string[] = [];
  let count = 0;
  const keep = (chunk: Buffer) => {
    for (const line of chunk.toString("utf8").split("\n")) {
      if (line.trim() === "") continue;
      count++;
      tail.push(line.length > 2000 ? `${line.slice(0, 2000)}…` : line);
      if (tail.length > 40) tail.shift();
    }
  };
  proc.stdout?.on("data", keep);
  proc.stderr?.on("data", keep);
  return { name, pid: proc.pid, proc, tail, lines: () => count, exited, stop };
}

function describeExit(child: Child): string {
  const { exitCode, signalCode } = child.proc;
  const how = signalCode ? `signal ${signalCode}` : `code ${exitCode}`;
  return `${child.name} exited (${how}); its last output:\n${child.tail.join("\n") || "(none)"}`;
}

function assertAlive(child: Child): void {
  if (!isRunning(child.proc)) throw new Error(describeExit(child));
}

async function waitForHealth(child: Child, url: string, timeoutMs = 90_000): Promise<unknown> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    assertAlive(child);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      if (res.ok) return await res.json();
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${child.name} was not ready within ${timeoutMs / 1000} s`);
    await sleep(200);
  }
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, HOST);
  await once(server, "listening");
  const address = server.address();
  server.close();
  await once(server, "close");
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

/** A clean environment: nothing from the caller's shell (DATABASE_URL, REDIS_URL…) leaks in. */
function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of ["PATH", "HOME", "TMPDIR", "LANG", "TZ"]) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  return env;
}

// ---------------------------------------------------------------------------------------------
// Memory: VmHWM is the process's peak resident set. Writing 5 to clear_refs resets it to the
// current RSS, so each scenario's figure is its own peak (warm-up and measurement).

function procStatusKiB(pid: number, field: "VmHWM" | "VmRSS"): number | undefined {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(
      readFileSync(`/proc/${pid}/status`, "utf8"),
    );
    return match?.[1] ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

let peakResetWorks = true;

function resetPeak(pid: number): void {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5");
  } catch {
    peakResetWorks = false;
  }
}

// ---------------------------------------------------------------------------------------------
// CPU accounting from /proc, in USER_HZ ticks (100 per second on Linux): what the server and
// PostgreSQL spend per request, and how much CPU processes outside the benchmark took meanwhile
// (a figure taken while something else loaded the 2 cores is flagged).

const TICKS_PER_SECOND = 100;
const QUIET_BUSY = 0.1; // of the whole machine

function machineTicks(): { busy: number; total: number } {
  const line = readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "";
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = line
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  const busy = user + nice + system + irq + softirq + steal;
  return { busy, total: busy + idle + iowait };
}

/** utime + stime of a process (all its threads), or undefined when it is gone. */
function processTicks(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return undefined;
  }
}

/** The postmaster of a data folder and its children (backends, WAL writer, checkpointer…). */
function postgresPids(pgDir: string | undefined): number[] {
  if (!pgDir) return [];
  let postmaster: number;
  try {
    postmaster = Number(readFileSync(join(pgDir, "postmaster.pid"), "utf8").split("\n")[0]);
  } catch {
    return [];
  }
  const pids = [postmaster];
  for (const entry of readdirSync("/proc")) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === postmaster) pids.push(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return pids;
}

interface CpuSnapshot {
  at: number;
  machine: { busy: number; total: number };
  processes: Map<number, number>;
}

function snapshot(pids: number[]): CpuSnapshot {
  const processes = new Map<number, number>();
  for (const pid of pids) {
    const ticks = processTicks(pid);
    if (ticks !== undefined) processes.set(pid, ticks);
  }
  return { at: performance.now(), machine: machineTicks(), processes };
}

/** Ticks a group of processes spent between two snapshots (processes born meanwhile count whole). */
function spent(before: CpuSnapshot, after: CpuSnapshot, pids: number[]): number {
  let sum = 0;
  for (const pid of pids) {
    const end = after.processes.get(pid);
    if (end !== undefined) sum += end - (before.processes.get(pid) ?? 0);
  }
  return sum;
}

/** Waits (up to BENCH_QUIET_WAIT) until the machine is nearly idle; returns the busy share seen last. */
async function waitForQuiet(label: string): Promise<number> {
  const deadline = Date.now() + settings.quietWait * 1000;
  let warned = false;
  for (;;) {
    const before = machineTicks();
    await sleep(1_000);
    const after = machineTicks();
    const busy = (after.busy - before.busy) / Math.max(1, after.total - before.total);
    if (busy <= QUIET_BUSY) return busy;
    if (Date.now() > deadline) {
      log(`${label}: the machine is still ${fmtPct(busy)} busy with other processes; measuring anyway`);
      return busy;
    }
    if (!warned) {
      log(`${label}: the machine is ${fmtPct(busy)} busy with other processes; waiting for it to calm down…`);
      warned = true;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Load

interface Target {
  url: string;
  method: "GET" | "POST";
  headers: Record<string, string>;
  body?: string;
  /** Requests go round these paths (and their headers) instead of repeating `url`'s. */
  cycle?: Array<{ path: string; headers: Record<string, string> }>;
}

function load(target: Target, seconds: number): Promise<autocannon.Result> {
  const cycle = target.cycle;
  let next = 0;
  return autocannon({
    url: target.url,
    method: target.method,
    headers: target.headers,
    ...(target.body === undefined ? {} : { body: target.body }),
    ...(cycle && cycle.length > 0
      ? {
          requests: [
            {
              setupRequest: (request) => {
                const item = cycle[next++ % cycle.length] as (typeof cycle)[number];
                return { ...request, path: item.path, headers: { ...request.headers, ...item.headers } };
              },
            },
          ],
        }
      : {}),
    connections: settings.connections,
    pipelining: 1,
    duration: seconds,
    timeout: 30,
  });
}

/**
 * The GETs read this many different payments, of GET_WORKSPACES workspaces (each its own key),
 * in turn: concurrent requests for one row with one key would flatter a server that coalesces
 * concurrent lookups (the service does).
 */
const GET_ROWS = 256;
const GET_WORKSPACES = 8;

interface Measurement {
  db: DbKind;
  endpoint: Endpoint;
  server: ServerKind;
  rps: number;
  p50: number;
  p99: number;
  peakRssKiB: number | undefined;
  requests: number;
  /** Non-2xx answers, connection errors and timeouts. */
  failed: number;
  /** CPU time of the server process per completed request. */
  serverCpuMsPerRequest: number;
  /** CPU time of the PostgreSQL server (all its processes) per request; undefined for PGlite. */
  postgresCpuMsPerRequest: number | undefined;
  /** CPU taken by processes outside the benchmark during the measured window, in cores. */
  otherCores: number;
  /** Measurements made for this scenario (disturbed ones are repeated; the least disturbed is kept). */
  attempts: number;
}

/**
 * Measures one scenario; a measurement disturbed by other processes (more than DISTURBED_CORES of
 * CPU outside the benchmark) is repeated, up to BENCH_ATTEMPTS in all, and the least disturbed kept.
 */
async function measure(
  setup: DbSetup,
  server: ServerKind,
  endpoint: Endpoint,
  child: Child,
  target: Target,
): Promise<Measurement> {
  const label = `${setup.kind} ${server} ${endpoint}`;
  let best: Measurement | undefined;
  let attempts = 0;
  while (attempts < settings.attempts) {
    attempts++;
    const m = await measureOnce(setup, server, endpoint, child, target, label);
    if (!best || m.otherCores < best.otherCores) best = m;
    if (m.otherCores <= DISTURBED_CORES) break;
    if (attempts < settings.attempts) {
      log(`${label}: other processes took ${m.otherCores.toFixed(2)} cores meanwhile; measuring again`);
    }
  }
  if (!best) throw new Error("no measurement");
  return { ...best, attempts };
}

async function measureOnce(
  setup: DbSetup,
  server: ServerKind,
  endpoint: Endpoint,
  child: Child,
  target: Target,
  label: string,
): Promise<Measurement> {
  const db = setup.kind;
  await waitForQuiet(label);
  resetPeak(child.pid);
  if (settings.warmup > 0) {
    log(`${label}: warm-up ${settings.warmup} s`);
    await load(target, settings.warmup);
    assertAlive(child);
  }
  log(`${label}: measuring ${settings.duration} s at ${settings.connections} connections`);
  const pgPids = postgresPids(setup.postgresDir);
  const pids = [process.pid, child.pid, ...pgPids];
  const before = snapshot(pids);
  const result = await load(target, settings.duration);
  const after = snapshot(pids);
  assertAlive(child);
  const requests = Math.max(1, result.requests.total);
  const msPerRequest = (ticks: number) => ((ticks / TICKS_PER_SECOND) * 1000) / requests;
  const ours = spent(before, after, pids);
  const seconds = (after.at - before.at) / 1000;
  const otherTicks = Math.max(0, after.machine.busy - before.machine.busy - ours);
  const measurement: Measurement = {
    db,
    endpoint,
    server,
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    peakRssKiB: procStatusKiB(child.pid, "VmHWM"),
    requests: result.requests.total,
    failed: result.non2xx + result.errors,
    serverCpuMsPerRequest: msPerRequest(spent(before, after, [child.pid])),
    postgresCpuMsPerRequest: pgPids.length > 0 ? msPerRequest(spent(before, after, pgPids)) : undefined,
    otherCores: otherTicks / TICKS_PER_SECOND / Math.max(seconds, 0.001),
    attempts: 1,
  };
  log(
    `${label}: ${fmtRps(measurement.rps)} req/s, p50 ${fmtMs(measurement.p50)} ms, ` +
      `p99 ${fmtMs(measurement.p99)} ms, peak RSS ${fmtMiB(measurement.peakRssKiB)} MiB, ` +
      `server CPU ${measurement.serverCpuMsPerRequest.toFixed(3)} ms/req, ` +
      `other processes ${measurement.otherCores.toFixed(2)} cores` +
      (measurement.failed > 0 ? `, ${measurement.failed} FAILED (non-2xx ${result.non2xx})` : ""),
  );
  return measurement;
}

// ---------------------------------------------------------------------------------------------
// Databases

interface DbSetup {
  kind: DbKind;
  /** DATA_DIR of the service (its master key; the PGlite folder under it). */
  dataDir: string;
  databaseUrl: string | undefined;
  pgliteDir: string | undefined;
  /** The throw-away PostgreSQL server's folder (its postmaster.pid names the processes to count). */
  postgresDir: string | undefined;
  /** The key every start of the service on this server database uses (it is checked at start). */
  masterKey: string;
  /** Stops the PostgreSQL server and removes the folders (also run by the global cleanup). */
  teardown: () => Promise<void>;
}

async function setUpDatabase(kind: DbKind): Promise<DbSetup> {
  const dataDir = `/tmp/bench-data-${process.pid}-${kind}`;
  rmSync(dataDir, { recursive: true, force: true });
  mkdirSync(dataDir, { recursive: true });
  const removeData = defer(`${kind} data folder`, async () =>
    rmSync(dataDir, { recursive: true, force: true }),
  );
  if (kind === "pglite") {
    // The folder the service opens (src/platform/db/database.ts pgliteDirFor); the baseline opens
    // the same database while the service is not running: PGlite is one process's.
    return {
      kind,
      dataDir,
      databaseUrl: undefined,
      pgliteDir: join(dataDir, "pgdata"),
      postgresDir: undefined,
      masterKey: randomBytes(32).toString("hex"),
      teardown: removeData,
    };
  }
  const pgDir = `/tmp/bench-pg-${process.pid}`;
  const port = await freePort();
  const stopPostgres = defer("PostgreSQL server", async () => {
    await execFileAsync("bash", [PG_SCRIPT, "stop", pgDir]).catch((err: unknown) => {
      log(`stopping PostgreSQL failed: ${err instanceof Error ? err.message : String(err)}`);
    });
    rmSync(pgDir, { recursive: true, force: true });
  });
  log(`starting PostgreSQL in ${pgDir} on port ${port}`);
  const { stdout } = await execFileAsync("bash", [PG_SCRIPT, "start", pgDir, String(port)]);
  const databaseUrl = stdout.trim().split("\n").pop()?.trim();
  if (!databaseUrl?.startsWith("postgres"))
    throw new Error(`unexpected output of local-postgres.sh: ${stdout}`);
  const teardown = async () => {
    await stopPostgres();
    await removeData();
  };
  return {
    kind,
    dataDir,
    databaseUrl,
    pgliteDir: undefined,
    postgresDir: pgDir,
    masterKey: randomBytes(32).toString("hex"),
    teardown,
  };
}

/**
 * The create scenario grows a freshly made table from nothing to thousands of rows, faster than
 * autovacuum (1 min naptime) analyzes it; without statistics the planner answers the GET's
 * `id = … AND workspace_id = … AND environment = …` from payments_list_status, scanning every
 * entry of the workspace, instead of the primary key. The steady state is an analyzed table, so
 * the runner does what autovacuum would, on PostgreSQL (PGlite is owned by the server process).
 */
async function analyzeThen<T>(setup: DbSetup, next: () => Promise<T>): Promise<T> {
  if (settings.analyze && setup.databaseUrl) {
    const client = new pg.Client({ connectionString: setup.databaseUrl });
    await client.connect();
    try {
      await client.query("ANALYZE");
    } finally {
      await client.end();
    }
  }
  return next();
}

// ---------------------------------------------------------------------------------------------
// The two servers

interface ServerRun {
  measurements: Measurement[];
  lifetimePeakKiB: number | undefined;
  serverVersion?: string;
}

async function runBaseline(setup: DbSetup): Promise<ServerRun> {
  const port = await freePort();
  const env: Record<string, string> = {
    ...baseEnv(),
    PORT: String(port),
    HOST,
    POOL_SIZE: String(POOL_SIZE),
    ...(setup.databaseUrl ? { DATABASE_URL: setup.databaseUrl } : {}),
    ...(setup.pgliteDir ? { PGLITE_DIR: setup.pgliteDir } : {}),
  };
  const child = startNode(`baseline server (${setup.kind})`, ["bench/baseline-server.ts"], env, true);
  try {
    const base = `http://${HOST}:${port}`;
    const health = await waitForHealth(child, `${base}/health`);
    // Same request bytes as the service's (the baseline ignores the header).
    const authorization = `Bearer svc_test_${"x".repeat(40)}`;
    const cycle: NonNullable<Target["cycle"]> = [];
    for (let i = 0; i < GET_ROWS; i++) {
      const created = await postJson(`${base}/baseline/payments`, JSON.parse(CREATE_BODY), {});
      const id = dig(created.json, "payment", "id");
      if (created.status !== 201 || typeof id !== "string") {
        throw new Error(`baseline create failed: ${created.status} ${JSON.stringify(created.json)}`);
      }
      cycle.push({ path: `/baseline/payments/${id}`, headers: { authorization } });
    }
    const measurements = [
      await measure(setup, "baseline", "create", child, {
        url: `${base}/baseline/payments`,
        method: "POST",
        headers: { "content-type": "application/json", authorization },
        body: CREATE_BODY,
      }),
      await analyzeThen(setup, () =>
        measure(setup, "baseline", "get", child, {
          url: base,
          method: "GET",
          headers: {},
          cycle,
        }),
      ),
    ];
    const serverVersion = dig(health, "serverVersion");
    return {
      measurements,
      lifetimePeakKiB: procStatusKiB(child.pid, "VmHWM"),
      ...(typeof serverVersion === "string" ? { serverVersion } : {}),
    };
  } finally {
    await child.stop();
  }
}

async function runService(setup: DbSetup, metrics = false): Promise<ServerRun> {
  const port = await freePort();
  const adminSecret = randomBytes(24).toString("hex");
  const env: Record<string, string> = {
    ...baseEnv(),
    PORT: String(port),
    HOST,
    DATA_DIR: setup.dataDir,
    ADMIN_SECRET: adminSecret,
    RATE_LIMIT_SANDBOX,
    LOG_LEVEL: "warn",
    ...(metrics ? { METRICS_TOKEN: randomBytes(24).toString("hex") } : {}),
    // A server database needs the key every instance shares (the service refuses to start without).
    ...(setup.databaseUrl ? { DATABASE_URL: setup.databaseUrl, MASTER_KEY: setup.masterKey } : {}),
  };
  const args = ["src/main.ts"];
  if (settings.cpuProfDir) {
    mkdirSync(settings.cpuProfDir, { recursive: true });
    args.unshift(
      "--cpu-prof",
      `--cpu-prof-dir=${settings.cpuProfDir}`,
      `--cpu-prof-name=service-${setup.kind}.cpuprofile`,
    );
  }
  const child = startNode(`service (${setup.kind})`, args, env, false);
  try {
    const base = `http://${HOST}:${port}`;
    await waitForHealth(child, `${base}/health`);
    const keys: string[] = [];
    for (let w = 0; w < GET_WORKSPACES; w++) {
      const workspace = await postJson(
        `${base}/api/v1/workspaces`,
        { name: `Benchmark ${w}`, settlementAddress: SETTLEMENT_ADDRESS },
        { authorization: `Bearer ${adminSecret}` },
      );
      const key = dig(workspace.json, "apiKeys", "test", "key");
      if (workspace.status !== 201 || typeof key !== "string") {
        throw new Error(`workspace creation failed: ${workspace.status} ${JSON.stringify(workspace.json)}`);
      }
      keys.push(key);
    }
    const authorization = `Bearer ${keys[0]}`;
    const cycle: NonNullable<Target["cycle"]> = [];
    for (let i = 0; i < GET_ROWS; i++) {
      const headers = { authorization: `Bearer ${keys[i % keys.length]}` };
      const created = await postJson(`${base}/api/v1/payments`, JSON.parse(CREATE_BODY), headers);
      const id = dig(created.json, "payment", "id");
      if (created.status !== 201 || typeof id !== "string") {
        throw new Error(`payment creation failed: ${created.status} ${JSON.stringify(created.json)}`);
      }
      cycle.push({ path: `/api/v1/payments/${id}`, headers });
    }
    const measurements = [
      await measure(setup, "service", "create", child, {
        url: `${base}/api/v1/payments`,
        method: "POST",
        headers: { "content-type": "application/json", authorization },
        body: CREATE_BODY,
        // Round the workspaces' keys, as for the GETs.
        cycle: keys.map((key) => ({ path: "/api/v1/payments", headers: { authorization: `Bearer ${key}` } })),
      }),
      await analyzeThen(setup, () =>
        measure(setup, "service", "get", child, {
          url: base,
          method: "GET",
          headers: {},
          cycle,
        }),
      ),
    ];
    if (child.lines() > 0) {
      log(`the service (${setup.kind}) wrote ${child.lines()} log lines at warn or above; the last:`);
      for (const line of child.tail.slice(-5)) log(`  ${line}`);
    }
    return { measurements, lifetimePeakKiB: procStatusKiB(child.pid, "VmHWM") };
  } finally {
    await child.stop();
    if (settings.cpuProfDir)
      log(`CPU profile: ${join(settings.cpuProfDir, `service-${setup.kind}.cpuprofile`)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Report

const fmtRps = (value: number) => Math.round(value).toLocaleString("en-US");
const fmtMs = (value: number) => (Number.isInteger(value) ? String(value) : value.toFixed(2));
const fmtMiB = (kib: number | undefined) => (kib === undefined ? "n/a" : (kib / 1024).toFixed(0));
const fmtPct = (ratio: number) => `${(ratio * 100).toFixed(0)}%`;

/** A markdown table: the first `textColumns` columns left-aligned, the figures right-aligned. */
function table(header: string[], rows: string[][], textColumns: number): string {
  const align = header.map((_, i) => (i < textColumns ? ":--" : "--:"));
  return [header, align, ...rows].map((cells) => `| ${cells.join(" | ")} |`).join("\n");
}

interface DbReport {
  setup: DbSetup;
  baseline: ServerRun;
  /** Metrics off (the default). */
  service: ServerRun;
  /** The comparison's further runs: metrics on twice, then off again. */
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
/** More CPU than this taken by other processes during a scenario makes its figures suspect. */
const DISTURBED_CORES = 0.2;

function goalChecks(report: DbReport): GoalCheck[] {
  const binding = report.setup.kind === "postgres";
  const checks: GoalCheck[] = [];
  const ratio = (endpoint: Endpoint) =>
    find(report, "service", endpoint).rps / find(report, "baseline", endpoint).rps;
  const createRatio = ratio("create");
  checks.push({
    text: `create ≥ ${fmtPct(GOALS.createRatio)} of baseline req/s: ${fmtPct(createRatio)}`,
    met: createRatio >= GOALS.createRatio,
    binding,
  });
  const createP99 = find(report, "service", "create").p99;
  checks.push({
    text: `create p99 < ${GOALS.createP99Ms} ms: ${fmtMs(createP99)} ms`,
    met: createP99 < GOALS.createP99Ms,
    binding,
  });
  const getRatio = ratio("get");
  checks.push({
    text: `GET ≥ ${fmtPct(GOALS.getRatio)} of baseline req/s: ${fmtPct(getRatio)}`,
    met: getRatio >= GOALS.getRatio,
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

function render(
  reports: DbReport[],
  started: Date,
  source: { before: SourceState | undefined; after: SourceState | undefined },
): { markdown: string; summary: string } {
  const resultRows: string[][] = [];
  const ratioRows: string[][] = [];
  for (const report of reports) {
    for (const endpoint of ["create", "get"] as const) {
      for (const server of ["service", "baseline"] as const) {
        const m = find(report, server, endpoint);
        resultRows.push([
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
        ]);
      }
      const service = find(report, "service", endpoint);
      const baseline = find(report, "baseline", endpoint);
      const goal = endpoint === "create" ? GOALS.createRatio : GOALS.getRatio;
      const ratio = service.rps / baseline.rps;
      ratioRows.push([
        DB_NAMES[report.setup.kind],
        endpoint === "create" ? "create" : "GET",
        fmtRps(service.rps),
        fmtRps(baseline.rps),
        fmtPct(ratio),
        `≥ ${fmtPct(goal)}`,
        `${(service.p99 / Math.max(baseline.p99, 0.001)).toFixed(1)}×`,
        ratio >= goal ? "yes" : "no",
      ]);
    }
  }

  const checks = reports.flatMap((report) =>
    goalChecks(report).map((check) => ({ ...check, db: DB_NAMES[report.setup.kind] })),
  );
  const goalLines = checks.map(
    (c) =>
      `- [${c.met ? "x" : " "}] ${c.db}: ${c.text} — **${c.met ? "met" : "missed"}**${c.binding ? "" : " (informational: the goals are set for PostgreSQL)"}`,
  );
  const bindingMissed = checks.filter((c) => c.binding && !c.met);

  const cpus = os.cpus();
  const pg = reports.find((r) => r.setup.kind === "postgres");
  const pglite = reports.find((r) => r.setup.kind === "pglite");
  const pgliteVersion = readPackageVersion("@electric-sql/pglite");
  const lifetime = reports.map(
    (r) =>
      `${DB_NAMES[r.setup.kind]}: service ${fmtMiB(r.service.lifetimePeakKiB)} MiB, baseline ${fmtMiB(r.baseline.lifetimePeakKiB)} MiB`,
  );
  const disturbed = reports.some((r) =>
    [...r.service.measurements, ...r.baseline.measurements].some((m) => m.otherCores > DISTURBED_CORES),
  );
  const notAt64 =
    settings.connections !== GOALS.connections
      ? `\n> The goals are defined at ${GOALS.connections} connections; this run used ${settings.connections}.\n`
      : "";

  const tables = [
    "## Results",
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
    "## Service / baseline",
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
        "Met",
      ],
      ratioRows,
      2,
    ),
    "",
    ...overheadSection(reports),
    "## Goals",
    notAt64,
    ...goalLines,
    "",
    bindingMissed.length === 0
      ? "All PostgreSQL goals met."
      : `PostgreSQL goals missed: ${bindingMissed.length} of ${checks.filter((c) => c.binding).length}.`,
  ];

  const markdown = [
    "# Benchmark results",
    "",
    "Written by `npm run bench` (`bench/run.ts`); each run overwrites this file, so it holds the latest run.",
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
    `- PGlite: ${pglite ? `@electric-sql/pglite ${pgliteVersion} (PostgreSQL ${pglite.baseline.serverVersion ?? "unknown"}), file-backed in DATA_DIR` : "not run"}`,
    `- Load: autocannon ${readPackageVersion("autocannon")} as a library in the runner process (same machine), ${settings.connections} connections, no pipelining, ${settings.warmup} s warm-up then ${settings.duration} s measured per scenario`,
    `- Service: \`node src/main.ts\`, LOG_LEVEL=warn, RATE_LIMIT_SANDBOX=${RATE_LIMIT_SANDBOX} (limiter active), pool of ${POOL_SIZE}; sandbox keys of ${GET_WORKSPACES} workspaces in turn, body \`${CREATE_BODY}\`; GETs go round ${GET_ROWS} payments of those workspaces, each with its workspace's key`,
    `- Baseline: \`bench/baseline-server.ts\`, bare Fastify, one INSERT … RETURNING / one SELECT by primary key into \`bench_baseline\` of the same database (pg Pool of ${POOL_SIZE}; PGlite directly)`,
    "",
    ...tables,
    "",
    "## How the figures are taken",
    "",
    "- Req/s is autocannon's mean of per-second samples; p50/p99 are its latency percentiles over the measured window (the warm-up is discarded).",
    `- Peak RSS is the server process's VmHWM from /proc/<pid>/status, ${peakResetWorks ? "reset (clear_refs 5) at the start of each scenario, so it is that scenario's peak including its warm-up" : "over the process lifetime (resetting it was not permitted)"}. Whole-lifetime peaks: ${lifetime.join("; ")}.`,
    `- Order per database: baseline (create, GET), then the service (create, GET)${settings.metricsComparison ? ", then the service with metrics on twice and off once more, and BENCH_METRICS_ROUNDS − 1 more rounds of off, on, on, off (BENCH_METRICS=0 skips them)" : ""}, each server in its own process, started fresh on the same database. Failed counts non-2xx answers, connection errors and timeouts.`,
    `- GETs go round ${GET_ROWS} rows created just before (the service's: ${GET_WORKSPACES} workspaces, each request with the key of the payment's workspace), so that concurrent requests ask for different rows; ${settings.analyze ? "on PostgreSQL the runner runs ANALYZE between create and GET, as autovacuum would within a minute (without statistics the planner reads the service's payment through payments_list_status instead of the primary key). PGlite runs no autovacuum and the runner cannot reach the server's embedded database, so its tables stay unanalyzed." : "no ANALYZE was run (BENCH_ANALYZE=0): the tables may have no planner statistics."}`,
    "- Server CPU ms/req is the server process's user + system CPU time over the measured window divided by the requests completed; DB CPU ms/req is the same for all processes of the PostgreSQL server (PGlite runs inside the server process, so its cost is in the server's figure).",
    `- Before each scenario the runner waits (up to ${settings.quietWait} s) for the machine to be under ${fmtPct(QUIET_BUSY)} busy. Other load is the CPU that processes outside the benchmark (not the runner, the server or PostgreSQL) took during the measured window, in cores; above ${DISTURBED_CORES} the scenario is measured again (up to ${settings.attempts} tries, the least disturbed kept) and a row still above is marked ⚠ as suspect.${disturbed ? " **This run has disturbed rows.**" : ""}`,
    "- The load generator shares the 2 cores with the server and the database, so absolute figures are lower than on separate machines; the ratios are what the goals compare.",
    "",
  ].join("\n");

  return { markdown, summary: tables.join("\n") };
}

interface SourceState {
  commit: string;
  /** Uncommitted changes under src/ (the service runs from the working tree). */
  dirty: boolean;
}

async function sourceState(): Promise<SourceState | undefined> {
  try {
    const head = await execFileAsync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT });
    const status = await execFileAsync("git", ["status", "--porcelain", "--", "src"], { cwd: ROOT });
    return { commit: head.stdout.trim(), dirty: status.stdout.trim() !== "" };
  } catch {
    return undefined;
  }
}

const describeSource = (state: SourceState | undefined) =>
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

/** The service with metrics on and off after its first run (off): on, on, off, then off, on, on, off per round. */
async function runMetricsRounds(setup: DbSetup): Promise<{ on: ServerRun[]; off: ServerRun[] }> {
  const on: ServerRun[] = [];
  const off: ServerRun[] = [];
  for (let round = 0; round < settings.metricsRounds; round++) {
    if (round > 0) off.push(await runService(setup));
    on.push(await runService(setup, true), await runService(setup, true));
    off.push(await runService(setup));
  }
  return { on, off };
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const started = new Date();
  const before = await sourceState();
  log(
    `databases: ${settings.dbs.join(", ")}; ${settings.connections} connections; ` +
      `${settings.warmup} s warm-up + ${settings.duration} s per scenario`,
  );
  const reports: DbReport[] = [];
  for (const kind of settings.dbs) {
    const setup = await setUpDatabase(kind);
    const baseline = await runBaseline(setup);
    const service = await runService(setup);
    const metricsRuns = settings.metricsComparison ? await runMetricsRounds(setup) : undefined;
    await setup.teardown();
    reports.push({ setup, baseline, service, ...(metricsRuns ? { metricsRuns } : {}) });
  }
  const after = await sourceState();
  if (describeSource(before) !== describeSource(after)) {
    log(`src changed during the run: ${describeSource(before)} → ${describeSource(after)}`);
  }
  const { markdown, summary } = render(reports, started, { before, after });
  writeFileSync(RESULTS_FILE, markdown);
  process.stdout.write(`\n${summary}\n\nWritten to ${RESULTS_FILE}\n`);
}

await runAsScript(import.meta.url, log, main, steps);
