import type { InjectOptions } from "fastify";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { WebhookDispatcher } from "../../src/modules/webhooks/dispatcher.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { WebhookReceiver } from "../support/receiver.ts";

// Integration tests of webhook registration (interface parts 4.6–4.8, 6 and 7; decisions D3, D7,
// D13) against the real app on a real database.

type Json = Record<string, unknown>;

const ALL_EVENT_KINDS = [
  "payment.created",
  "payment.detected",
  "payment.confirmed",
  "payment.forwarded",
  "payment.failed",
  "payment.expired",
  "payment.cancelled",
  "settlement.recorded",
  "split.recorded",
  "payout.completed",
  "payout.failed",
  "agent.created",
  "agent.updated",
  "agent.deleted",
  "wallet.created",
  "wallet.balance.updated",
  "wallet.currency.added",
  "agent.payment.authorized",
  "agent.payment.approval_required",
  "agent.payment.settled",
  "agent.payment.expired",
] as const;

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const RATE_LIMITS = { RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" };

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp(RATE_LIMITS);
});
afterAll(async () => t.close());

function register(app: TestApp, key: string, payload: unknown) {
  return app.request({
    method: "POST",
    url: "/api/v1/webhooks",
    headers: bearer(key),
    payload: payload as InjectOptions["payload"],
  });
}

async function listWebhooks(app: TestApp, key: string): Promise<Json[]> {
  const res = await app.request({ method: "GET", url: "/api/v1/webhooks", headers: bearer(key) });
  expect(res.statusCode).toBe(200);
  return res.json().webhooks as Json[];
}

function remove(app: TestApp, key: string, id: string | number) {
  return app.request({ method: "DELETE", url: `/api/v1/webhooks/${id}`, headers: bearer(key) });
}

describe("POST /api/v1/webhooks", () => {
  let ws: CreatedWorkspace;
  beforeAll(async () => {
    ws = await createWorkspace(t);
  });

  it("answers 201 with {webhook: {id, url, events, active, created_at, signingSecret}}", async () => {
    const before = Date.now();
    const res = await register(t, ws.testKey, {
      url: "https://example.com/hooks/payments",
      events: ["payment.forwarded", "payment.created"],
    });
    expect(res.statusCode).toBe(201);
    expect(res.headers["content-type"]).toMatch(/^application\/json/);
    const body = res.json();
    expect(Object.keys(body)).toEqual(["webhook"]);
    const webhook = body.webhook as Json;
    expect(Object.keys(webhook).sort()).toEqual(
      ["active", "created_at", "events", "id", "signingSecret", "url"].sort(),
    );
    expect(Number.isInteger(webhook.id)).toBe(true);
    expect(webhook.id as number).toBeGreaterThan(0);
    expect(webhook.url).toBe("https://example.com/hooks/payments");
    expect([...(webhook.events as string[])].sort()).toEqual(["payment.created", "payment.forwarded"]);
    expect(webhook.active).toBe(true);
    expect(webhook.created_at).toMatch(ISO);
    const createdAt = Date.parse(webhook.created_at as string);
    expect(createdAt).toBeGreaterThanOrEqual(before - 5_000);
    expect(createdAt).toBeLessThanOrEqual(Date.now() + 5_000);
    expect(typeof webhook.signingSecret).toBe("string");
    expect((webhook.signingSecret as string).length).toBeGreaterThanOrEqual(24);
  });

  it("gives every registration its own id and its own signing secret", async () => {
    const a = await register(t, ws.testKey, { url: "https://example.com/a", events: ["*"] });
    const b = await register(t, ws.testKey, { url: "https://example.com/b", events: ["*"] });
    expect(a.statusCode).toBe(201);
    expect(b.statusCode).toBe(201);
    expect(a.json().webhook.id).not.toBe(b.json().webhook.id);
    expect(a.json().webhook.signingSecret).not.toBe(b.json().webhook.signingSecret);
  });

  it("lists registrations without the signing secret", async () => {
    const other = await createWorkspace(t);
    const created = (
      await register(t, other.testKey, { url: "https://example.com/list", events: ["payment.forwarded"] })
    ).json().webhook as Json;
    const webhooks = await listWebhooks(t, other.testKey);
    expect(webhooks).toHaveLength(1);
    const listed = webhooks[0] as Json;
    expect(Object.keys(listed).sort()).toEqual(["active", "created_at", "events", "id", "url"]);
    expect(listed).not.toHaveProperty("signingSecret");
    expect(listed).toEqual({
      id: created.id,
      url: "https://example.com/list",
      events: ["payment.forwarded"],
      active: true,
      created_at: created.created_at,
    });
    const raw = JSON.stringify(webhooks);
    expect(raw).not.toContain(created.signingSecret as string);
  });

  it("stores the signing secret encrypted (v1: prefix, never the plain secret)", async () => {
    const created = (await register(t, ws.testKey, { url: "https://example.com/enc", events: ["*"] })).json()
      .webhook as Json;
    const secret = created.signingSecret as string;
    const row = await t.database.db
      .selectFrom("webhook_endpoints")
      .select(["encrypted_secret"])
      .where("id", "=", created.id as number)
      .executeTakeFirstOrThrow();
    expect(row.encrypted_secret.startsWith("v1:")).toBe(true);
    expect(row.encrypted_secret).not.toContain(secret);
    // Not a trivial encoding of the secret either.
    expect(row.encrypted_secret).not.toContain(Buffer.from(secret, "utf8").toString("base64"));
    expect(row.encrypted_secret).not.toContain(Buffer.from(secret, "utf8").toString("hex"));
  });

  it.each([
    ["not a URL", { url: "not a url", events: ["*"] }],
    ["a relative path", { url: "/hooks", events: ["*"] }],
    ["an ftp:// URL", { url: "ftp://example.com/hook", events: ["*"] }],
    ["a javascript: URL", { url: "javascript:alert(1)", events: ["*"] }],
    ["a number", { url: 42, events: ["*"] }],
    ["an empty string", { url: "", events: ["*"] }],
    ["missing", { events: ["*"] }],
  ])("answers 400 Invalid webhook URL when the url is %s", async (_label, payload) => {
    const res = await register(t, ws.testKey, payload);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: "Invalid webhook URL" });
  });

  it.each([
    ["an unknown kind", ["payment.unknown"]],
    ["a wrong case", ["PAYMENT.CREATED"]],
    ["one bad among good ones", ["payment.created", "payment.exploded"]],
    ["a non-string", [42]],
    ["a wildcard prefix", ["payment.*"]],
  ])("answers 400 Invalid event type for %s", async (_label, events) => {
    const res = await register(t, ws.testKey, { url: "https://example.com/hook", events });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: "Invalid event type" });
  });

  it("rejects an empty, missing or non-array events with 400", async () => {
    for (const payload of [
      { url: "https://example.com/hook", events: [] },
      { url: "https://example.com/hook" },
      { url: "https://example.com/hook", events: "payment.created" },
    ]) {
      const res = await register(t, ws.testKey, payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(typeof res.json().error).toBe("string");
    }
    // Nothing was registered by any of the refused requests.
    const listed = await listWebhooks(t, ws.testKey);
    expect(listed.some((w) => (w.events as string[]).length === 0)).toBe(false);
  });

  it.each([...ALL_EVENT_KINDS, "*"])("accepts the event kind %s", async (kind) => {
    const res = await register(t, ws.testKey, { url: "https://example.com/kinds", events: [kind] });
    expect(res.statusCode).toBe(201);
    expect(res.json().webhook.events).toEqual([kind]);
  });

  it("accepts every event kind of part 6 and * in one registration", async () => {
    const events = [...ALL_EVENT_KINDS, "*"];
    const res = await register(t, ws.testKey, { url: "https://example.com/all", events });
    expect(res.statusCode).toBe(201);
    expect([...(res.json().webhook.events as string[])].sort()).toEqual([...events].sort());
  });
});

describe("destination rules (D7, D21): public addresses only in both environments", () => {
  // The operator's default: WEBHOOK_ALLOW_PRIVATE unset (the shared test app sets it).
  let strict: TestApp;
  let ws: CreatedWorkspace;
  beforeAll(async () => {
    strict = await startTestApp({ ...RATE_LIMITS, WEBHOOK_ALLOW_PRIVATE: "false" });
    ws = await createWorkspace(strict);
  });
  afterAll(async () => strict.close());

  const BLOCKED = {
    error: "Webhook URL is a blocked destination (a private, loopback or link-local address)",
  };

  it("refuses a plain http URL in live", async () => {
    const res = await register(strict, ws.liveKey, { url: "http://example.com/hook", events: ["*"] });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: "Webhook URL must use https in live" });
  });

  it.each([
    "https://127.0.0.1/hook",
    "https://127.0.0.1:8443/hook",
    "https://10.0.0.1/hook",
    "https://[::1]/hook",
    "https://169.254.169.254/latest/meta-data",
    "https://192.168.1.10/hook",
    "https://172.16.0.1/hook",
    "https://100.64.0.1/hook",
    "https://0.0.0.0/hook",
    "https://2130706433/hook",
    "https://[::ffff:127.0.0.1]/hook",
    "https://[fe80::1]/hook",
    "https://[fd00::1]/hook",
    "https://localhost/hook",
    "https://[::a9fe:a9fe]/hook", // IPv4-compatible IPv6 of the metadata address
  ])("refuses %s in live as a blocked destination", async (url) => {
    const res = await register(strict, ws.liveKey, { url, events: ["*"] });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual(BLOCKED);
  });

  it("accepts a public https URL in live", async () => {
    const res = await register(strict, ws.liveKey, { url: "https://example.com/hook", events: ["*"] });
    expect(res.statusCode).toBe(201);
    expect(res.json().webhook.url).toBe("https://example.com/hook");
    const live = await listWebhooks(strict, ws.liveKey);
    expect(live.map((w) => w.id)).toContain(res.json().webhook.id);
  });

  it("accepts plain http to a public name in sandbox", async () => {
    const res = await register(strict, ws.testKey, { url: "http://example.com/hook", events: ["*"] });
    expect(res.statusCode, res.body).toBe(201);
  });

  it.each([
    "http://127.0.0.1:9/hook",
    "http://127.5.5.5:9/hook",
    "http://[::1]:9/hook",
    "http://localhost:9/hook",
    "http://api.localhost:9/hook",
    "http://10.0.0.5/hook",
    "http://192.168.1.10/hook",
    "http://172.16.0.1/hook",
    "http://169.254.169.254/latest/meta-data",
    "http://2852039166/latest/meta-data", // 169.254.169.254 in decimal
    "http://100.64.0.1/hook",
    "http://0.0.0.0:9/hook",
    "http://[fd00::1]/hook",
    "http://[fe80::1]/hook",
    "http://[::ffff:10.0.0.5]/hook",
    "http://[::a9fe:a9fe]/hook", // IPv4-compatible IPv6 of the metadata address
    "https://[64:ff9b::a9fe:a9fe]/hook", // NAT64
  ])("refuses %s in sandbox too (loopback included)", async (url) => {
    const res = await register(strict, ws.testKey, { url, events: ["*"] });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual(BLOCKED);
    expect(res.body).not.toMatch(/resolves to/);
  });

  it("accepts names in sandbox (a name is checked when it resolves, at delivery)", async () => {
    const res = await register(strict, ws.testKey, { url: "http://intranet.test/hook", events: ["*"] });
    expect(res.statusCode, res.body).toBe(201);
    // Nothing is ever sent there: a dispatcher later in this file must not find it.
    expect((await remove(strict, ws.testKey, res.json().webhook.id)).statusCode).toBe(200);
  });

  it("accepts plain http loopback in live when WEBHOOK_ALLOW_PRIVATE=true", async () => {
    const dev = await startTestApp({ ...RATE_LIMITS, WEBHOOK_ALLOW_PRIVATE: "true" });
    try {
      const devWs = await createWorkspace(dev);
      const res = await register(dev, devWs.liveKey, { url: "http://127.0.0.1:9/hook", events: ["*"] });
      expect(res.statusCode).toBe(201);
      expect(res.json().webhook.url).toBe("http://127.0.0.1:9/hook");
      // The operator's escape hatch lifts the address rules of both environments (D7).
      for (const key of [devWs.liveKey, devWs.testKey]) {
        const lan = await register(dev, key, { url: "http://10.0.0.5:9/hook", events: ["*"] });
        expect(lan.statusCode, lan.body).toBe(201);
      }
      // Still an http(s) URL: the escape hatch is not a free-for-all.
      const ftp = await register(dev, devWs.liveKey, { url: "ftp://127.0.0.1/hook", events: ["*"] });
      expect(ftp.statusCode).toBe(400);
      expect(ftp.json()).toEqual({ error: "Invalid webhook URL" });
    } finally {
      await dev.close();
    }
  });
});

describe("registrations belong to one workspace and one environment", () => {
  let a: CreatedWorkspace;
  let b: CreatedWorkspace;
  let sandboxId: number;
  beforeAll(async () => {
    a = await createWorkspace(t);
    b = await createWorkspace(t);
    const res = await register(t, a.testKey, { url: "https://example.com/a-sandbox", events: ["*"] });
    expect(res.statusCode).toBe(201);
    sandboxId = res.json().webhook.id;
  });

  it("shows a sandbox registration only in its own workspace's sandbox list", async () => {
    expect((await listWebhooks(t, a.testKey)).map((w) => w.id)).toEqual([sandboxId]);
    expect(await listWebhooks(t, a.liveKey)).toEqual([]);
    expect(await listWebhooks(t, b.testKey)).toEqual([]);
    expect(await listWebhooks(t, b.liveKey)).toEqual([]);
  });

  it("answers 404 to DELETE of another workspace's registration, and keeps it", async () => {
    const res = await remove(t, b.testKey, sandboxId);
    expect(res.statusCode).toBe(404);
    expect(typeof res.json().error).toBe("string");
    expect((await listWebhooks(t, a.testKey)).map((w) => w.id)).toEqual([sandboxId]);
  });

  it("answers 404 to DELETE of a sandbox registration with the live key", async () => {
    const res = await remove(t, a.liveKey, sandboxId);
    expect(res.statusCode).toBe(404);
    expect((await listWebhooks(t, a.testKey)).map((w) => w.id)).toEqual([sandboxId]);
  });

  it.each([
    "abc",
    "1.5",
    "-1",
    "0x1",
    "99999999999999999999",
    "1%20OR%201=1",
    "00000000-0000-0000-0000-000000000000",
  ])("answers 404 to DELETE with the malformed id %s", async (id) => {
    const res = await remove(t, a.testKey, id);
    expect(res.statusCode).toBe(404);
    expect(typeof res.json().error).toBe("string");
  });

  it("answers 404 to DELETE of an id that does not exist", async () => {
    const res = await remove(t, a.testKey, 987654);
    expect(res.statusCode).toBe(404);
  });
});

describe("DELETE /api/v1/webhooks/{id}", () => {
  let receiver: WebhookReceiver | undefined;
  let dispatcher: WebhookDispatcher | undefined;
  afterEach(async () => {
    await dispatcher?.stop();
    dispatcher = undefined;
    await receiver?.stop();
    receiver = undefined;
  });

  it("answers {success: true}, removes it from the list, and a second DELETE is 404", async () => {
    const ws = await createWorkspace(t);
    const keep = (await register(t, ws.testKey, { url: "https://example.com/keep", events: ["*"] })).json()
      .webhook.id as number;
    const gone = (await register(t, ws.testKey, { url: "https://example.com/gone", events: ["*"] })).json()
      .webhook.id as number;
    const res = await remove(t, ws.testKey, gone);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ success: true });
    expect((await listWebhooks(t, ws.testKey)).map((w) => w.id)).toEqual([keep]);
    expect((await remove(t, ws.testKey, gone)).statusCode).toBe(404);
  });

  it("fails its pending deliveries and never sends them", async () => {
    receiver = new WebhookReceiver();
    await receiver.start();
    const ws = await createWorkspace(t);
    const id = (await register(t, ws.testKey, { url: receiver.url, events: ["*"] })).json().webhook
      .id as number;

    // No dispatcher runs yet: the payment's events wait as pending deliveries.
    const payment = await t.request({
      method: "POST",
      url: "/api/v1/payments",
      headers: bearer(ws.testKey),
      payload: { tokenSymbol: "USDC", amount: "10" },
    });
    expect(payment.statusCode).toBe(201);
    const pendingBefore = await t.database.db
      .selectFrom("webhook_deliveries")
      .select(["id", "status"])
      .where("endpoint_id", "=", id)
      .execute();
    expect(pendingBefore).toHaveLength(2);
    expect(pendingBefore.every((d) => d.status === "pending")).toBe(true);

    const res = await remove(t, ws.testKey, id);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ success: true });

    const after = await t.database.db
      .selectFrom("webhook_deliveries")
      .select(["id", "status"])
      .where("endpoint_id", "=", id)
      .execute();
    expect(after).toHaveLength(2);
    expect(after.every((d) => d.status === "failed")).toBe(true);

    // A new event after the deletion is not queued for it either.
    const later = await t.request({
      method: "POST",
      url: "/api/v1/payments",
      headers: bearer(ws.testKey),
      payload: { tokenSymbol: "USDC", amount: "11" },
    });
    expect(later.statusCode).toBe(201);

    dispatcher = new WebhookDispatcher(t.app.ctx, { pollIntervalMs: 25, retryDelaysMs: [50, 50] });
    // Many passes of the dispatcher, each claiming what is due and sending it: none sends what
    // it must not (the deliveries failed with their endpoint, none retried or queued anew).
    for (let pass = 0; pass < 20; pass++) {
      await dispatcher.runOnce();
      await dispatcher.drain();
    }
    expect(receiver.received).toHaveLength(0);
    const final = await t.database.db
      .selectFrom("webhook_deliveries")
      .select(["id", "status", "attempts"])
      .where("endpoint_id", "=", id)
      .execute();
    expect(final).toHaveLength(2);
    expect(final.every((d) => d.status === "failed" && d.attempts === 0)).toBe(true);
  });
});
