import type { WebhookDispatcher } from "../src/modules/webhooks/dispatcher.ts";
import { type OutboxEvent, recordEvents } from "../src/modules/webhooks/outbox.ts";
import { bearer, createWorkspace, type TestApp } from "../test/support/app.ts";
import { QUICK } from "./support.ts";
import type { Receiver } from "./webhooks.ts";

// "Receiver down, then back" (issue 43), part of `node bench/webhooks.ts`: two registrations whose
// receivers are stopped (connection refused), 200 events each recorded as they go down, the
// receivers started again on the same ports after DOWN_MS (60 s; 5 s with BENCH_QUICK=1), and the
// seconds from then until all 200 of each have arrived. The dispatcher keeps the default retry
// schedule (5 s, 30 s, 2 min, …). "Quiet": nothing else is sent to it after it is back, so the
// first success is the first probe (WEBHOOK_PROBE_SECONDS, 5 s) or retry that falls due. "Live": one new event is committed as it comes
// back, as a service with traffic would; its first attempt is the first success.

const DOWN_MS = QUICK ? 5_000 : 60_000;
const EVENTS = 200;
export const RECOVERY_GOAL_S = 10;

const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));

interface Side {
  name: "quiet" | "live";
  receiver: Receiver;
  port: number;
  workspaceId: string;
}

export interface RecoveryFigures {
  downSeconds: number;
  events: number;
  /** Per side: seconds from the receiver's return to its first and its last delivery. */
  quietFirstS: number;
  quietAllS: number;
  liveFirstS: number;
  liveAllS: number;
}

export async function benchRecovery(
  t: TestApp,
  dispatcher: WebhookDispatcher,
  newReceiver: () => Receiver,
  log: (message: string) => void,
): Promise<RecoveryFigures> {
  const sides: Side[] = [];
  try {
    for (const name of ["quiet", "live"] as const) {
      const receiver = newReceiver();
      await receiver.start();
      const ws = await createWorkspace(t);
      const res = await t.request({
        method: "POST",
        url: "/api/v1/webhooks",
        headers: bearer(ws.testKey),
        payload: { url: `${receiver.url}/hook/${name}`, events: ["*"] },
      });
      if (res.statusCode !== 201) throw new Error(`registration failed: ${res.statusCode} ${res.body}`);
      sides.push({ name, receiver, port: Number(new URL(receiver.url).port), workspaceId: ws.id });
    }
    const event = (side: Side, seq: number, phase: string): OutboxEvent => ({
      workspaceId: side.workspaceId,
      environment: "sandbox",
      type: "payment.created",
      payload: { seq, phase },
    });

    for (const side of sides) await side.receiver.stop();
    for (const side of sides) {
      const events = Array.from({ length: EVENTS }, (_, seq) => event(side, seq, `recovery-${side.name}`));
      await t.database.db.transaction().execute((trx) => recordEvents(trx, events));
    }
    log(`recovery: receivers down for ${DOWN_MS / 1000} s with ${EVENTS} events each`);
    dispatcher.start(); // running since the throughput measure; the call is for a caller without one
    await sleep(DOWN_MS);

    for (const side of sides) await side.receiver.start(side.port);
    const backAt = performance.now();
    const live = sides.find((s) => s.name === "live") as Side;
    await t.database.db
      .transaction()
      .execute((trx) => recordEvents(trx, [event(live, EVENTS, "recovery-live-new")]));

    const figures: Record<string, number> = {};
    for (const side of sides) {
      const phase = `recovery-${side.name}`;
      const lastAt = await side.receiver.waitFor(phase, EVENTS, 600_000);
      const firstAt = side.receiver.hits.find((h) => h.at >= backAt)?.at ?? Number.NaN;
      figures[`${side.name}FirstS`] = (firstAt - backAt) / 1000;
      figures[`${side.name}AllS`] = (lastAt - backAt) / 1000;
      log(
        `recovery (${side.name}): first delivery ${((firstAt - backAt) / 1000).toFixed(1)} s, all ${EVENTS} after ${((lastAt - backAt) / 1000).toFixed(1)} s`,
      );
    }
    return {
      downSeconds: DOWN_MS / 1000,
      events: EVENTS,
      quietFirstS: figures.quietFirstS ?? Number.NaN,
      quietAllS: figures.quietAllS ?? Number.NaN,
      liveFirstS: figures.liveFirstS ?? Number.NaN,
      liveAllS: figures.liveAllS ?? Number.NaN,
    };
  } finally {
    await Promise.all(sides.map((s) => s.receiver.stop()));
  }
}

export function recoveryRows(r: RecoveryFigures): string[] {
  const met = (s: number) => (s <= RECOVERY_GOAL_S ? "met" : "**missed**");
  const row = (what: string, first: number, all: number) =>
    `| Receiver down ${r.downSeconds} s, then back (${what}): all ${r.events} delivered after (first after ${first.toFixed(1)} s) | ${all.toFixed(1)} s | ≤ ${RECOVERY_GOAL_S} s | ${met(all)} |`;
  return [
    row("no new events", r.quietFirstS, r.quietAllS),
    row("one new event as it returns", r.liveFirstS, r.liveAllS),
  ];
}
