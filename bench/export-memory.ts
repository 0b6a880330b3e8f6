import { get as httpGet, type IncomingMessage } from "node:http";
import pg from "pg";
import { processTicks, procStatusKiB as readStatusKiB, resetPeak } from "./proc-stats.ts";

// The dashboard bench's memory measurements of a CSV export (bench/dashboard.ts explains the
// method): peak RSS growth from /proc, and live memory read through the service's inspector
// while the export is held at a given point.

function procStatusKiB(pid: number, field: "VmHWM" | "VmRSS"): number {
  const kib = readStatusKiB(pid, field);
  if (kib === undefined) throw new Error(`no ${field} for ${pid}`);
  return kib;
}

export const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));
export const MiB = 1024 * 1024;
export const median = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] ?? Number.NaN;
};

/** An export of the newest payments: its query string (none: all) and the rows it must have. */
export interface ExportSize {
  name: string;
  query: string;
  rows: number;
}

/**
 * The export of the first UTC day from which the workspace has at least `target` payments (the
 * dashboard's `from` filter), with its exact number of rows.
 */
export async function recentExport(
  databaseUrl: string,
  workspaceId: string,
  target: number,
): Promise<ExportSize> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const scope = "workspace_id = $1 AND environment = 'sandbox'";
    const { rows } = await client.query<{ day: string }>(
      `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day FROM payments WHERE ${scope}
       ORDER BY created_at DESC, id DESC OFFSET $2 LIMIT 1`,
      [workspaceId, target - 1],
    );
    const day = rows[0]?.day;
    if (!day) throw new Error(`fewer than ${target} payments`);
    const counted = await client.query<{ n: string }>(
      `SELECT count(*) AS n FROM payments WHERE ${scope} AND created_at >= ($2 || 'T00:00:00Z')::timestamptz`,
      [workspaceId, day],
    );
    const n = Number(counted.rows[0]?.n);
    return { name: `${n.toLocaleString("en-US")} rows (from ${day})`, query: `?from=${day}`, rows: n };
  } finally {
    await client.end();
  }
}

export const exportPath = (size: ExportSize) => `/dashboard/sandbox/payments/export.csv${size.query}`;

export interface RssExport {
  size: "small" | "full";
  rows: number;
  bytes: number;
  seconds: number;
  rssBeforeMiB: number;
  peakMiB: number;
  growthMiB: number;
}

/** One export read as fast as the bench reads, with the service's peak RSS over its RSS before. */
export async function exportWithPeak(
  base: string,
  cookie: string,
  pid: number,
  size: ExportSize,
  label: RssExport["size"],
): Promise<{ figures: RssExport; peakReset: boolean }> {
  const rssBefore = procStatusKiB(pid, "VmRSS");
  const peakReset = resetPeak(pid);
  const begin = performance.now();
  const res = await fetch(`${base}${exportPath(size)}`, { headers: { cookie } });
  if (res.status !== 200 || !res.body) throw new Error(`export: ${res.status}`);
  let bytes = 0;
  let lines = 0;
  for await (const chunk of res.body) {
    bytes += chunk.length;
    for (const byte of chunk) if (byte === 10) lines++;
  }
  const peak = procStatusKiB(pid, "VmHWM");
  // A description has no line break here: each record is one line, after the header.
  if (lines - 1 !== size.rows) throw new Error(`the export had ${lines - 1} rows, not ${size.rows}`);
  return {
    figures: {
      size: label,
      rows: lines - 1,
      bytes,
      seconds: (performance.now() - begin) / 1000,
      rssBeforeMiB: rssBefore / 1024,
      peakMiB: peak / 1024,
      growthMiB: (peak - rssBefore) / 1024,
    },
    peakReset,
  };
}

/** A DevTools protocol session with the service (started with --inspect on `port`). */
export interface Inspector {
  /** Heap used + external memory of the service right after a full garbage collection, in bytes. */
  liveBytes(): Promise<number>;
  close(): void;
}

export async function inspectorOn(port: number): Promise<Inspector> {
  const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as Array<{
    webSocketDebuggerUrl?: string;
  }>;
  const url = targets[0]?.webSocketDebuggerUrl;
  if (!url) throw new Error("the service's inspector lists no target");
  const socket = new WebSocket(url);
  await new Promise<void>((opened, failed) => {
    socket.onopen = () => opened();
    socket.onerror = () => failed(new Error(`cannot connect to the service's inspector at ${url}`));
  });
  let lastId = 0;
  const waiting = new Map<number, { done: (result: unknown) => void; fail: (err: Error) => void }>();
  socket.onmessage = (event) => {
    const message = JSON.parse(String(event.data)) as {
      id?: number;
      result?: unknown;
      error?: { message: string };
    };
    const call = message.id === undefined ? undefined : waiting.get(message.id);
    if (!call || message.id === undefined) return;
    waiting.delete(message.id);
    if (message.error) call.fail(new Error(`inspector: ${message.error.message}`));
    else call.done(message.result);
  };
  const send = (method: string, params: Record<string, unknown> = {}) =>
    new Promise<unknown>((done, fail) => {
      const id = ++lastId;
      waiting.set(id, { done, fail });
      socket.send(JSON.stringify({ id, method, params }));
    });
  return {
    async liveBytes() {
      await send("HeapProfiler.collectGarbage");
      const answer = (await send("Runtime.evaluate", {
        expression: "JSON.stringify(process.memoryUsage())",
        returnByValue: true,
      })) as { result?: { value?: string } };
      const usage = JSON.parse(answer.result?.value ?? "null") as {
        heapUsed: number;
        external: number;
      } | null;
      if (!usage) throw new Error("the inspector gave no process.memoryUsage()");
      return usage.heapUsed + usage.external;
    },
    close: () => socket.close(),
  };
}

export interface LiveProbe {
  size: "small" | "full";
  rows: number;
  /** The idle process before the export: heap used + external after a full GC, MiB. */
  idleMiB: number;
  /** Above idle with 10% of the rows read and the reader stopped until the service went idle. */
  at10MiB: number;
  /** Above idle with half of the rows read, the reader reading on at full speed. */
  at50MiB: number;
  /** Above idle with 90% of the rows read and the reader stopped until the service went idle. */
  at90MiB: number;
  /** Above idle once the whole body has been read. */
  afterMiB: number;
  /** Seconds the service took to go idle after the reader stopped, at 10% and at 90%. */
  idleAfterS: [number, number];
}

/** CPU time (user + system) the process has used, in clock ticks. */
function cpuTicks(pid: number): number {
  const ticks = processTicks(pid);
  if (ticks === undefined) throw new Error(`no CPU time for ${pid}`);
  return ticks;
}

/**
 * Waits until the process uses (almost) no CPU for 250 ms, up to 20 s; the seconds it took. With
 * the reader stopped, a streaming export stops once the socket's buffers are full; one that does
 * not wait for the reader goes on until it has produced (and holds) the whole body.
 */
export async function untilIdle(pid: number): Promise<number> {
  const begin = performance.now();
  let before = cpuTicks(pid);
  while (performance.now() - begin < 20_000) {
    await sleep(250);
    const now = cpuTicks(pid);
    if (now - before <= 1) break;
    before = now;
  }
  return (performance.now() - begin) / 1000;
}

/** One export read with node:http, the service's live memory taken at 10%, 50% and 90% of its rows. */
export async function probeExport(
  base: string,
  cookie: string,
  pid: number,
  size: ExportSize,
  label: LiveProbe["size"],
  inspector: Inspector,
): Promise<LiveProbe> {
  const idle = await inspector.liveBytes();
  const above = async () => ((await inspector.liveBytes()) - idle) / MiB;
  const res = await new Promise<IncomingMessage>((answered, failed) =>
    httpGet(`${base}${exportPath(size)}`, { headers: { cookie } }, answered).once("error", failed),
  );
  if (res.statusCode !== 200) throw new Error(`export: ${res.statusCode}`);
  let lines = 0;
  let at10: number | undefined;
  let at90: number | undefined;
  let at50: Promise<number> | undefined;
  const stopped: number[] = [];
  // for await reads only when the loop asks: while it waits, the socket stops being read.
  for await (const chunk of res as AsyncIterable<Buffer>) {
    for (const byte of chunk) if (byte === 10) lines++;
    const read = lines - 1;
    if (at10 === undefined && read >= size.rows * 0.1) {
      stopped.push(await untilIdle(pid));
      at10 = await above();
    }
    if (at50 === undefined && read >= size.rows * 0.5) at50 = above();
    if (at90 === undefined && read >= size.rows * 0.9) {
      stopped.push(await untilIdle(pid));
      at90 = await above();
    }
  }
  if (lines - 1 !== size.rows) throw new Error(`the export had ${lines - 1} rows, not ${size.rows}`);
  if (at10 === undefined || at50 === undefined || at90 === undefined)
    throw new Error("a probe was not taken");
  return {
    size: label,
    rows: lines - 1,
    idleMiB: idle / MiB,
    at10MiB: at10,
    at50MiB: await at50,
    at90MiB: at90,
    afterMiB: await above(),
    idleAfterS: [stopped[0] ?? Number.NaN, stopped[1] ?? Number.NaN],
  };
}
