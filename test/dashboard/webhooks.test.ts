import { timingSafeEqual } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { bearer, startTestApp, type TestApp } from "../support/app.ts";
import { formToken } from "../support/dashboard.ts";
import {
  decode,
  deliveryRow,
  hmac,
  type Json,
  verifies,
  WebhookPagesHarness,
} from "../support/webhook-pages.ts";

// The dashboard's webhooks section over HTTP (inject), on PGlite or the PostgreSQL of DATABASE_URL:
// adding a registration (its secret shown once), the form's errors, the delivery log with Resend,
// Send test event (to that registration only, signed like any delivery), delete, tenants and CSRF.
// Deliveries are driven by a real dispatcher, one claim round at a time, to local receivers
// (sandbox registrations may point at loopback).

// whsec_ + padded standard base64 of 32 bytes (D24); pages escape "/" and "=", hence decode().
const SECRET = /whsec_[A-Za-z0-9+/]{43}=/;
let t: TestApp;
let h: WebhookPagesHarness;

beforeAll(async () => {
  t = await startTestApp({ RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" });
  h = new WebhookPagesHarness(t);
});

afterEach(async () => h?.cleanup());

afterAll(async () => {
  await t?.close();
});

describe("adding a webhook", () => {
  it("shows the signing secret once, on the 201 answer only: not on the list nor the webhook's page", async () => {
    const { ws, browser } = await h.signedIn();
    const url = "http://127.0.0.1:9/hook?shop=<b>bold</b>";
    const added = await h.addWebhook(browser, url, ["payment.created", "payment.failed"]);
    expect(added.secret).toMatch(SECRET);
    expect(added.page.headers["content-type"]).toMatch(/^text\/html/);
    expect(added.page.headers["cache-control"]).toBe("no-store");
    expect(added.page.headers.location).toBeUndefined();
    expect(added.page.cookies.some((c) => c.value.includes(added.secret))).toBe(false);
    // A copy button carries it.
    expect(decode(added.page.body)).toContain(`data-copy="${added.secret}"`);

    const listed = await h.apiWebhooks(ws.testKey);
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ id: added.id, url, active: true });
    expect([...((listed[0]?.events as string[] | undefined) ?? [])].sort()).toEqual([
      "payment.created",
      "payment.failed",
    ]);

    const list = await browser.get("/dashboard/sandbox/webhooks");
    expect(list.statusCode).toBe(200);
    expect(list.body).toContain(`data-webhook-id="${added.id}"`);
    // The merchant's URL is text, never markup.
    expect(list.body).not.toContain("<b>bold</b>");
    expect(decode(list.body)).toContain(url);
    const detail = await browser.get(`/dashboard/sandbox/webhooks/${added.id}`);
    expect(detail.statusCode).toBe(200);
    expect(decode(detail.body)).toContain("payment.created, payment.failed");
    for (const page of [list, detail]) {
      expect(decode(page.body)).not.toMatch(SECRET);
      expect(decode(page.body)).not.toContain(added.secret);
    }
    // Another environment's list does not have it.
    expect((await browser.get("/dashboard/live/webhooks")).body).not.toContain(
      `data-webhook-id="${added.id}"`,
    );
  });

  it("answers an invalid URL with 400, the service's message next to the field, and keeps what was typed", async () => {
    const { ws, browser } = await h.signedIn();
    const csrf = await browser.csrf("/dashboard/sandbox/webhooks");
    const typed = "not a url <i>x</i>";
    const res = await h.postForm(browser, "/dashboard/sandbox/webhooks", [
      ["_csrf", csrf],
      ["url", typed],
      ["events", "payment.created"],
      ["events", "*"],
    ]);
    expect(res.statusCode).toBe(400);
    expect(res.body).not.toContain("<i>x</i>");
    const body = decode(res.body);
    const field =
      /<input id="wh-url"[^>]*value="([^"]*)"[^>]*aria-invalid="true"[^>]*>\s*<p class="wh-hint"[^>]*>[^<]*<\/p>\s*<p class="field-error" id="wh-url-error" role="alert">([^<]*)<\/p><\/div>/.exec(
        body,
      );
    expect(field?.[1]).toBe(typed);
    expect(field?.[2]).toBe("Invalid webhook URL");
    expect(body).toMatch(/aria-describedby="wh-url-hint wh-url-error"/);
    // The ticked boxes stay ticked, and only those.
    const checked = [...body.matchAll(/name="events" value="([^"]+)" checked/g)].map((m) => m[1]);
    expect(checked.sort()).toEqual(["*", "payment.created"]);
    expect(await h.apiWebhooks(ws.testKey)).toHaveLength(0);

    // The live page shows the service's refusal too (this app sets WEBHOOK_ALLOW_PRIVATE, which
    // lets plain http through: credentials are refused everywhere); no event ticked is refused
    // next to the events.
    const liveCsrf = await browser.csrf("/dashboard/live/webhooks");
    const live = await h.postForm(browser, "/dashboard/live/webhooks", [
      ["_csrf", liveCsrf],
      ["url", "https://user:pw@hooks.example.com/x"],
      ["events", "*"],
    ]);
    expect(live.statusCode).toBe(400);
    expect(decode(live.body)).toMatch(
      /id="wh-url-error" role="alert">Webhook URL must not contain credentials</,
    );
    const none = await h.postForm(browser, "/dashboard/live/webhooks", [
      ["_csrf", liveCsrf],
      ["url", "https://hooks.example.com/x"],
    ]);
    expect(none.statusCode).toBe(400);
    expect(decode(none.body)).toMatch(
      /<fieldset [^>]*aria-describedby="wh-events-error"[\s\S]*<p class="field-error" id="wh-events-error" role="alert">events must be a non-empty array of event types<\/p>\s*<\/fieldset>/,
    );
    expect(decode(none.body)).toMatch(/id="wh-url"[^>]*value="https:\/\/hooks.example.com\/x"/);
    expect(none.body).not.toContain('id="wh-url-error"');
    expect(await h.apiWebhooks(ws.liveKey)).toHaveLength(0);
  });
});

describe("a webhook's page", () => {
  it("logs a delivery the receiver refused (500); Resend queues it again and the receiver then gets it", async () => {
    const { ws, browser } = await h.signedIn();
    const r = await h.receiver();
    let answers = 0;
    r.respond = () => ({ status: answers++ === 0 ? 500 : 200 });
    const hook = await h.addWebhook(browser, r.url, ["payment.created"]);
    const d = h.dispatcher();

    const payment = await t.request({
      method: "POST",
      url: "/api/v1/payments",
      headers: bearer(ws.testKey),
      payload: { amount: "12.50", tokenSymbol: "USDC", paymentMethod: "crypto" },
    });
    expect(payment.statusCode, payment.body).toBe(201);
    await h.pump(d, "the refused attempt recorded", async () => {
      const log = await h.apiDeliveries(ws.testKey, hook.id);
      return log[0]?.status === "failed";
    });
    expect(r.received).toHaveLength(1);
    const [delivery] = await h.apiDeliveries(ws.testKey, hook.id);
    const deliveryId = String(delivery?.id);

    const path = `/dashboard/sandbox/webhooks/${hook.id}`;
    const before = await browser.get(path);
    expect(before.statusCode).toBe(200);
    const failedRow = deliveryRow(before.body, deliveryId);
    expect(failedRow).toContain('data-status="failed"');
    expect(failedRow).toContain("payment.created");
    expect(failedRow).toContain("HTTP 500");
    expect(failedRow).toMatch(/<td class="num">1<\/td>/);
    expect(failedRow).toContain(`action="${path}/deliveries/${deliveryId}/retry"`);

    const resend = await browser.post(`${path}/deliveries/${deliveryId}/retry`, {
      _csrf: formToken(before.body),
    });
    expect(resend.statusCode, resend.body).toBe(303);
    expect(resend.headers.location).toBe(`${path}?notice=delivery-queued`);
    const after = await browser.get(String(resend.headers.location));
    expect(after.body).toContain("The delivery is queued and will be sent again in a moment.");
    expect(deliveryRow(after.body, deliveryId)).toContain('data-status="pending"');
    expect((await h.apiDeliveries(ws.testKey, hook.id))[0]).toMatchObject({
      id: deliveryId,
      status: "pending",
    });

    await h.pump(d, "the resent delivery", () => r.received.length >= 2);
    expect(r.received[1]?.headers["x-service-delivery"]).toBe(deliveryId);
    expect(r.received[1]?.rawBody).toBe(r.received[0]?.rawBody);
    await h.pump(d, "the delivery recorded", async () => {
      const log = await h.apiDeliveries(ws.testKey, hook.id);
      return log[0]?.status === "delivered";
    });
    const done = deliveryRow((await browser.get(path)).body, deliveryId);
    expect(done).toContain('data-status="delivered"');
    expect(done).toContain("HTTP 200");
    expect(done).toMatch(/<td class="num">2<\/td>/);
  });

  it("sends a signed test event {event: webhook.test, data} to that registration only", async () => {
    const { ws, browser } = await h.signedIn();
    const chosen = await h.receiver();
    const other = await h.receiver();
    // Subscribed to something else entirely: the test event goes to it all the same.
    const hook = await h.addWebhook(browser, chosen.url, ["payment.failed"]);
    const register = await t.request({
      method: "POST",
      url: "/api/v1/webhooks",
      headers: bearer(ws.testKey),
      payload: { url: other.url, events: ["*"] },
    });
    expect(register.statusCode).toBe(201);
    const otherId = register.json().webhook.id as number;

    const path = `/dashboard/sandbox/webhooks/${hook.id}`;
    const sent = await browser.post(`${path}/test`, { _csrf: await browser.csrf(path) });
    expect(sent.statusCode, sent.body).toBe(303);
    expect(sent.headers.location).toBe(`${path}?notice=test-sent`);
    expect((await browser.get(String(sent.headers.location))).body).toContain(
      "A test event is queued for this webhook.",
    );

    const d = h.dispatcher();
    await h.pump(d, "the test event", () => chosen.received.length >= 1);
    await d.runOnce();
    await d.drain();
    expect(chosen.received).toHaveLength(1);
    expect(other.received).toHaveLength(0);
    expect(await h.apiDeliveries(ws.testKey, otherId)).toHaveLength(0);

    const got = chosen.received[0];
    if (!got) throw new Error("nothing received");
    expect(verifies(hook.secret, got.rawBody, got.headers["x-service-signature"])).toBe(true);
    expect(verifies(`${hook.secret}x`, got.rawBody, got.headers["x-service-signature"])).toBe(false);
    const timestamp = String(got.headers["x-service-timestamp"]);
    const v2 = String(got.headers["x-service-signature-v2"]);
    expect(v2).toMatch(/^v1=[0-9a-f]{64}$/);
    expect(
      timingSafeEqual(Buffer.from(v2.slice(3), "hex"), hmac(hook.secret, `${timestamp}.${got.rawBody}`)),
    ).toBe(true);
    expect(got.headers["x-service-event"]).toBe("webhook.test");
    expect(Object.keys(got.json).sort()).toEqual(["data", "event"]);
    expect(got.json.event).toBe("webhook.test");
    const data = got.json.data as Json;
    expect(data).toEqual({
      webhookId: hook.id,
      message: "Test event from the dashboard",
      createdAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/),
    });
    expect(Math.abs(Date.parse(String(data.createdAt)) - Date.now())).toBeLessThan(60_000);

    // One outbox event, one delivery; in the log as the API and the page show it.
    const events = await h.testEvents(ws.id);
    expect(events).toHaveLength(1);
    await h.pump(d, "the test delivery recorded", async () => {
      const log = await h.apiDeliveries(ws.testKey, hook.id);
      return log.length === 1 && log[0]?.status === "delivered";
    });
    const [delivery] = await h.apiDeliveries(ws.testKey, hook.id);
    expect(delivery).toMatchObject({ event: "webhook.test", id: got.headers["x-service-delivery"] });
    expect(deliveryRow((await browser.get(path)).body, String(delivery?.id))).toContain("webhook.test");
  });

  it("pages the delivery log 25 at a time, newest first", async () => {
    const { ws, browser } = await h.signedIn();
    const hook = await h.addWebhook(browser, "http://127.0.0.1:9/hook", ["*"]);
    const path = `/dashboard/sandbox/webhooks/${hook.id}`;
    const csrf = await browser.csrf(path);
    for (let i = 0; i < 26; i++) {
      expect((await browser.post(`${path}/test`, { _csrf: csrf })).statusCode).toBe(303);
    }
    const newestFirst = (await h.apiDeliveries(ws.testKey, hook.id)).map((d) => String(d.id));
    expect(newestFirst).toHaveLength(26);
    const rowIds = (body: string) => [...body.matchAll(/<tr data-delivery-id="([^"]+)"/g)].map((m) => m[1]);

    const first = await browser.get(path);
    expect(rowIds(first.body)).toEqual(newestFirst.slice(0, 25));
    expect(decode(first.body)).toContain(`href="${path}?page=2"`);
    expect(first.body).toContain("Deliveries 1–25 of 26");
    const second = await browser.get(`${path}?page=2`);
    expect(rowIds(second.body)).toEqual(newestFirst.slice(25));
    expect(second.body).not.toContain('id="older-page"');
    // Resend on page 2 comes back to page 2.
    const resend = await browser.post(`${path}/deliveries/${newestFirst[25]}/retry`, {
      _csrf: csrf,
      page: "2",
    });
    expect(resend.headers.location).toBe(`${path}?page=2&notice=delivery-queued`);
    expect((await browser.get(`${path}?page=abc`)).statusCode).toBe(400);
  });

  it("shows a disabled webhook without Send test event, and refuses a test event for it (409)", async () => {
    const { ws, browser } = await h.signedIn();
    const hook = await h.addWebhook(browser, "http://127.0.0.1:9/hook", ["*"]);
    const path = `/dashboard/sandbox/webhooks/${hook.id}`;
    const csrf = await browser.csrf(path);
    await t.database.db
      .updateTable("webhook_endpoints")
      .set({ active: false })
      .where("id", "=", hook.id)
      .execute();
    const page = await browser.get(path);
    expect(page.body).toContain('class="status status-disabled"');
    expect(page.body).not.toContain('id="send-test"');
    const res = await browser.post(`${path}/test`, { _csrf: csrf });
    expect(res.statusCode).toBe(409);
    expect(res.body).toContain("Webhook is disabled");
    const events = await h.testEvents(ws.id);
    expect(events).toHaveLength(0);
  });

  it("deletes the webhook (a confirmed form): the API no longer lists it and its page is gone", async () => {
    const { ws, browser } = await h.signedIn();
    const hook = await h.addWebhook(browser, "http://127.0.0.1:9/hook", ["*"]);
    const path = `/dashboard/sandbox/webhooks/${hook.id}`;
    const page = await browser.get(path);
    expect(decode(page.body)).toMatch(
      new RegExp(`<form method="post" action="${path}/delete" class="inline" data-confirm="[^"]+">`),
    );
    const res = await browser.post(`${path}/delete`, { _csrf: formToken(page.body) });
    expect(res.statusCode, res.body).toBe(303);
    expect(res.headers.location).toBe("/dashboard/sandbox/webhooks?notice=webhook-deleted");
    const list = await browser.get(String(res.headers.location));
    expect(list.body).toContain("The webhook was deleted.");
    expect(list.body).not.toContain(`data-webhook-id="${hook.id}"`);
    expect((await h.apiWebhooks(ws.testKey)).map((w) => w.id)).not.toContain(hook.id);
    expect((await browser.get(path)).statusCode).toBe(404);
  });
});

describe("tenants and CSRF", () => {
  it("a session of workspace A gets 404 for B's webhook page and POSTs, and B's webhook is untouched", async () => {
    const { browser } = await h.signedIn();
    const b = await h.signedIn();
    const theirs = await h.addWebhook(b.browser, "http://127.0.0.1:9/b-hook", ["payment.created"]);
    const payment = await t.request({
      method: "POST",
      url: "/api/v1/payments",
      headers: bearer(b.ws.testKey),
      payload: { amount: "3", tokenSymbol: "USDC", paymentMethod: "crypto" },
    });
    expect(payment.statusCode).toBe(201);
    const [delivery] = await h.apiDeliveries(b.ws.testKey, theirs.id);
    await t.database.db
      .updateTable("webhook_deliveries")
      .set({ status: "failed" })
      .where("id", "=", String(delivery?.id))
      .execute();

    for (const env of ["sandbox", "live"]) {
      const res = await browser.get(`/dashboard/${env}/webhooks/${theirs.id}`);
      expect(res.statusCode).toBe(404);
      expect(res.body).not.toContain("b-hook");
    }
    const csrf = await browser.csrf();
    const base = `/dashboard/sandbox/webhooks/${theirs.id}`;
    for (const action of ["/test", `/deliveries/${delivery?.id}/retry`, "/delete"]) {
      const res = await browser.post(`${base}${action}`, { _csrf: csrf });
      expect(res.statusCode, action).toBe(404);
    }
    // B's own session still has it; nothing was queued, resent or deleted.
    expect((await h.apiWebhooks(b.ws.testKey)).map((w) => w.id)).toContain(theirs.id);
    const log = await h.apiDeliveries(b.ws.testKey, theirs.id);
    expect(log).toHaveLength(1);
    expect(log[0]).toMatchObject({ id: delivery?.id, status: "failed" });
    expect((await b.browser.get(base)).statusCode).toBe(200);

    // B's own webhook is not found under the other environment either.
    const live = await b.browser.post(`/dashboard/live/webhooks/${theirs.id}/test`, {
      _csrf: await b.browser.csrf(),
    });
    expect(live.statusCode).toBe(404);
    expect(await h.apiDeliveries(b.ws.testKey, theirs.id)).toHaveLength(1);
  });

  it("refuses a POST without the session's CSRF token (403) and changes nothing", async () => {
    const { ws, browser } = await h.signedIn();
    const add = await h.postForm(browser, "/dashboard/sandbox/webhooks", [
      ["url", "http://127.0.0.1:9/hook"],
      ["events", "*"],
    ]);
    expect(add.statusCode).toBe(403);
    expect(await h.apiWebhooks(ws.testKey)).toHaveLength(0);

    const hook = await h.addWebhook(browser, "http://127.0.0.1:9/hook", ["*"]);
    const path = `/dashboard/sandbox/webhooks/${hook.id}`;
    for (const action of ["/test", "/delete"]) {
      expect((await browser.post(`${path}${action}`, {})).statusCode, action).toBe(403);
      expect((await browser.post(`${path}${action}`, { _csrf: "x".repeat(32) })).statusCode, action).toBe(
        403,
      );
    }
    expect((await h.apiWebhooks(ws.testKey)).map((w) => w.id)).toContain(hook.id);
    expect(await h.apiDeliveries(ws.testKey, hook.id)).toHaveLength(0);
  });
});
