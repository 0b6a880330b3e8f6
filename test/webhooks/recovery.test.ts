import { describe, expect, it } from "vitest";
import type { Environment } from "../../src/config.ts";
import { bearer } from "../support/app.ts";
import type { ReceivedRequest } from "../support/receiver.ts";
import { forwardedEvents, harness, type Json, until } from "../support/webhook-delivery.ts";

// Webhook recovery (issue 43): when a registration that was failing answers 2xx again, the
// deliveries waiting on a retry are sent at once, in creation order, no faster than
// WEBHOOK_ENDPOINT_RATE_PER_SECOND; and one slow registration does not hold up the others.

const RATE = 10;
const BACKLOG = 12;
/** A retry step far beyond the polls' bounds: a delivery sent within them was pulled forward. */
const LONG_RETRY = [60_000, 60_000, 60_000];

const n = (r: ReceivedRequest) => (r.json.data as Json).n as number;

/** A harness and its helpers: registrations failing with a backlog, and their rows. */
function recoveryHarness(env: Record<string, string>) {
  const h = harness({ WEBHOOK_ENDPOINT_RATE_PER_SECOND: String(RATE), ...env });

  /** Deliveries of a registration as the database has them, oldest first. */
  async function rows(endpointId: number) {
    return h.t.database.db
      .selectFrom("webhook_deliveries")
      .select(["id", "status", "attempts", "next_attempt_at"])
      .where("endpoint_id", "=", endpointId)
      .orderBy("created_at")
      .orderBy("outbox_event_id")
      .execute();
  }

  /** A registration whose receiver answers 503 and `count` deliveries that failed once each. */
  async function failing(count: number) {
    const receiver = await h.receiver();
    receiver.respond = () => ({ status: 503 });
    const ws = await h.workspace();
    const hook = await h.register(ws.testKey, receiver.url);
    await h.record(forwardedEvents(ws.id, count));
    await until(`${count} deliveries waiting on a retry`, async () => {
      const log = await rows(hook.id);
      return log.length === count && log.every((d) => d.status === "pending" && d.attempts === 1);
    });
    return { receiver, ws, hook };
  }
  return { h, rows, failing };
}

describe("webhook recovery", () => {
  // No probe within these tests: what brings the backlog here is the success they make.
  const { h, rows, failing } = recoveryHarness({ WEBHOOK_PROBE_SECONDS: "3600" });

  it("sends the backlog as soon as one delivery succeeds, in creation order, at the configured rate", async () => {
    h.dispatcher({ retryDelaysMs: LONG_RETRY }).start();
    const back = await failing(BACKLOG);
    const other = await failing(3);
    const otherBefore = await rows(other.hook.id);

    // The receiver is back; a new event is the first success (its first attempt is due at once).
    back.receiver.respond = () => ({ status: 200 });
    const from = back.receiver.received.length;
    await h.record([
      {
        workspaceId: back.ws.id,
        environment: "sandbox" as Environment,
        type: "payment.forwarded",
        payload: { n: BACKLOG },
      },
    ]);
    const got = await until(
      "the backlog after the first success",
      async () => {
        const after = back.receiver.received.slice(from);
        return after.length >= BACKLOG + 1 && after;
      },
      BACKLOG * (1000 / RATE) + 5_000,
    );

    // The new event first, then the backlog in the order it was created, each sent once.
    expect(got.map(n)).toEqual([BACKLOG, ...Array.from({ length: BACKLOG }, (_, i) => i)]);
    // Not faster than the rate: the k-th of the backlog is due k/RATE s after the success was
    // recorded, which is after the receiver got it.
    const first = (got[0] as ReceivedRequest).receivedAt;
    got.slice(1).forEach((r, i) => {
      expect(r.receivedAt - first).toBeGreaterThanOrEqual(((i + 1) * 1000) / RATE);
    });
    // And at once: well before the 60 s retry each was waiting for.
    expect((got.at(-1) as ReceivedRequest).receivedAt - first).toBeLessThan(BACKLOG * (1000 / RATE) + 3_000);
    await until("all delivered", async () =>
      (await rows(back.hook.id)).every((d) => d.status === "delivered"),
    );

    // Another failing registration's backlog keeps its retry times.
    expect(await rows(other.hook.id)).toEqual(otherBefore);
    expect(other.receiver.received).toHaveLength(3);
  });

  it("a merchant's resend of one waiting delivery that succeeds brings the rest behind it", async () => {
    h.dispatcher({ retryDelaysMs: LONG_RETRY }).start();
    const back = await failing(4);
    back.receiver.respond = () => ({ status: 200 });
    const from = back.receiver.received.length;

    // The newest is resent by hand (the API's retry); its success is the recovery.
    const newest = (await rows(back.hook.id)).at(-1)?.id as string;
    const res = await h.t.request({
      method: "POST",
      url: `/api/v1/webhooks/${back.hook.id}/deliveries/${newest}/retry`,
      headers: bearer(back.ws.testKey),
    });
    expect(res.statusCode, res.body).toBe(202);
    const got = await until("the rest after the resent one", async () => {
      const after = back.receiver.received.slice(from);
      return after.length >= 4 && after;
    });
    expect(got.map(n)).toEqual([3, 0, 1, 2]);
    await until("all delivered", async () =>
      (await rows(back.hook.id)).every((d) => d.status === "delivered"),
    );
  });

  it("a delivery its receiver refuses while it takes the others is tried again at each recovery, without using up its retries", async () => {
    h.dispatcher({ retryDelaysMs: LONG_RETRY }).start();
    const receiver = await h.receiver();
    receiver.respond = (r) => ({ status: n(r) === 0 ? 400 : 200 });
    const ws = await h.workspace();
    const hook = await h.register(ws.testKey, receiver.url);
    const event = (k: number) => ({
      workspaceId: ws.id,
      environment: "sandbox" as Environment,
      type: "payment.forwarded",
      payload: { n: k },
    });
    await h.record([event(0)]);
    await until("the refused delivery waiting on its retry", async () => {
      const [refused] = await rows(hook.id);
      return refused?.attempts === 1 && refused;
    });
    const [before] = await rows(hook.id);

    // Each new event's success ends the streak the refusal started: the refused one is tried
    // again at once (it may be what the receiver was refusing), fails, and goes back to its
    // retry a minute away with its one attempt.
    for (let k = 1; k <= 3; k++) {
      await h.record([event(k)]);
      await receiver.waitFor(k + 1, (r) => n(r) === 0);
      await until(`round ${k} recorded`, async () => {
        const log = await rows(hook.id);
        return log.length === k + 1 && log.slice(1).every((d) => d.status === "delivered") && log;
      });
    }
    await until("the refused one back on its schedule", async () => {
      const [refused] = await rows(hook.id);
      return refused?.next_attempt_at.getTime() === before?.next_attempt_at.getTime() && refused;
    });
    expect((await rows(hook.id))[0]).toEqual(before);
  });

  it("a slow registration does not hold up deliveries to another", async () => {
    const slow = await h.receiver();
    slow.respond = () => "hang";
    const fast = await h.receiver();
    const slowWs = await h.workspace();
    const fastWs = await h.workspace();
    await h.register(slowWs.testKey, slow.url);
    await h.register(fastWs.testKey, fast.url);
    // Few slots, so that a slow receiver's backlog could fill them all.
    h.dispatcher({ maxInFlight: 8, batchSize: 8, perHostConcurrency: 2, timeoutMs: 20_000 }).start();
    await h.record(forwardedEvents(slowWs.id, 20));
    await slow.waitFor(2);

    const recordedAt = Date.now();
    await h.record(forwardedEvents(fastWs.id, 3));
    const got = await fast.waitFor(3, () => true, 3_000);
    expect(got.map(n).sort()).toEqual([0, 1, 2]);
    expect(Math.max(...got.map((r) => r.receivedAt)) - recordedAt).toBeLessThan(3_000);
    // The slow one has no more requests open than its host's limit.
    expect(slow.received).toHaveLength(2);
  });
});

describe("webhook recovery without a new event", () => {
  const PROBE_S = 1;
  const { h, rows, failing } = recoveryHarness({ WEBHOOK_PROBE_SECONDS: String(PROBE_S) });

  it("probes a failing registration's oldest waiting delivery without using up its retries, and finds it back", async () => {
    // Two dispatchers (as two instances would run): one probe an interval between them.
    h.dispatcher({ retryDelaysMs: LONG_RETRY }).start();
    h.dispatcher({ retryDelaysMs: LONG_RETRY }).start();
    const down = await failing(4);
    const before = await rows(down.hook.id);

    // While it fails: its oldest delivery is tried once a probe interval, and every row keeps its
    // one attempt and its retry a minute away.
    const probes = await until(
      "three probes",
      async () => {
        const later = down.receiver.received.slice(4);
        return later.length >= 3 && later;
      },
      6 * PROBE_S * 1000 + 5_000,
    );
    expect(probes.map(n)).toEqual(probes.map(() => 0));
    for (let i = 1; i < probes.length; i++) {
      const spacing =
        (probes[i] as ReceivedRequest).receivedAt - (probes[i - 1] as ReceivedRequest).receivedAt;
      expect(spacing).toBeGreaterThanOrEqual(PROBE_S * 1000 - 100);
    }
    expect(await rows(down.hook.id)).toEqual(before);

    // The receiver is back and nothing new is sent: the next probe is the success that brings
    // the rest, well before the minute their retries wait for.
    down.receiver.respond = () => ({ status: 200 });
    const backAt = Date.now();
    await until(
      "all delivered after the receiver is back",
      async () => (await rows(down.hook.id)).every((d) => d.status === "delivered"),
      PROBE_S * 1000 + 4 * (1000 / RATE) + 5_000,
    );
    expect(Date.now() - backAt).toBeLessThan(30_000);
    const after = down.receiver.received.slice(4).filter((r) => r.receivedAt >= backAt);
    // The probe first (the oldest), then the rest of the backlog in creation order, each once.
    expect(after.slice(-4).map(n)).toEqual([0, 1, 2, 3]);
    // Each row: its failed attempt and its delivery; the failed probes are not counted.
    expect((await rows(down.hook.id)).map((d) => d.attempts)).toEqual([2, 2, 2, 2]);
  });

  it("probes nothing of a failing registration that has nothing waiting", async () => {
    h.dispatcher({ retryDelaysMs: [] }).start();
    const receiver = await h.receiver();
    receiver.respond = () => ({ status: 503 });
    const ws = await h.workspace();
    const hook = await h.register(ws.testKey, receiver.url);
    // No retry left: the one delivery fails at its first attempt, and nothing waits.
    await h.record(forwardedEvents(ws.id, 1));
    await until("the delivery failed", async () => (await rows(hook.id)).every((d) => d.status === "failed"));
    await until(
      "no probe left to do",
      async () => {
        const endpoint = await h.t.database.db
          .selectFrom("webhook_endpoints")
          .select(["failing_since", "next_probe_at"])
          .where("id", "=", hook.id)
          .executeTakeFirstOrThrow();
        return endpoint.failing_since !== null && endpoint.next_probe_at === null;
      },
      PROBE_S * 1000 + 5_000,
    );
    expect(receiver.received).toHaveLength(1);
  });
});
