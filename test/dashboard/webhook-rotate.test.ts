import { Webhook } from "standardwebhooks";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { formToken } from "../support/dashboard.ts";
import { decode, verifies, WebhookPagesHarness } from "../support/webhook-pages.ts";

// The dashboard's Rotate secret on a webhook's page (D24): the current password asked again
// (step-up, like adding a webhook), the new secret shown once on the answer, and for 24 h the
// deliveries signed with both secrets (checked with the standardwebhooks package). Over inject,
// on PGlite or the PostgreSQL of DATABASE_URL, with a real dispatcher and a local receiver.

const NEW_SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;
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

/** The secret a registration signs with now, as the service decrypts it. */
async function storedSecret(id: number): Promise<string> {
  const row = await t.database.db
    .selectFrom("webhook_endpoints")
    .select("encrypted_secret")
    .where("id", "=", id)
    .executeTakeFirstOrThrow();
  return t.app.ctx.secrets.decrypt(row.encrypted_secret);
}

describe("rotating a webhook's secret from the dashboard", () => {
  it("asks the current password; the answer shows the new secret once; deliveries then verify with both", async () => {
    const { browser } = await h.signedIn();
    const receiver = await h.receiver();
    const hook = await h.addWebhook(browser, receiver.url, ["payment.failed"]);
    const path = `/dashboard/sandbox/webhooks/${hook.id}`;
    const page = await browser.get(path);
    expect(page.statusCode).toBe(200);
    const body = decode(page.body);
    expect(body).toMatch(
      new RegExp(`<form method="post" action="${path}/rotate-secret"[^>]* data-confirm="[^"]+">`),
    );
    expect(body).toContain('id="rotate-secret"');
    expect(body).toMatch(/id="rotate-password" name="currentPassword" type="password"/);
    const csrf = formToken(page.body);

    // Without the password, and with a wrong one: 400, the message by the field, nothing changed.
    const none = await h.postForm(browser, `${path}/rotate-secret`, [
      ["_csrf", csrf],
      ["currentPassword", ""],
    ]);
    expect(none.statusCode, none.body.slice(0, 300)).toBe(400);
    expect(decode(none.body)).toContain("Enter your current password to make this change");
    const wrong = await h.postForm(browser, `${path}/rotate-secret`, [
      ["_csrf", csrf],
      ["currentPassword", "not the password"],
    ]);
    expect(wrong.statusCode).toBe(400);
    expect(decode(wrong.body)).toContain("The current password is not right: nothing was changed");
    for (const refused of [none, wrong]) {
      expect(decode(refused.body)).not.toMatch(/whsec_/);
      expect(refused.body).toContain('id="rotate-password-error"');
    }
    expect(await storedSecret(hook.id)).toBe(hook.secret);

    // With it: the new secret, on this answer only.
    const rotated = await h.postForm(browser, `${path}/rotate-secret`, [["_csrf", csrf]]);
    expect(rotated.statusCode, rotated.body.slice(0, 300)).toBe(200);
    expect(rotated.headers["cache-control"]).toBe("no-store");
    const fresh = /<code [^>]*id="signing-secret">([^<]+)<\/code>/.exec(decode(rotated.body))?.[1] ?? "";
    expect(fresh).toMatch(NEW_SECRET);
    expect(fresh).not.toBe(hook.secret);
    expect(await storedSecret(hook.id)).toBe(fresh);
    expect(rotated.cookies.some((c) => c.value.includes(fresh))).toBe(false);
    expect(decode(rotated.body)).toContain("For 24 hours");
    const after = await browser.get(path);
    expect(decode(after.body)).not.toContain(fresh);
    expect(decode(after.body)).not.toContain(hook.secret);

    // A test event sent now is signed with both: each verifies it through the stock library.
    const sent = await browser.post(`${path}/test`, { _csrf: formToken(after.body) });
    expect(sent.statusCode, sent.body).toBe(303);
    const d = h.dispatcher();
    await h.pump(d, "the test event", () => receiver.received.length >= 1);
    const got = receiver.received[0];
    if (!got) throw new Error("nothing received");
    const headers = {
      "webhook-id": String(got.headers["webhook-id"]),
      "webhook-timestamp": String(got.headers["webhook-timestamp"]),
      "webhook-signature": String(got.headers["webhook-signature"]),
    };
    expect(headers["webhook-signature"].split(" ")).toHaveLength(2);
    expect(new Webhook(fresh).verify(got.rawBody, headers)).toEqual(got.json);
    expect(new Webhook(hook.secret).verify(got.rawBody, headers)).toEqual(got.json);
    expect(verifies(fresh, got.rawBody, got.headers["x-service-signature"])).toBe(true);
  });

  it("is a 404 for another workspace's webhook and a 403 without the CSRF token; nothing changes", async () => {
    const { browser } = await h.signedIn();
    const b = await h.signedIn();
    const theirs = await h.addWebhook(b.browser, "http://127.0.0.1:9/b-hook", ["payment.created"]);
    const csrf = await browser.csrf("/dashboard/sandbox/webhooks");
    const res = await h.postForm(browser, `/dashboard/sandbox/webhooks/${theirs.id}/rotate-secret`, [
      ["_csrf", csrf],
    ]);
    expect(res.statusCode).toBe(404);
    expect(decode(res.body)).not.toMatch(/whsec_/);

    const own = `/dashboard/sandbox/webhooks/${theirs.id}/rotate-secret`;
    const noCsrf = await h.postForm(b.browser, own, []);
    expect(noCsrf.statusCode).toBe(403);
    expect(await storedSecret(theirs.id)).toBe(theirs.secret);
  });
});
