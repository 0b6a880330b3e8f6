import { Agent, type ClientRequest, get, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { bearer, type TestApp } from "../test/support/app.ts";

// The hosted page's live status (D25), for bench/hosted-page.ts: N server-sent event streams
// GET /pay/<id>/events held open at once over real sockets on 127.0.0.1, SSE_PER_PAYMENT per
// payment, the process's RSS and heap before and after, and the time one status change takes to
// reach every stream of its payment.

/** Streams per payment: the per-payment limit the bench sets (HOSTED_PAGE_SSE_PER_PAYMENT). */
export const SSE_PER_PAYMENT = 50;
/** The goal: 5,000 streams under 500 MiB of extra memory. */
const SSE_EXTRA_MIB = 500;

const log = (message: string) => process.stderr.write(`[bench:hosted-page] ${message}\n`);

export interface SseFigures {
  streams: number;
  payments: number;
  openMs: number;
  rssBeforeMiB: number;
  rssAfterMiB: number;
  heapBeforeMiB: number;
  heapAfterMiB: number;
  /** From the cancel request's start until the last stream of that payment read the new status. */
  fanOutMs: number;
  /** Streams of the changed payment that read it (all of them, or the bench fails). */
  reached: number;
}

/** The goal for `streams` streams: its share of 500 MiB for 5,000. */
export const sseGoalMiB = (streams: number) => (SSE_EXTRA_MIB * streams) / 5000;
const MiB = 1024 * 1024;

/** Runs a full garbage collection when the flag can be set, so before/after figures compare live memory. */
function collect(): void {
  setFlagsFromString("--expose-gc");
  const gc: unknown = runInNewContext("gc");
  if (typeof gc === "function") gc();
}

export interface OpenStream {
  request: ClientRequest;
  /** Resolves with the time (performance.now) the stream first read `status` in an event. */
  saw(status: string): Promise<number>;
}

/** Opens GET `url` as an event stream; fails loudly unless it answers 200 text/event-stream. */
export function openStream(agent: Agent, url: string): Promise<OpenStream> {
  return new Promise((resolve, reject) => {
    const waiting = new Map<string, (at: number) => void>();
    const seen = new Map<string, number>();
    let buffer = "";
    const request = get(url, { agent, headers: { accept: "text/event-stream" } }, (res: IncomingMessage) => {
      if (res.statusCode !== 200 || !String(res.headers["content-type"]).startsWith("text/event-stream")) {
        res.resume();
        reject(
          new Error(
            `GET ${url} answered ${res.statusCode} ${res.headers["content-type"]}: the SSE endpoint /pay/:id/events (D25) is missing or refused the stream`,
          ),
        );
        return;
      }
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        // SSE lines may end in CRLF (the spec allows it): read them as LF.
        buffer += chunk.replaceAll("\r\n", "\n");
        // Events end with a blank line; only `event: status` carries the payment's status.
        let end = buffer.indexOf("\n\n");
        while (end >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          end = buffer.indexOf("\n\n");
          if (!/^event: status$/m.test(block)) continue;
          const data = block
            .split("\n")
            .filter((line) => line.startsWith("data:"))
            .map((line) => line.slice(5).trim())
            .join("\n");
          const status = (JSON.parse(data) as { status?: string }).status;
          if (!status || seen.has(status)) continue;
          const at = performance.now();
          seen.set(status, at);
          waiting.get(status)?.(at);
        }
      });
      resolve({
        request,
        saw: (status) =>
          new Promise((done) => {
            const at = seen.get(status);
            if (at !== undefined) done(at);
            else waiting.set(status, done);
          }),
      });
    });
    request.on("error", reject);
  });
}

/**
 * N event streams over real sockets, SSE_PER_PAYMENT per payment: memory before and after, and the
 * time one payment's cancel takes to reach all of its streams.
 */
export async function benchEventStreams(
  t: TestApp,
  streams: number,
  create: () => Promise<string>,
  liveKey: string,
): Promise<SseFigures> {
  await t.app.http.listen({ port: 0, host: "127.0.0.1" });
  const { port } = t.app.http.server.address() as AddressInfo;
  const base = `http://127.0.0.1:${port}`;
  const payments = Math.ceil(streams / SSE_PER_PAYMENT);
  log(`SSE: creating ${payments} payments for ${streams} streams`);
  const ids: string[] = [];
  for (let i = 0; i < payments; i++) ids.push(await create());
  // One socket per stream: no pooling limit, no keep-alive reuse (a stream never ends by itself).
  const agent = new Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
  const open: OpenStream[] = [];
  try {
    // A probe first, so a missing endpoint fails at once and plainly.
    const probe = await openStream(agent, `${base}/pay/${ids[0]}/events`);
    probe.request.destroy();
    collect();
    const before = process.memoryUsage();
    const begin = performance.now();
    // Batches of 250: within the listen backlog, so no connection waits on a SYN retry.
    for (let at = 0; at < streams; at += 250) {
      const batch = Array.from({ length: Math.min(250, streams - at) }, (_, i) =>
        openStream(agent, `${base}/pay/${ids[Math.floor((at + i) / SSE_PER_PAYMENT)]}/events`),
      );
      open.push(...(await Promise.all(batch)));
    }
    const openMs = performance.now() - begin;
    collect();
    const after = process.memoryUsage();
    log(`SSE: ${open.length} streams open in ${openMs.toFixed(0)} ms`);

    // One status change: the first payment cancelled through the API; every one of its streams reads it.
    const target = open.slice(0, Math.min(SSE_PER_PAYMENT, open.length));
    const arrivals = target.map((stream) => stream.saw("cancelled"));
    const changeAt = performance.now();
    const cancelled = await t.app.http.inject({
      method: "POST",
      url: `/api/v1/payments/${ids[0]}/cancel`,
      headers: bearer(liveKey),
    });
    if (cancelled.statusCode !== 200) throw new Error(`cancel: ${cancelled.statusCode} ${cancelled.body}`);
    const timeout = new Promise<never>((_, reject) =>
      setTimeout(
        () => reject(new Error("the cancel did not reach every stream within 30 s")),
        30_000,
      ).unref(),
    );
    const times = await Promise.race([Promise.all(arrivals), timeout]);
    return {
      streams: open.length,
      payments,
      openMs,
      rssBeforeMiB: before.rss / MiB,
      rssAfterMiB: after.rss / MiB,
      heapBeforeMiB: before.heapUsed / MiB,
      heapAfterMiB: after.heapUsed / MiB,
      fanOutMs: Math.max(...times) - changeAt,
      reached: times.length,
    };
  } finally {
    for (const stream of open) stream.request.destroy();
    agent.destroy();
  }
}
