// What the webhook delivery suites (test/webhooks/delivery*.test.ts) share: the harness (an app, a
// receiver, a dispatcher per test) and the checks of what a receiver got.

import { createHmac, timingSafeEqual } from "node:crypto";
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import type { Environment } from "../../src/config.ts";
import { type DispatcherOptions, WebhookDispatcher } from "../../src/modules/webhooks/dispatcher.ts";
import { type OutboxEvent, recordEvents } from "../../src/modules/webhooks/outbox.ts";
import { bearer, type CreatedWorkspace, createWorkspace, startTestApp, type TestApp } from "./app.ts";
import { untilDefined } from "./poll.ts";
import { type ReceivedRequest, WebhookReceiver } from "./receiver.ts";

// Integration tests of outbound webhook delivery (interface part 6; decisions D7, D13): a real
// dispatcher sends to a real HTTP receiver, against the real app on a real database.

export type Json = Record<string, unknown>;

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const RATE_LIMITS = { RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" };
export const DAY = 24 * 60 * 60 * 1000;

/** Polls (bounded, support/poll.ts) until `probe` gives a truthy value, and gives it. */
export const until = <T>(
  what: string,
  probe: () => Promise<T | undefined | null | false>,
  timeoutMs = 10_000,
) => untilDefined(what, async () => (await probe()) || undefined, timeoutMs);

export function hmacHex(secret: string, data: string): Buffer {
  return createHmac("sha256", Buffer.from(secret, "utf8")).update(Buffer.from(data, "utf8")).digest();
}

/** What a merchant's receiver does: constant-time comparison of the hex digest. */
export function verifies(secret: string, rawBody: string, header: unknown): boolean {
  if (typeof header !== "string" || !/^[0-9a-f]{64}$/.test(header)) return false;
  const expected = hmacHex(secret, rawBody);
  const given = Buffer.from(header, "hex");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

export function header(r: ReceivedRequest, name: string): string {
  const value = r.headers[name];
  if (typeof value !== "string") throw new Error(`header ${name} missing or repeated`);
  return value;
}

export const deliveryId = (r: ReceivedRequest) => header(r, "x-service-delivery");

export function forwardedEvents(workspaceId: string, count: number): OutboxEvent[] {
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
export function claimTime(): Date {
  return new Date(Date.now() + 1);
}

/** Everything one test app needs; each describe block owns one. */
export function harness(env: Record<string, string> = {}) {
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
