import type { LightMyRequestResponse } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ADMIN_SECRET,
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { DashboardClient } from "../support/dashboard.ts";
import { MailSink } from "../support/mail-sink.ts";

// Step-up (D21): the dashboard's forms that redirect money or open access (the settlement
// address, the admin e-mail, a live API key, a webhook and its secret, splits) ask for the current password
// again, every time. Without it or with a wrong one, the form is refused next to the password
// field with a clear message, and nothing changes (read back through the API). Over inject, on
// PGlite or the PostgreSQL of DATABASE_URL; mail to a real SMTP listener.

const PASSWORD = "correct horse battery";
const ADDRESS = "0x3333333333333333333333333333333333333333";
const OTHER_ADDRESS = "0x4444444444444444444444444444444444444444";
const MISSING = "Enter your current password to make this change: nothing was changed";
const WRONG = "The current password is not right: nothing was changed";

const mail = new MailSink();
let t: TestApp;
let ws: CreatedWorkspace;
let email: string;
let nextIp = 1;

beforeAll(async () => {
  t = await startTestApp({ SMTP_URL: await mail.start(), WEBHOOK_ALLOW_PRIVATE: "true" });
  email = `step-up-${Math.random().toString(36).slice(2, 8)}@shop.example`;
  ws = await createWorkspace(t, {
    name: "Step-up Co",
    adminEmail: email,
    adminPassword: PASSWORD,
    settlementAddress: ADDRESS,
  });
});

afterAll(async () => {
  await t?.close();
  await mail.stop();
});

/** A browser signed in from an address of its own (the step-up counts failures per address). */
async function signedIn(): Promise<DashboardClient> {
  const browser = new DashboardClient(t, `198.51.100.${100 + nextIp++}`);
  const res = await browser.login(email, PASSWORD);
  expect(res.statusCode, res.body.slice(0, 300)).toBe(303);
  return browser;
}

/** The refusal shown next to a form's current password. */
function expectRefused(res: LightMyRequestResponse, message: string, fieldId: string): void {
  expect(res.statusCode, res.body.slice(0, 300)).toBe(400);
  expect(res.body).toContain(`<p class="field-error" id="${fieldId}-error" role="alert">${message}</p>`);
  expect(res.body).toMatch(
    new RegExp(`<input id="${fieldId}" name="currentPassword" type="password"[^>]*aria-invalid="true"`),
  );
}

/** Posts `form` three ways: without the password, with a wrong one, and with the right one. */
async function threeWays(
  browser: DashboardClient,
  url: string,
  form: Record<string, string>,
): Promise<{
  missing: LightMyRequestResponse;
  wrong: LightMyRequestResponse;
  right: () => Promise<LightMyRequestResponse>;
}> {
  const missing = await browser.post(url, form);
  const wrong = await browser.post(url, { ...form, currentPassword: "not my password!!" });
  return { missing, wrong, right: () => browser.post(url, { ...form, currentPassword: PASSWORD }) };
}

async function workspace() {
  const res = await t.request({
    method: "GET",
    url: `/api/v1/workspaces/${ws.id}`,
    headers: bearer(ADMIN_SECRET),
  });
  expect(res.statusCode).toBe(200);
  return res.json().workspace as { settlement_address: string | null; adminEmail: string | null };
}

describe("the current password is asked again", () => {
  it("to change the settlement address, every time", async () => {
    const browser = await signedIn();
    const csrf = await browser.csrf("/dashboard/sandbox/settings");
    const form = { _csrf: csrf, settlementAddress: OTHER_ADDRESS, adminEmail: email };
    const { missing, wrong, right } = await threeWays(browser, "/dashboard/sandbox/settings", form);
    expectRefused(missing, MISSING, "settingsPassword");
    expectRefused(wrong, WRONG, "settingsPassword");
    // The form comes back as typed, the password never.
    expect(wrong.body).toContain(`value="${OTHER_ADDRESS}"`);
    expect(wrong.body).not.toContain("not my password!!");
    expect((await workspace()).settlement_address).toBe(ADDRESS);

    const saved = await right();
    expect(saved.statusCode, saved.body.slice(0, 300)).toBe(303);
    expect(saved.headers.location).toBe("/dashboard/sandbox/settings?notice=settings-saved");
    expect((await workspace()).settlement_address).toBe(OTHER_ADDRESS);
    // The next change asks again: a right password a moment ago is not enough.
    const again = await browser.post("/dashboard/sandbox/settings", { ...form, settlementAddress: ADDRESS });
    expectRefused(again, MISSING, "settingsPassword");
    expect((await workspace()).settlement_address).toBe(OTHER_ADDRESS);
    expect(
      (
        await browser.post("/dashboard/sandbox/settings", {
          ...form,
          settlementAddress: ADDRESS,
          currentPassword: PASSWORD,
        })
      ).statusCode,
    ).toBe(303);
    expect((await workspace()).settlement_address).toBe(ADDRESS);
  });

  it("to change the admin e-mail (nothing is mailed without it)", async () => {
    const browser = await signedIn();
    const csrf = await browser.csrf("/dashboard/sandbox/settings");
    const newEmail = `new-${Math.random().toString(36).slice(2, 8)}@shop.example`;
    const form = { _csrf: csrf, settlementAddress: ADDRESS, adminEmail: newEmail };
    const { missing, wrong, right } = await threeWays(browser, "/dashboard/sandbox/settings", form);
    expectRefused(missing, MISSING, "settingsPassword");
    expectRefused(wrong, WRONG, "settingsPassword");
    expect(mail.to(newEmail)).toEqual([]);
    expect((await right()).headers.location).toBe(
      "/dashboard/sandbox/settings?notice=email-confirmation-sent",
    );
    expect(mail.to(newEmail)).toHaveLength(1);
    // Pending until the link is opened (email-change.test.ts).
    expect((await workspace()).adminEmail).toBe(email);
  });

  it("to create a live API key, not a sandbox one", async () => {
    const liveKeys = async () =>
      (await t.request({ method: "GET", url: "/api/v1/keys", headers: bearer(ws.liveKey) })).json().apiKeys
        .length;
    const before = await liveKeys();
    const browser = await signedIn();
    const csrf = await browser.csrf("/dashboard/live/keys");
    expect(browser.cookies.size).toBeGreaterThan(0);
    const page = await browser.get("/dashboard/live/keys");
    expect(page.body).toContain('<input id="key-password" name="currentPassword" type="password"');
    const { missing, wrong, right } = await threeWays(browser, "/dashboard/live/keys", {
      _csrf: csrf,
      name: "Deploy",
    });
    expectRefused(missing, MISSING, "key-password");
    expectRefused(wrong, WRONG, "key-password");
    expect(missing.body).not.toMatch(/svc_live_[0-9A-Za-z]{32,}/);
    expect(await liveKeys()).toBe(before);
    const created = await right();
    expect(created.statusCode).toBe(201);
    expect(created.body).toMatch(/value="svc_live_[0-9A-Za-z]{32,}"/);
    expect(await liveKeys()).toBe(before + 1);

    // A sandbox key moves no real money: no password asked.
    const sandboxPage = await browser.get("/dashboard/sandbox/keys");
    expect(sandboxPage.body).not.toContain('name="currentPassword"');
    const sandbox = await browser.post("/dashboard/sandbox/keys", { _csrf: csrf, name: "Test" });
    expect(sandbox.statusCode).toBe(201);
  });

  it("to register a webhook", async () => {
    const apiWebhooks = async () =>
      (await t.request({ method: "GET", url: "/api/v1/webhooks", headers: bearer(ws.testKey) })).json()
        .webhooks.length;
    const before = await apiWebhooks();
    const browser = await signedIn();
    const csrf = await browser.csrf("/dashboard/sandbox/webhooks");
    const form = { _csrf: csrf, url: "http://127.0.0.1:9/step-up-hook", events: "payment.created" };
    const { missing, wrong, right } = await threeWays(browser, "/dashboard/sandbox/webhooks", form);
    expectRefused(missing, MISSING, "wh-password");
    expectRefused(wrong, WRONG, "wh-password");
    expect(wrong.body).toMatch(/id="wh-url"[^>]*value="[^"]*step-up-hook"/);
    expect(await apiWebhooks()).toBe(before);
    const added = await right();
    expect(added.statusCode, added.body.slice(0, 300)).toBe(201);
    expect(await apiWebhooks()).toBe(before + 1);
  });

  it("to rotate a webhook's signing secret", async () => {
    const registered = await t.request({
      method: "POST",
      url: "/api/v1/webhooks",
      headers: bearer(ws.testKey),
      payload: { url: "http://127.0.0.1:9/rotate-hook", events: ["payment.created"] },
    });
    expect(registered.statusCode).toBe(201);
    const { id, signingSecret } = registered.json().webhook as { id: number; signingSecret: string };
    const current = async () => {
      const row = await t.database.db
        .selectFrom("webhook_endpoints")
        .select("encrypted_secret")
        .where("id", "=", id)
        .executeTakeFirstOrThrow();
      return t.app.ctx.secrets.decrypt(row.encrypted_secret);
    };
    const browser = await signedIn();
    const path = `/dashboard/sandbox/webhooks/${id}`;
    const form = { _csrf: await browser.csrf(path) };
    const { missing, wrong, right } = await threeWays(browser, `${path}/rotate-secret`, form);
    expectRefused(missing, MISSING, "rotate-password");
    expectRefused(wrong, WRONG, "rotate-password");
    expect(await current()).toBe(signingSecret);
    const rotated = await right();
    expect(rotated.statusCode, rotated.body.slice(0, 300)).toBe(200);
    expect(await current()).not.toBe(signingSecret);
  });

  it("to change splits", async () => {
    const splits = async () =>
      (await t.request({ method: "GET", url: "/api/v1/splits", headers: bearer(ws.testKey) })).json() as {
        enabled: boolean;
        splits: unknown[];
      };
    const before = await splits();
    const browser = await signedIn();
    const csrf = await browser.csrf("/dashboard/sandbox/splits");
    const form = {
      _csrf: csrf,
      rows: "1",
      enabled: "on",
      "label-0": "Partner",
      "percent-0": "10",
      "destination-0": "0xAbCdEf0123456789abcdef0123456789ABCDEF01",
      "enabled-0": "on",
    };
    const { missing, wrong, right } = await threeWays(browser, "/dashboard/sandbox/splits", form);
    expectRefused(missing, MISSING, "splits-password");
    expectRefused(wrong, WRONG, "splits-password");
    // The rows come back as typed.
    expect(wrong.body).toContain('value="Partner"');
    expect(await splits()).toEqual(before);
    const saved = await right();
    expect(saved.statusCode, saved.body.slice(0, 300)).toBe(303);
    expect((await splits()).splits).toHaveLength(1);
  });
});

describe("wrong current passwords", () => {
  it("are limited per session: after five, even the right one waits, and nothing changes", async () => {
    const browser = await signedIn();
    const csrf = await browser.csrf("/dashboard/sandbox/settings");
    const form = { _csrf: csrf, settlementAddress: OTHER_ADDRESS, adminEmail: email };
    const start = new Date();
    t.setNow(start);
    try {
      for (let i = 0; i < 5; i++)
        expectRefused(
          await browser.post("/dashboard/sandbox/settings", { ...form, currentPassword: `guess ${i}` }),
          WRONG,
          "settingsPassword",
        );
      const limited = await browser.post("/dashboard/sandbox/settings", {
        ...form,
        currentPassword: PASSWORD,
      });
      expect(limited.statusCode).toBe(429);
      expect(limited.headers["retry-after"]).toBe("30");
      expect(limited.body).toContain(
        "Too many wrong passwords. Try again in 30 seconds: nothing was changed",
      );
      expect((await workspace()).settlement_address).toBe(ADDRESS);
      t.setNow(new Date(start.getTime() + 30_000));
      expect(
        (await browser.post("/dashboard/sandbox/settings", { ...form, currentPassword: PASSWORD }))
          .statusCode,
      ).toBe(303);
      expect((await workspace()).settlement_address).toBe(OTHER_ADDRESS);
    } finally {
      t.setNow(undefined);
    }
  });
});
