import { randomBytes } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { freePort } from "../src/devnet/chain.ts";
import { procStatusKiB } from "./proc-stats.ts";
import { analyzeThen, type DbSetup, setUpDatabase } from "./run-db.ts";
import { measure, type ServerRun, type Target } from "./run-measure.ts";
import { type DbReport, describeSource, render, sourceState, writeSection } from "./run-report.ts";
import {
  CREATE_BODY,
  GET_ROWS,
  GET_WORKSPACES,
  HOST,
  log,
  POOL_SIZE,
  RATE_LIMIT_SANDBOX,
  SETTLEMENT_ADDRESS,
  settings,
  steps,
} from "./run-settings.ts";
import { cleanEnv, startChild, waitForHealth } from "./service-process.ts";
import { dig, postJson, QUICK, QUICK_TAG, runAsScript } from "./support.ts";

// `npm run bench:payments`: measures the service's sandbox `POST /api/v1/payments` and
// `GET /api/v1/payments/{id}` against PostgreSQL and embedded PGlite, next to a bare Fastify
// baseline doing one INSERT / one SELECT by primary key on the same database, and writes its
// section of bench/RESULTS.md (between its markers; the rest of the file is kept). Every child
// process and the throw-away PostgreSQL server are stopped on the way out, on failure and on
// SIGINT/SIGTERM/SIGHUP too. Goals (issue 43, on PostgreSQL at 64 connections): create ≥ 100% of
// the baseline's req/s with a p99 ≤ 1.2× the baseline's; GET ≥ 70% of the baseline's req/s.
//
// Environment: BENCH_DURATION (measured seconds per scenario, default 10), BENCH_WARMUP (seconds,
// default 2), BENCH_CONNECTIONS (default 64), BENCH_DB=postgres|pglite|both (default both),
// BENCH_CPU_PROF=<folder> (run the service under `node --cpu-prof`, profiles written there),
// BENCH_QUIET_WAIT (seconds to wait, before each scenario, for other processes to leave the CPU
// idle; default 120, 0 = don't look), BENCH_ATTEMPTS (tries per scenario when other processes
// disturbed the measurement; default 3), BENCH_ANALYZE=0 (skip the ANALYZE between create and GET
// on PostgreSQL), BENCH_METRICS=0 (skip the metrics on / off comparison, bench/metrics-overhead.ts),
// BENCH_METRICS_ROUNDS (its rounds, default 1).
// BENCH_QUICK=1: 1 s warm-up + 2 s per scenario, PostgreSQL only, no waiting for an idle machine,
// one try, no metrics comparison (each explicit setting above still wins), and bench/RESULTS.md is
// left alone: the figures are only printed.
//
// The modules: run-settings.ts (settings, goals), run-db.ts (the databases), run-measure.ts (load
// and measurement; /proc readers in proc-stats.ts), run-report.ts (tables, goals, RESULTS.md).

const RESULTS_FILE = resolve(import.meta.dirname, "RESULTS.md");

// ---------------------------------------------------------------------------------------------
// The two servers

async function runBaseline(setup: DbSetup): Promise<ServerRun> {
  const port = await freePort();
  const env: Record<string, string> = {
    ...cleanEnv(),
    PORT: String(port),
    HOST,
    POOL_SIZE: String(POOL_SIZE),
    ...(setup.databaseUrl ? { DATABASE_URL: setup.databaseUrl } : {}),
    ...(setup.pgliteDir ? { PGLITE_DIR: setup.pgliteDir } : {}),
  };
  const child = startChild(`baseline server (${setup.kind})`, ["bench/baseline-server.ts"], {
    env,
    steps,
    log,
    ipc: true,
  });
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
    ...cleanEnv(),
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
  const child = startChild(`service (${setup.kind})`, args, { env, steps, log });
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
      `${settings.warmup} s warm-up + ${settings.duration} s per scenario${QUICK_TAG}`,
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
  if (QUICK) {
    process.stdout.write(`\n${summary}\n\n${RESULTS_FILE} left as it is (BENCH_QUICK=1).\n`);
    return;
  }
  writeSection(RESULTS_FILE, markdown);
  process.stdout.write(`\n${summary}\n\nWritten to its section of ${RESULTS_FILE}\n`);
}

await runAsScript(import.meta.url, log, main, steps);
