import { createHmac, timingSafeEqual } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Environment } from "../../src/config.ts";
import { DISABLE_AFTER_MS } from "../../src/domain/retry-schedule.ts";
import { type DispatcherOptions, WebhookDispatcher } from "../../src/modules/webhooks/dispatcher.ts";
import { type OutboxEvent, recordEvents } from "../../src/modules/webhooks/outbox.ts";
import * as repo from "../../src/modules/webhooks/repo.ts";
import type { Resolver } from "../../src/platform/http/outbound-guard.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { installLoopbackOnly, type LoopbackOnly } from "../support/loopback-only.ts";
import { type ReceivedRequest, WebhookReceiver } from "../support/receiver.ts";

// Integration tests of outbound webhook delivery (interface part 6; decisions D7, D13): a real
// dispatcher sends to a real HTTP receiver, against the real app on a real database.

type Json = Record<string, unknown>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const RATE_LIMITS = { RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" };
const DAY = 24 * 60 * 60 * 1000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false>,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

function hmacHex(secret: string, data: string): Buffer {
  return createHmac("sha256", Buffer.from(secret, "utf8")).update(Buffer.from(data, "utf8")).digest();
}

/** What a merchant's receiver does: constant-time comparison of the hex digest. */
function verifies(secret: string, rawBody: string, header: unknown): boolean {
  if (typeof header !== "string" || !/^[0-9a-f]{64}$/.test(header)) return false;
  const expected = hmacHex(secret, rawBody);
  const given = Buffer.from(header, "hex");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

function header(r: ReceivedRequest, name: string): string {
  const value = r.headers[name];
  if (typeof value !== "string") throw new Error(`header ${name} missing or repeated`);
  return value;
}

const deliveryId = (r: ReceivedRequest) => header(r, "x-service-delivery");

function forwardedEvents(workspaceId: string, count: number): OutboxEvent[] {
  return Array.from({ length: count }, (_, i) => ({
    workspaceId,
    environment: "sandbox" as Environment,
    type: "payment.forwarded",
    payload: { id: `evt-${i}`, n: i },
  }));
}

/**
 * The time to claim with right after recording deliveries. The database stamps them due at its
 * now(), in microseconds; a Date has milliseconds, so `new Date()` taken within the millisecond
 * of the insert is earlier than the stamp and the claim would find nothing due yet (seen on a
 * PostgreSQL server, where the insert and the claim can fall into one millisecond).
 */
function claimTime(): Date {
  return new Date(Date.now() + 1);
}

/** Everything one test app needs; each describe block owns one. */
function harness(env: Record<string, string> = {}) {
  const h = {
    t: undefined as unknown as TestApp,
    dispatchers: [] as WebhookDispatcher[],
    receivers: [] as WebhookReceiver[],
    workspaceIds: [] as string[],

    dispatcher(options: DispatcherOptions = {}): WebhookDispatcher {
      const d = new WebhookDispatcher(h.t.app.ctx, {
        pollIntervalMs: 25,
        random: () => 0.5,
        ...options,
      });
      h.dispatchers.push(d);
      return d;
    },

    async receiver(port?: number): Promise<WebhookReceiver> {
      const r = new WebhookReceiver();
      await r.start(port);
      h.receivers.push(r);
      return r;
    },

    async workspace(): Promise<CreatedWorkspace> {
      const ws = await createWorkspace(h.t);
      h.workspaceIds.push(ws.id);
      return ws;
    },

    async register(
      key: string,
      url: string,
      events: string[] = ["*"],
    ): Promise<{ id: number; secret: string }> {
      const res = await h.t.request({
        method: "POST",
        url: "/api/v1/webhooks",
        headers: bearer(key),
        payload: { url, events },
      });
      expect(res.statusCode, res.body).toBe(201);
      return { id: res.json().webhook.id, secret: res.json().webhook.signingSecret };
    },

    async createPayment(key: string, extra: Json = {}): Promise<Json> {
      const res = await h.t.request({
        method: "POST",
        url: "/api/v1/payments",
        headers: bearer(key),
        payload: { tokenSymbol: "USDC", amount: "25", ...extra },
      });
      expect(res.statusCode, res.body).toBe(201);
      return res.json().payment as Json;
    },

    async deliveries(key: string, webhookId: number): Promise<Json[]> {
      const res = await h.t.request({
        method: "GET",
        url: `/api/v1/webhooks/${webhookId}/deliveries?limit=100`,
        headers: bearer(key),
      });
      expect(res.statusCode, res.body).toBe(200);
      return res.json().deliveries as Json[];
    },

    async webhooks(key: string): Promise<Json[]> {
      const res = await h.t.request({ method: "GET", url: "/api/v1/webhooks", headers: bearer(key) });
      expect(res.statusCode).toBe(200);
      return res.json().webhooks as Json[];
    },

    async record(events: OutboxEvent[]): Promise<void> {
      await h.t.database.db.transaction().execute((trx) => recordEvents(trx, events));
    },

    /** Stops everything a test started and retires what it left queued, so tests stay apart. */
    async cleanup(): Promise<void> {
      // Receivers first: a hanging receiver would otherwise keep a dispatcher's stop() waiting.
      await Promise.all(h.receivers.splice(0).map((r) => r.stop()));
      await Promise.all(h.dispatchers.splice(0).map((d) => d.stop()));
      h.t?.setNow(undefined);
      if (h.workspaceIds.length > 0 && h.t) {
        const ids = h.workspaceIds.splice(0);
        await h.t.database.db
          .updateTable("webhook_deliveries")
          .set({ status: "failed", locked_until: null })
          .where("status", "=", "pending")
          .where("endpoint_id", "in", (eb) =>
            eb
              .selectFrom("webhook_endpoints")
              .select("webhook_endpoints.id")
              .where("workspace_id", "in", ids),
          )
          .execute();
      }
    },
  };
  beforeAll(async () => {
    h.t = await startTestApp({ ...RATE_LIMITS, ...env });
  });
  afterEach(async () => h.cleanup());
  afterAll(async () => {
    await h.cleanup();
    await h.t?.close();
  });
  return h;
}

describe("webhook delivery", () => {
  const h = harness();

  it("signs every delivery (V1 and V2), names the event and delivery, and sends exactly {event, data}", async () => {
    const receiver = await h.receiver();
    const ws = await h.workspace();
    const hook = await h.register(ws.testKey, receiver.url, ["*"]);
    const dispatcher = h.dispatcher();
    dispatcher.start();

    const created = await h.createPayment(ws.testKey, {
      description: "Café crème ☕ — order №7",
      metadata: { orderId: "ord_7", note: "ünïcödé" },
    });
    const got = await receiver.waitFor(2);
    await until("both attempts recorded", async () => {
      await dispatcher.drain();
      const log = await h.deliveries(ws.testKey, hook.id);
      return log.length === 2 && log.every((d) => d.status === "delivered") && log;
    });
    expect(receiver.received).toHaveLength(2);

    const read = await h.t.request({
      method: "GET",
      url: `/api/v1/payments/${created.id}`,
      headers: bearer(ws.testKey),
    });
    expect(read.statusCode).toBe(200);
    const apiPayment = read.json().payment as Json;
    expect(apiPayment.status).toBe("forwarded");

    for (const r of got) {
      // X-Service-Signature: hex HMAC-SHA256 of the raw body, keyed with the secret's UTF-8 bytes.
      expect(verifies(hook.secret, r.rawBody, r.headers["x-service-signature"])).toBe(true);
      // A different secret does not verify (the check can fail).
      expect(verifies(`${hook.secret}x`, r.rawBody, r.headers["x-service-signature"])).toBe(false);

      // X-Service-Timestamp: Unix seconds, now.
      const ts = header(r, "x-service-timestamp");
      expect(ts).toMatch(/^[0-9]{10}$/);
      expect(Math.abs(Number(ts) - r.receivedAt / 1000)).toBeLessThanOrEqual(5);

      // X-Service-Signature-V2: v1=<hex HMAC of "{timestamp}.{body}">.
      const v2 = header(r, "x-service-signature-v2");
      expect(v2).toMatch(/^v1=[0-9a-f]{64}$/);
      expect(
        timingSafeEqual(Buffer.from(v2.slice(3), "hex"), hmacHex(hook.secret, `${ts}.${r.rawBody}`)),
      ).toBe(true);
      expect(v2.slice(3)).not.toBe(header(r, "x-service-signature"));

      expect(header(r, "x-service-event")).toBe(r.json.event);
      expect(deliveryId(r)).toMatch(UUID);
      expect(header(r, "content-type")).toMatch(/^application\/json/);

      // Body: exactly {event, data}.
      expect(Object.keys(r.json).sort()).toEqual(["data", "event"]);
    }

    const forwarded = got.find((r) => r.json.event === "payment.forwarded");
    const createdEvent = got.find((r) => r.json.event === "payment.created");
    expect(forwarded).toBeDefined();
    expect(createdEvent).toBeDefined();
    // data is the payment exactly as the API returns it.
    expect(forwarded?.json.data).toEqual(apiPayment);
    // payment.created carries status pending (D13); the rest is the same payment.
    expect((createdEvent?.json.data as Json | undefined)?.status).toBe("pending");
    expect(createdEvent?.json.data).toEqual({ ...apiPayment, status: "pending" });

    // Each delivery has its own id, and the log lists exactly the ids that arrived.
    const ids = got.map(deliveryId);
    expect(new Set(ids).size).toBe(2);
    const log = await h.deliveries(ws.testKey, hook.id);
    expect(log.map((d) => d.id).sort()).toEqual([...ids].sort());
    for (const d of log) {
      expect(d.attempts).toBe(1);
      expect(d.lastResponseCode).toBe(200);
      expect(d.nextAttemptAt).toBeNull();
      const arrived = got.find((r) => deliveryId(r) === d.id);
      expect(d.event).toBe(arrived?.json.event);
    }
  });

  it("retries a 500 with the same delivery id and logs delivered after 2 attempts", async () => {
    const receiver = await h.receiver();
    const seen = new Map<string, number>();
    receiver.respond = (r) => {
      const n = (seen.get(deliveryId(r)) ?? 0) + 1;
      seen.set(deliveryId(r), n);
      return { status: n === 1 ? 500 : 200 };
    };
    const ws = await h.workspace();
    const hook = await h.register(ws.testKey, receiver.url, ["payment.forwarded"]);
    h.dispatcher({ retryDelaysMs: [100, 200, 400] }).start();

    await h.createPayment(ws.testKey);
    const got = await receiver.waitFor(2);
    const [first, second] = got as [ReceivedRequest, ReceivedRequest];
    expect(deliveryId(second)).toBe(deliveryId(first));
    expect(second.rawBody).toBe(first.rawBody);
    expect(second.receivedAt - first.receivedAt).toBeGreaterThanOrEqual(80);

    const [delivery] = await until("delivered in the log", async () => {
      const log = await h.deliveries(ws.testKey, hook.id);
      return log[0]?.status === "delivered" && log;
    });
    expect(delivery).toMatchObject({
      id: deliveryId(first),
      event: "payment.forwarded",
      status: "delivered",
      attempts: 2,
      lastResponseCode: 200,
      nextAttemptAt: null,
    });
    await sleep(400);
    expect(receiver.received).toHaveLength(2);
  });

  it("times out a receiver that does not answer and tries again", async () => {
    const receiver = await h.receiver();
    receiver.respond = () => "hang";
    const ws = await h.workspace();
    const hook = await h.register(ws.testKey, receiver.url, ["payment.forwarded"]);
    h.dispatcher({ timeoutMs: 300, retryDelaysMs: [100, 60_000] }).start();

    await h.createPayment(ws.testKey);
    const [first, second] = (await receiver.waitFor(2, undefined, 5_000)) as [
      ReceivedRequest,
      ReceivedRequest,
    ];
    expect(deliveryId(second)).toBe(deliveryId(first));
    // The first attempt was given up after the 300 ms timeout, then the delay (100 ms ±20%)
    // passed. The timeout runs from before the receiver saw the request and timers may fire a
    // little early on a busy machine (339 ms was seen once), so the bound is the timeout alone.
    expect(second.receivedAt - first.receivedAt).toBeGreaterThanOrEqual(290);
    expect(second.receivedAt - first.receivedAt).toBeLessThan(3_000);

    const [delivery] = await until("two attempts in the log", async () => {
      const log = await h.deliveries(ws.testKey, hook.id);
      return log[0]?.attempts === 2 && log;
    });
    expect(delivery?.status).toBe("pending");
    expect(delivery?.lastResponseCode).toBeNull();
    expect(delivery?.lastError).toMatch(/time(d)? ?out/i);
    expect(typeof delivery?.nextAttemptAt).toBe("string");
  });

  it("honours Retry-After on a 503", async () => {
    const receiver = await h.receiver();
    let calls = 0;
    receiver.respond = () => {
      calls += 1;
      return calls === 1 ? { status: 503, headers: { "Retry-After": "2" } } : { status: 200 };
    };
    const ws = await h.workspace();
    const hook = await h.register(ws.testKey, receiver.url, ["payment.forwarded"]);
    // Own schedule says 100 ms; the receiver asks for 2 s.
    h.dispatcher({ retryDelaysMs: [100, 200, 400, 10_000] }).start();

    await h.createPayment(ws.testKey);
    const [first, second] = (await receiver.waitFor(2, undefined, 8_000)) as [
      ReceivedRequest,
      ReceivedRequest,
    ];
    expect(deliveryId(second)).toBe(deliveryId(first));
    const gap = second.receivedAt - first.receivedAt;
    expect(gap).toBeGreaterThanOrEqual(1_500);
    expect(gap).toBeLessThan(5_000);

    const [delivery] = await until("delivered", async () => {
      const log = await h.deliveries(ws.testKey, hook.id);
      return log[0]?.status === "delivered" && log;
    });
    expect(delivery).toMatchObject({ status: "delivered", attempts: 2, lastResponseCode: 200 });
  });

  it("delivers everything once a receiver that was down comes back on the same port", async () => {
    const first = await h.receiver();
    const url = first.url;
    const port = Number(new URL(url).port);
    const ws = await h.workspace();
    const hook = await h.register(ws.testKey, url, ["*"]);
    await first.stop();

    h.dispatcher({ retryDelaysMs: [200, 300, 400, 500, 500, 500, 500, 500, 500, 500] }).start();
    const payments: Json[] = [];
    for (let i = 0; i < 5; i++) payments.push(await h.createPayment(ws.testKey, { amount: `${10 + i}` }));

    // While it is down, attempts fail and the deliveries stay pending.
    await until("failed attempts while the receiver is down", async () => {
      const log = await h.deliveries(ws.testKey, hook.id);
      return log.length === 10 && log.every((d) => (d.attempts as number) >= 1) && log;
    });
    await sleep(300);
    const whileDown = await h.deliveries(ws.testKey, hook.id);
    expect(whileDown.every((d) => d.status === "pending" && d.lastResponseCode === null)).toBe(true);
    expect(
      whileDown.every((d) => typeof d.lastError === "string" && (d.lastError as string).length > 0),
    ).toBe(true);

    const second = await h.receiver(port);
    expect(second.url).toBe(url);
    await until(
      "all 10 deliveries received",
      async () => new Set(second.received.map(deliveryId)).size === 10,
    );

    const byPayment = new Map<string, string[]>();
    for (const r of second.received) {
      const id = (r.json.data as Json).id as string;
      byPayment.set(id, [...(byPayment.get(id) ?? []), r.json.event as string]);
    }
    expect([...byPayment.keys()].sort()).toEqual(payments.map((p) => p.id as string).sort());
    for (const events of byPayment.values()) {
      expect([...new Set(events)].sort()).toEqual(["payment.created", "payment.forwarded"]);
    }
    await until("all delivered in the log", async () => {
      const log = await h.deliveries(ws.testKey, hook.id);
      return log.length === 10 && log.every((d) => d.status === "delivered") && log;
    });
  });

  it("marks a delivery failed after the last attempt and sends nothing more", async () => {
    const receiver = await h.receiver();
    receiver.respond = () => ({ status: 500 });
    const ws = await h.workspace();
    const hook = await h.register(ws.testKey, receiver.url, ["payment.forwarded"]);
    h.dispatcher({ retryDelaysMs: [100, 100] }).start();

    await h.createPayment(ws.testKey);
    const got = await receiver.waitFor(3, undefined, 5_000);
    expect(new Set(got.map(deliveryId)).size).toBe(1);

    const [delivery] = await until("failed in the log", async () => {
      const log = await h.deliveries(ws.testKey, hook.id);
      return log[0]?.status === "failed" && log;
    });
    expect(delivery).toMatchObject({
      status: "failed",
      attempts: 3,
      lastResponseCode: 500,
      nextAttemptAt: null,
    });
    await sleep(800);
    expect(receiver.received).toHaveLength(3);
    expect((await h.deliveries(ws.testKey, hook.id))[0]).toMatchObject({ status: "failed", attempts: 3 });
  });

  it("never sends an event the registration did not subscribe to", async () => {
    const receiver = await h.receiver();
    const ws = await h.workspace();
    const hook = await h.register(ws.testKey, receiver.url, ["payment.forwarded"]);
    const dispatcher = h.dispatcher();
    dispatcher.start();

    const payment = await h.createPayment(ws.testKey);
    await receiver.waitFor(1);
    await sleep(400);
    await dispatcher.drain();
    expect(receiver.received).toHaveLength(1);
    expect(receiver.received[0]?.json.event).toBe("payment.forwarded");
    expect(header(receiver.received[0] as ReceivedRequest, "x-service-event")).toBe("payment.forwarded");
    expect((receiver.received[0]?.json.data as Json | undefined)?.id).toBe(payment.id);

    const log = await h.deliveries(ws.testKey, hook.id);
    expect(log.map((d) => d.event)).toEqual(["payment.forwarded"]);
  });

  it("two dispatchers on one database deliver each of 50 events exactly once", async () => {
    const receiver = await h.receiver();
    receiver.respond = () => ({ status: 200 });
    const ws = await h.workspace();
    const hook = await h.register(ws.testKey, receiver.url, ["*"]);
    await h.record(
      Array.from({ length: 50 }, (_, i) => ({
        workspaceId: ws.id,
        environment: "sandbox" as Environment,
        type: "payment.forwarded",
        payload: { id: `evt-${i}`, n: i },
      })),
    );
    const a = h.dispatcher({ pollIntervalMs: 10, batchSize: 7 });
    const b = h.dispatcher({ pollIntervalMs: 10, batchSize: 7 });
    a.start();
    b.start();

    await until("50 distinct deliveries", async () => new Set(receiver.received.map(deliveryId)).size >= 50);
    await sleep(500);
    await Promise.all([a.drain(), b.drain()]);

    const ids = receiver.received.map(deliveryId);
    expect(ids).toHaveLength(50);
    expect(new Set(ids).size).toBe(50);
    const payloads = receiver.received.map((r) => (r.json.data as Json).id as string);
    expect(new Set(payloads).size).toBe(50);

    const log = await h.deliveries(ws.testKey, hook.id);
    expect(log).toHaveLength(50);
    expect(log.every((d) => d.status === "delivered" && d.attempts === 1)).toBe(true);
  });

  it("sends a delivery claimed by a crashed dispatcher once its lease has expired", async () => {
    const receiver = await h.receiver();
    const ws = await h.workspace();
    const hook = await h.register(ws.testKey, receiver.url, ["payment.forwarded"]);
    await h.createPayment(ws.testKey);

    // A dispatcher claims with a 1 s lease and dies before sending.
    const claimedAt = claimTime().getTime();
    const claimed = await repo.claimDueDeliveries(
      h.t.database.db,
      new Date(claimedAt),
      new Date(claimedAt + 1_000),
      100,
    );
    const mine = claimed.filter((c) => c.endpointId === hook.id);
    expect(mine).toHaveLength(1);

    // A fresh dispatcher does not take it while the lease holds …
    h.dispatcher({ leaseMs: 5_000 }).start();
    await sleep(600);
    expect(receiver.received).toHaveLength(0);

    // … and sends it once the lease has run out.
    const [got] = await receiver.waitFor(1, undefined, 5_000);
    expect(deliveryId(got as ReceivedRequest)).toBe(mine[0]?.id);
    expect((got as ReceivedRequest).receivedAt).toBeGreaterThanOrEqual(claimedAt + 950);
    await until("delivered in the log", async () => {
      const log = await h.deliveries(ws.testKey, hook.id);
      return log[0]?.status === "delivered" && log[0]?.attempts === 1 && log;
    });
    await sleep(300);
    expect(receiver.received).toHaveLength(1);
  });

  it("does not send a delivery whose lease ran out while it waited for a slot to its host", async () => {
    const receiver = await h.receiver();
    const ws = await h.workspace();
    const hook = await h.register(ws.testKey, receiver.url, ["payment.forwarded"]);
    await h.record(forwardedEvents(ws.id, 2));
    // The first request outlasts the claim's lease (the clock jumps past it while it is answered) …
    receiver.respond = () => {
      h.t.setNow(new Date(Date.now() + 120_000));
      return { status: 200 };
    };
    const dispatcher = h.dispatcher({ perHostConcurrency: 1 });
    expect(await dispatcher.runOnce()).toBe(2);
    await dispatcher.drain();

    // … so the second, queued behind it for the same host, is not sent under the lapsed claim.
    expect(receiver.received).toHaveLength(1);
    const log = await h.deliveries(ws.testKey, hook.id);
    const sent = deliveryId(receiver.received[0] as ReceivedRequest);
    expect(log.find((d) => d.id === sent)).toMatchObject({ status: "delivered", attempts: 1 });
    const skipped = log.find((d) => d.id !== sent);
    expect(skipped).toMatchObject({ status: "pending", attempts: 0 });

    // It is due again, and the next claim sends it.
    expect(await dispatcher.runOnce()).toBe(1);
    await dispatcher.drain();
    expect(receiver.received.map(deliveryId)).toEqual([sent, skipped?.id]);
  });

  describe("recording attempts in batches", () => {
    async function claimAll(endpointId: number, leaseMs = 60_000): Promise<repo.ClaimedDelivery[]> {
      const now = claimTime();
      const claimed = await repo.claimDueDeliveries(
        h.t.database.db,
        now,
        new Date(now.getTime() + leaseMs),
        100,
      );
      return claimed.filter((c) => c.endpointId === endpointId).sort((a, b) => a.id.localeCompare(b.id));
    }

    function attempt(
      delivery: repo.ClaimedDelivery,
      at: Date,
      result: Partial<repo.AttemptRecord> = {},
    ): repo.AttemptRecord {
      return {
        deliveryId: delivery.id,
        endpointId: delivery.endpointId,
        lease: delivery.lease,
        at,
        delivered: true,
        responseCode: 200,
        error: null,
        nextAttemptAt: null,
        ...result,
      };
    }

    async function endpointRow(id: number) {
      return h.t.database.db
        .selectFrom("webhook_endpoints")
        .select(["failing_since", "active", "disabled_reason"])
        .where("id", "=", id)
        .executeTakeFirstOrThrow();
    }

    it("records each outcome of a batch only under the lease it was claimed with", async () => {
      const ws = await h.workspace();
      const hook = await h.register(ws.testKey, "http://127.0.0.1:9/hook", ["payment.forwarded"]);
      await h.record(forwardedEvents(ws.id, 3));
      const [a, b, c] = (await claimAll(hook.id)) as [
        repo.ClaimedDelivery,
        repo.ClaimedDelivery,
        repo.ClaimedDelivery,
      ];
      const at = new Date();
      const failedAt = new Date(at.getTime() + 1);
      const retryAt = new Date(at.getTime() + 5_000);

      const recorded = await repo.recordAttempts(
        h.t.database.db,
        [
          attempt(a, at),
          // Its error text holds a NUL, which PostgreSQL text cannot: dropped, not failing the batch.
          attempt(b, failedAt, {
            delivered: false,
            responseCode: 500,
            error: "HTTP\u0000 500",
            nextAttemptAt: retryAt,
          }),
          // A lease this dispatcher does not hold (another one's, or a lapsed one): not recorded.
          attempt(c, at, { lease: new Date(c.lease.getTime() - 1) }),
        ],
        DISABLE_AFTER_MS,
      );
      expect(recorded).toEqual(new Set([a.id, b.id]));

      const log = new Map((await h.deliveries(ws.testKey, hook.id)).map((d) => [d.id, d]));
      expect(log.get(a.id)).toMatchObject({
        status: "delivered",
        attempts: 1,
        lastResponseCode: 200,
        deliveredAt: at.toISOString(),
      });
      expect(log.get(b.id)).toMatchObject({
        status: "pending",
        attempts: 1,
        lastResponseCode: 500,
        lastError: "HTTP 500",
        nextAttemptAt: retryAt.toISOString(),
      });
      expect(log.get(c.id)).toMatchObject({ status: "pending", attempts: 0, lastResponseCode: null });
      // The failure ended after the success: the registration has been failing since then.
      expect(await endpointRow(hook.id)).toEqual({
        failing_since: failedAt,
        active: true,
        disabled_reason: null,
      });

      // The claimer that holds c's lease still records it.
      expect(await repo.recordAttempts(h.t.database.db, [attempt(c, at)], DISABLE_AFTER_MS)).toEqual(
        new Set([c.id]),
      );
      expect(await endpointRow(hook.id)).toMatchObject({ failing_since: null, active: true });
    });

    it("records nothing of a batch that cannot be written; its deliveries are due again once the lease runs out", async () => {
      const ws = await h.workspace();
      const hook = await h.register(ws.testKey, "http://127.0.0.1:9/hook", ["payment.forwarded"]);
      await h.record(forwardedEvents(ws.id, 2));
      const [a, b] = (await claimAll(hook.id, 1_000)) as [repo.ClaimedDelivery, repo.ClaimedDelivery];
      const at = new Date();

      await expect(
        repo.recordAttempts(
          h.t.database.db,
          [attempt(a, at), attempt(b, at), attempt({ ...a, id: "not-a-uuid" }, at)],
          DISABLE_AFTER_MS,
        ),
      ).rejects.toThrow();
      const log = await h.deliveries(ws.testKey, hook.id);
      expect(log.map((d) => [d.status, d.attempts])).toEqual([
        ["pending", 0],
        ["pending", 0],
      ]);

      expect(await claimAll(hook.id)).toHaveLength(0);
      await sleep(a.lease.getTime() - Date.now() + 50);
      expect((await claimAll(hook.id)).map((d) => d.id)).toEqual([a.id, b.id]);
    });

    it("deactivates a registration failing for too long and stops what it still has queued", async () => {
      const ws = await h.workspace();
      const hook = await h.register(ws.testKey, "http://127.0.0.1:9/hook", ["payment.forwarded"]);
      await h.t.database.db
        .updateTable("webhook_endpoints")
        .set({ failing_since: new Date(Date.now() - 6 * DAY) })
        .where("id", "=", hook.id)
        .execute();
      await h.record(forwardedEvents(ws.id, 2));
      const [a] = (await claimAll(hook.id)) as [repo.ClaimedDelivery];
      const at = new Date();

      await repo.recordAttempts(
        h.t.database.db,
        [attempt(a, at, { delivered: false, responseCode: 500, error: "HTTP 500", nextAttemptAt: at })],
        DISABLE_AFTER_MS,
      );
      expect(await endpointRow(hook.id)).toMatchObject({
        active: false,
        disabled_reason: "failing continuously for 5 days",
      });
      const log = await h.deliveries(ws.testKey, hook.id);
      expect(log.map((d) => [d.status, d.lastError])).toEqual([
        ["failed", "registration deactivated"],
        ["failed", "registration deactivated"],
      ]);
    });
  });

  it("resends a delivered delivery on request, with the same delivery id", async () => {
    const receiver = await h.receiver();
    const ws = await h.workspace();
    const other = await h.workspace();
    const hook = await h.register(ws.testKey, receiver.url, ["payment.forwarded"]);
    h.dispatcher().start();

    await h.createPayment(ws.testKey);
    const [first] = (await receiver.waitFor(1)) as [ReceivedRequest];
    const [delivered] = await until("delivered", async () => {
      const log = await h.deliveries(ws.testKey, hook.id);
      return log[0]?.status === "delivered" && log;
    });
    expect(delivered?.id).toBe(deliveryId(first));

    // Not found for another workspace, an unknown delivery, or a malformed id.
    const url = (wh: number | string, d: string) => `/api/v1/webhooks/${wh}/deliveries/${d}/retry`;
    for (const [key, path] of [
      [other.testKey, url(hook.id, deliveryId(first))],
      [ws.liveKey, url(hook.id, deliveryId(first))],
      [ws.testKey, url(hook.id, "00000000-0000-4000-8000-000000000000")],
      [ws.testKey, url(hook.id, "not-a-uuid")],
    ] as const) {
      const res = await h.t.request({ method: "POST", url: path, headers: bearer(key) });
      expect(res.statusCode, path).toBe(404);
    }
    expect(receiver.received).toHaveLength(1);

    const res = await h.t.request({
      method: "POST",
      url: url(hook.id, deliveryId(first)),
      headers: bearer(ws.testKey),
    });
    expect(res.statusCode).toBe(202);
    expect(res.json().delivery.id).toBe(deliveryId(first));

    const [, again] = (await receiver.waitFor(2)) as [ReceivedRequest, ReceivedRequest];
    expect(deliveryId(again)).toBe(deliveryId(first));
    expect(again.rawBody).toBe(first.rawBody);
    const [after] = await until("delivered again", async () => {
      const log = await h.deliveries(ws.testKey, hook.id);
      return log[0]?.status === "delivered" && log[0]?.attempts === 2 && log;
    });
    expect(after).toMatchObject({ id: deliveryId(first), lastResponseCode: 200 });
  });

  it("deactivates a registration that has been failing for more than 5 days", async () => {
    const receiver = await h.receiver();
    receiver.respond = () => ({ status: 500 });
    const ws = await h.workspace();
    const old = await h.register(ws.testKey, receiver.url, ["payment.forwarded"]);
    const recent = await h.register(ws.testKey, receiver.url, ["payment.forwarded"]);
    const now = Date.now();
    await h.t.database.db
      .updateTable("webhook_endpoints")
      .set({ failing_since: new Date(now - 6 * DAY) })
      .where("id", "=", old.id)
      .execute();
    await h.t.database.db
      .updateTable("webhook_endpoints")
      .set({ failing_since: new Date(now - 4 * DAY) })
      .where("id", "=", recent.id)
      .execute();
    h.dispatcher({ retryDelaysMs: [60_000] }).start();

    await h.createPayment(ws.testKey);
    await receiver.waitFor(2);
    await until("both attempts recorded", async () => {
      const a = await h.deliveries(ws.testKey, old.id);
      const b = await h.deliveries(ws.testKey, recent.id);
      return a[0]?.attempts === 1 && b[0]?.attempts === 1;
    });

    const listed = await h.webhooks(ws.testKey);
    expect(listed.find((w) => w.id === old.id)?.active).toBe(false);
    expect(listed.find((w) => w.id === recent.id)?.active).toBe(true);
  });

  it("sends nothing more to a deactivated registration", async () => {
    const receiver = await h.receiver();
    receiver.respond = () => ({ status: 500 });
    const ws = await h.workspace();
    const hook = await h.register(ws.testKey, receiver.url, ["payment.forwarded"]);
    await h.t.database.db
      .updateTable("webhook_endpoints")
      .set({ failing_since: new Date(Date.now() - 6 * DAY) })
      .where("id", "=", hook.id)
      .execute();
    h.dispatcher({ retryDelaysMs: [200, 200, 200, 200, 200] }).start();

    await h.createPayment(ws.testKey);
    await receiver.waitFor(1);
    await until("deactivated", async () => {
      const listed = await h.webhooks(ws.testKey);
      return listed.find((w) => w.id === hook.id)?.active === false;
    });
    // "active: whether delivery is on": neither the queued retries nor new events go out.
    await h.createPayment(ws.testKey);
    await sleep(1_500);
    const queued = await h.deliveries(ws.testKey, hook.id);
    expect(queued, "a new event was queued for a deactivated registration").toHaveLength(1);
    expect(
      receiver.received.map(deliveryId),
      "retries were still sent to a deactivated registration",
    ).toHaveLength(1);
  });
});

describe("deliveries reach public addresses only, in both environments (D7, D21; checked when the name resolves)", () => {
  // WEBHOOK_ALLOW_PRIVATE unset, as an operator runs the service. The dispatcher is handed a
  // resolver that maps made-up names to loopback, private and link-local addresses. The safety net
  // makes sure nothing of it leaves the machine whatever the code does: a connection anywhere but
  // loopback, or a name sent to a DNS server, fails and is recorded.
  const h = harness({ WEBHOOK_ALLOW_PRIVATE: "false" });
  let outside: LoopbackOnly;
  beforeAll(() => {
    outside = installLoopbackOnly();
  });
  afterAll(() => outside.uninstall());

  const ANSWERS: Record<string, string[]> = {
    "receiver.test": ["127.0.0.1"],
    "metadata.test": ["169.254.169.254"],
    "intranet.test": ["10.0.0.5"],
    "mapped.test": ["::ffff:10.0.0.5"],
    "compat.test": ["::a9fe:a9fe"],
    "ula.test": ["fd00::5"],
    "mixed.test": ["127.0.0.1", "10.0.0.5"],
  };

  function testResolver(): Resolver & { asked: string[] } {
    const asked: string[] = [];
    const resolve = async (hostname: string) => {
      asked.push(hostname);
      const found = ANSWERS[hostname];
      if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
      return found.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
    };
    return Object.assign(resolve, { asked });
  }

  /**
   * Points a registration of `environment` at `url` (written directly, as a row from before the
   * rule would be) and sends it one event; answers its delivery after the first attempt.
   */
  async function deliverTo(environment: Environment, url: string, resolve: Resolver): Promise<Json> {
    const ws = await h.workspace();
    const key = environment === "live" ? ws.liveKey : ws.testKey;
    const hook = await h.register(key, "https://example.com/placeholder", ["*"]);
    await h.t.database.db.updateTable("webhook_endpoints").set({ url }).where("id", "=", hook.id).execute();
    h.dispatcher({ retryDelaysMs: [60_000], resolve }).start();
    await h.record([{ workspaceId: ws.id, environment, type: "payment.forwarded", payload: { id: "p" } }]);
    const [delivery] = await until(`an attempt to ${url}`, async () => {
      const log = await h.deliveries(key, hook.id);
      return (log[0]?.attempts as number) >= 1 && log;
    });
    return delivery as Json;
  }

  const NAMES = [
    ["receiver.test", "127.0.0.1"],
    ["metadata.test", "169.254.169.254"],
    ["intranet.test", "10.0.0.5"],
    ["mapped.test", "10.0.0.5"],
    ["compat.test", "::a9fe:a9fe"],
    ["ula.test", "fd00::5"],
    ["mixed.test", "10.0.0.5"],
  ] as const;

  it.each(
    (["sandbox", "live"] as const).flatMap((environment) =>
      NAMES.map(([name, address]) => [environment, name, address] as const),
    ),
  )(
    "%s: refuses %s (→ %s) after resolving it and before connecting, naming no address",
    async (environment, name, address) => {
      const receiver = await h.receiver();
      const port = new URL(receiver.url).port;
      const resolve = testResolver();
      const delivery = await deliverTo(environment, `http://${name}:${port}/latest/meta-data`, resolve);
      expect(delivery.status).not.toBe("delivered");
      expect(delivery.lastResponseCode).toBeNull();
      expect(delivery.lastError).toBe("blocked destination");
      expect(JSON.stringify(delivery)).not.toContain(address);
      expect(resolve.asked).toContain(name);
      expect(outside.refused, "a connection was attempted").toEqual([]);
      expect(receiver.received).toHaveLength(0);
    },
  );

  it.each(
    (["sandbox", "live"] as const).flatMap((environment) =>
      [
        "http://127.0.0.1:{port}/hook",
        "https://127.0.0.1:{port}/hook",
        "http://localhost:{port}/hook",
        "http://[::ffff:127.0.0.1]:{port}/hook",
        "http://10.0.0.5:{port}/hook",
        "http://169.254.169.254:{port}/latest/meta-data",
        "http://[::a9fe:a9fe]:{port}/hook",
        "http://[fd00::1]:{port}/hook",
        "http://100.64.0.1:{port}/hook",
      ].map((template) => [environment, template] as const),
    ),
  )("%s: refuses the literal %s without connecting", async (environment, template) => {
    const receiver = await h.receiver();
    const url = template.replace("{port}", new URL(receiver.url).port);
    const resolve = testResolver();
    const delivery = await deliverTo(environment, url, resolve);
    expect(delivery.status).not.toBe("delivered");
    expect(delivery.lastResponseCode).toBeNull();
    expect(delivery.lastError).toBe("blocked destination");
    expect(resolve.asked).toEqual([]);
    expect(outside.refused, "a connection was attempted").toEqual([]);
    expect(receiver.received).toHaveLength(0);
  });
});

describe("WEBHOOK_ALLOW_PRIVATE=true lets deliveries reach loopback (the suites' receivers, a local devnet)", () => {
  const h = harness({ WEBHOOK_ALLOW_PRIVATE: "true" });
  let outside: LoopbackOnly;
  beforeAll(() => {
    outside = installLoopbackOnly();
  });
  afterAll(() => outside.uninstall());

  it("delivers to a name that the injected resolver maps to loopback, in both environments", async () => {
    const receiver = await h.receiver();
    const port = new URL(receiver.url).port;
    const asked: string[] = [];
    const resolve: Resolver = async (hostname) => {
      asked.push(hostname);
      return [{ address: "127.0.0.1", family: 4 }];
    };
    const ws = await h.workspace();
    const hooks = [
      await h.register(ws.testKey, `http://receiver.test:${port}/hook`, ["payment.forwarded"]),
      await h.register(ws.liveKey, `http://receiver.test:${port}/hook`, ["payment.forwarded"]),
    ];
    h.dispatcher({ resolve }).start();
    await h.record(
      (["sandbox", "live"] as const).map((environment) => ({
        workspaceId: ws.id,
        environment,
        type: "payment.forwarded",
        payload: { id: environment },
      })),
    );
    await receiver.waitFor(2);
    for (const [key, hook] of [
      [ws.testKey, hooks[0]],
      [ws.liveKey, hooks[1]],
    ] as const) {
      const [delivery] = await until("delivered", async () => {
        const log = await h.deliveries(key, hook?.id as number);
        return log[0]?.status === "delivered" && log;
      });
      expect(delivery?.status).toBe("delivered");
    }
    expect(asked).toContain("receiver.test");
    expect(outside.refused).toEqual([]);
  });
});

describe("webhook delivery per environment and workspace", () => {
  // Plain-http loopback receivers in live need the development escape hatch.
  const h = harness({ WEBHOOK_ALLOW_PRIVATE: "true" });

  it("never sends live events to a sandbox registration, nor sandbox events to a live one", async () => {
    const sandboxReceiver = await h.receiver();
    const liveReceiver = await h.receiver();
    const otherReceiver = await h.receiver();
    const ws = await h.workspace();
    const other = await h.workspace();
    const sandboxHook = await h.register(ws.testKey, sandboxReceiver.url, ["*"]);
    const liveHook = await h.register(ws.liveKey, liveReceiver.url, ["*"]);
    await h.register(other.testKey, otherReceiver.url, ["*"]);
    await h.register(other.liveKey, otherReceiver.url, ["*"]);
    const dispatcher = h.dispatcher();
    dispatcher.start();

    const payment = await h.createPayment(ws.testKey);
    await h.record([
      {
        workspaceId: ws.id,
        environment: "live",
        type: "payment.forwarded",
        payload: { id: "live-only-payment", environment: "live", status: "forwarded" },
      },
    ]);

    await sandboxReceiver.waitFor(2);
    await liveReceiver.waitFor(1);
    await sleep(400);
    await dispatcher.drain();

    expect(sandboxReceiver.received).toHaveLength(2);
    for (const r of sandboxReceiver.received) {
      expect((r.json.data as Json).id).toBe(payment.id);
      expect((r.json.data as Json).environment).toBe("sandbox");
    }
    expect(liveReceiver.received).toHaveLength(1);
    expect(liveReceiver.received[0]?.json).toEqual({
      event: "payment.forwarded",
      data: { id: "live-only-payment", environment: "live", status: "forwarded" },
    });
    // Another workspace's registrations get neither.
    expect(otherReceiver.received).toHaveLength(0);

    // Each delivery log shows only its own environment's deliveries, and only to its own key.
    expect((await h.deliveries(ws.testKey, sandboxHook.id)).map((d) => d.event).sort()).toEqual([
      "payment.created",
      "payment.forwarded",
    ]);
    expect((await h.deliveries(ws.liveKey, liveHook.id)).map((d) => d.event)).toEqual(["payment.forwarded"]);
    for (const [key, id] of [
      [ws.liveKey, sandboxHook.id],
      [ws.testKey, liveHook.id],
      [other.testKey, sandboxHook.id],
    ] as const) {
      const res = await h.t.request({
        method: "GET",
        url: `/api/v1/webhooks/${id}/deliveries`,
        headers: bearer(key),
      });
      expect(res.statusCode).toBe(404);
    }
  });
});
