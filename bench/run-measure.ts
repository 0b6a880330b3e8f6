import autocannon from "autocannon";
import {
  postgresPids,
  procStatusKiB,
  resetPeak,
  snapshot,
  spent,
  TICKS_PER_SECOND,
  waitForQuiet,
} from "./proc-stats.ts";
import type { DbSetup } from "./run-db.ts";
import { fmtMiB, fmtMs, fmtRps } from "./run-report.ts";
import {
  type DbKind,
  DISTURBED_CORES,
  type Endpoint,
  log,
  QUIET_BUSY,
  type ServerKind,
  settings,
} from "./run-settings.ts";
import { assertAlive, type Child } from "./service-process.ts";

// bench/run.ts's load (autocannon as a library, in this process) and what it measures of one
// scenario: req/s and latency, the server's peak RSS, the CPU the server and PostgreSQL spend per
// request, and how much CPU processes outside the benchmark took meanwhile (a figure taken while
// something else loaded the 2 cores is flagged).

export interface Target {
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

export interface Measurement {
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

/** One server's run on one database: a measurement per endpoint. */
export interface ServerRun {
  measurements: Measurement[];
  lifetimePeakKiB: number | undefined;
  serverVersion?: string;
}

// VmHWM is the process's peak resident set. Writing 5 to clear_refs resets it to the current
// RSS, so each scenario's figure is its own peak (warm-up and measurement).
let peakResetWorks = true;

/** Whether every scenario's peak RSS was its own (else it is the process lifetime's). */
export const peakResets = () => peakResetWorks;

/**
 * Measures one scenario; a measurement disturbed by other processes (more than DISTURBED_CORES of
 * CPU outside the benchmark) is repeated, up to BENCH_ATTEMPTS in all, and the least disturbed kept.
 */
export async function measure(
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
  await waitForQuiet(label, settings.quietWait, QUIET_BUSY, log);
  if (!resetPeak(child.pid)) peakResetWorks = false;
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
