import { timingSafeEqual } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { Environment } from "../../src/config.ts";
import * as claims from "../../src/modules/webhooks/delivery-claims-repo.ts";
import { bearer } from "../support/app.ts";
import { elapse } from "../support/poll.ts";
import type { ReceivedRequest } from "../support/receiver.ts";
import {
  claimTime,
  deliveryId,
  forwardedEvents,
  harness,
  header,
  hmacHex,
  type Json,
  UUID,
  until,
  verifies,
} from "../support/webhook-delivery.ts";

// Delivery itself: signatures, retries, time-outs, leases. Recording, resending, deactivation,
// addresses and environments: delivery-records.test.ts; the harness: support/webhook-delivery.ts.

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
    // A fixed wait on purpose: no third send shows up in 400 ms (nothing to poll for).
    await elapse(400);
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
    // A fixed wait on purpose: more attempts fail meanwhile, and none ends the deliveries
    // (nothing to poll for).
    await elapse(300);
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
    // A fixed wait on purpose: after the last attempt nothing more is sent (nothing to poll for).
    await elapse(800);
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
    // A fixed wait on purpose: time for the unsubscribed event to be sent, were it going to be.
    await elapse(400);
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
    // A fixed wait on purpose: time for a 51st (duplicate) delivery to show, were there one.
    await elapse(500);
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
    const claimed = await claims.claimDueDeliveries(
      h.t.database.db,
      new Date(claimedAt),
      new Date(claimedAt + 1_000),
      100,
    );
    const mine = claimed.filter((c) => c.endpointId === hook.id);
    expect(mine).toHaveLength(1);

    // A fresh dispatcher does not take it while the lease holds …
    h.dispatcher({ leaseMs: 5_000 }).start();
    // A fixed wait on purpose: the lease holds for 600 ms of polls; nothing happening has no
    // event to poll for.
    await elapse(600);
    expect(receiver.received).toHaveLength(0);

    // … and sends it once the lease has run out.
    const [got] = await receiver.waitFor(1, undefined, 5_000);
    expect(deliveryId(got as ReceivedRequest)).toBe(mine[0]?.id);
    expect((got as ReceivedRequest).receivedAt).toBeGreaterThanOrEqual(claimedAt + 950);
    await until("delivered in the log", async () => {
      const log = await h.deliveries(ws.testKey, hook.id);
      return log[0]?.status === "delivered" && log[0]?.attempts === 1 && log;
    });
    // A fixed wait on purpose: time for a second send to show, were there one.
    await elapse(300);
    expect(receiver.received).toHaveLength(1);
  });

  it("claims a host's backlog again as its queue runs low, never waiting for the next poll", async () => {
    const receiver = await h.receiver();
    const ws = await h.workspace();
    const hook = await h.register(ws.testKey, receiver.url, ["payment.forwarded"]);
    await h.record(forwardedEvents(ws.id, 40));
    // Two slots to the host and two deliveries a claim: the backlog takes about twenty claims,
    // each started by the host's queue running low (wakeup.test.ts: a ring during a claim is
    // kept). The next poll is a minute away.
    const startedAt = Date.now();
    h.dispatcher({ pollIntervalMs: 60_000, batchSize: 2, perHostConcurrency: 2 }).start();
    const got = await receiver.waitFor(40, undefined, 15_000);
    expect(new Set(got.map(deliveryId)).size).toBe(40);
    expect(Math.max(...got.map((r) => r.receivedAt)) - startedAt).toBeLessThan(15_000);
    await until("all recorded as delivered", async () => {
      const log = await h.deliveries(ws.testKey, hook.id);
      return log.length === 40 && log.every((d) => d.status === "delivered" && d.attempts === 1);
    });
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
});
