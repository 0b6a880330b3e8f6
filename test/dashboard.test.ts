import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, type CreatedWorkspace, createWorkspace, startTestApp, type TestApp } from "./support/app.ts";
import { DashboardClient } from "./support/dashboard.ts";
import { FakeCardProvider } from "./support/fake-card-provider.ts";

// The dashboard's login, sessions, CSRF and tenant rules over HTTP (inject), on PGlite or the
// PostgreSQL of DATABASE_URL. The pages themselves are walked in a real browser in
// dashboard.browser.test.ts.

const PASSWORD = "correct horse battery";
let t: TestApp;
let a: CreatedWorkspace;
let b: CreatedWorkspace;
let emailA: string;
let emailB: string;
// Pending payments to cancel need a live rail: card payments through the local fake provider.
const fake = new FakeCardProvider();

beforeAll(async () => {
  await fake.start();
  t = await startTestApp({
    CARD_SECRET_KEY_LIVE: "sk_test_dashboardTests0123456789",
    CARD_WEBHOOK_SECRET_LIVE: "whsec_dashboard_tests_0123456789abcdef",
    CARD_API_BASE: fake.url,
  });
  const suffix = Math.random().toString(36).slice(2, 8);
  emailA = `owner-a-${suffix}@shop.example`;
  emailB = `owner-b-${suffix}@shop.example`;
  a = await createWorkspace(t, { name: "Alpha <Shop>", adminEmail: emailA, adminPassword: PASSWORD });
  b = await createWorkspace(t, { name: "Beta", adminEmail: emailB, adminPassword: PASSWORD });
});

afterAll(async () => {
  await t?.close();
  await fake.stop();
});

/** A live key makes a pending card payment; a sandbox key a crypto one (forwarded at once, D5). */
async function createPayment(key: string, body: Record<string, unknown> = {}) {
  const live = key.startsWith("svc_live_");
  const res = await t.request({
    method: "POST",
    url: "/api/v1/payments",
    headers: bearer(key),
    payload: {
      amount: "12.50",
      ...(live
        ? { tokenSymbol: "USD", paymentMethod: "card" }
        : { tokenSymbol: "USDC", paymentMethod: "crypto" }),
      ...body,
    },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().payment as { id: string; status: string };
}

describe("login", () => {
  it("serves the form with a strict CSP, no framing, and its own CSRF cookie", async () => {
    const browser = new DashboardClient(t);
    const res = await browser.get("/dashboard/login");
    expect(res.statusCode).toBe(200);
    const csp = String(res.headers["content-security-policy"]);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toMatch(/script-src 'self' 'nonce-[A-Za-z0-9+/=]+'/);
    const nonce = /'nonce-([^']+)'/.exec(csp)?.[1];
    expect(decodeEntities(res.body)).toContain(`<script nonce="${nonce}"`);
    const cookie = res.cookies.find((c) => c.name === "svc_login");
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Strict", path: "/dashboard/login" });
  });

  it("signs in with the right password: a new HttpOnly SameSite=Lax session, then the overview", async () => {
    const browser = new DashboardClient(t, "198.51.100.1");
    const res = await browser.login(emailA.toUpperCase(), PASSWORD);
    expect(res.statusCode, res.body).toBe(303);
    expect(res.headers.location).toBe("/dashboard/sandbox");
    const session = res.cookies.find((c) => c.name === "svc_session");
    expect(session).toMatchObject({ httpOnly: true, sameSite: "Lax", path: "/" });
    expect(session?.secure).toBeFalsy(); // PUBLIC_BASE_URL is http here
    const overview = await browser.get("/dashboard/sandbox");
    expect(overview.statusCode).toBe(200);
    // The workspace's name is escaped, never markup.
    expect(overview.body).toContain("Alpha &lt;Shop&gt;");
    expect(overview.body).not.toContain("Alpha <Shop>");
  });

  it("answers a wrong password and an unknown e-mail the same way", async () => {
    const wrong = await new DashboardClient(t, "198.51.100.2").login(emailA, "not the password!");
    const unknown = await new DashboardClient(t, "198.51.100.3").login(
      "nobody@shop.example",
      "not the password!",
    );
    expect(wrong.statusCode).toBe(401);
    expect(unknown.statusCode).toBe(401);
    const message = (body: string) => /role="alert"[^>]*>([^<]+)</.exec(body)?.[1];
    expect(message(wrong.body)).toBe("Wrong e-mail or password.");
    expect(message(unknown.body)).toBe(message(wrong.body));
    expect(wrong.cookies.find((c) => c.name === "svc_session")).toBeUndefined();
    // The password typed is never written back into the page.
    expect(wrong.body).not.toContain("not the password!");
  });

  it("refuses a login form posted without the form's own token (login CSRF)", async () => {
    const browser = new DashboardClient(t, "198.51.100.4");
    const res = await browser.post("/dashboard/login", {
      email: emailA,
      password: PASSWORD,
      _csrf: "forged",
    });
    expect(res.statusCode).toBe(403);
    expect(res.cookies.find((c) => c.name === "svc_session")).toBeUndefined();
  });

  it("gives a new session id at every login and ends the one the browser came with", async () => {
    const browser = new DashboardClient(t, "198.51.100.5");
    await browser.login(emailA, PASSWORD);
    const first = browser.cookies.get("svc_session");
    await browser.login(emailA, PASSWORD);
    const second = browser.cookies.get("svc_session");
    expect(first).toBeDefined();
    expect(second).toBeDefined();
    expect(second).not.toBe(first);
    const old = new DashboardClient(t, "198.51.100.5");
    old.cookies.set("svc_session", first ?? "");
    const res = await old.get("/dashboard/sandbox");
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe("/dashboard/login");
  });

  it("limits failures to 5 per 15 minutes per e-mail, even from other addresses, then the right password too", async () => {
    const email = `limited-${Math.random().toString(36).slice(2, 8)}@shop.example`;
    await createWorkspace(t, { name: "Limited", adminEmail: email, adminPassword: PASSWORD });
    const start = new Date();
    t.setNow(start);
    try {
      for (let i = 0; i < 5; i++) {
        const res = await new DashboardClient(t, `192.0.2.${10 + i}`).login(email, `wrong password ${i}`);
        expect(res.statusCode).toBe(401);
      }
      const limited = await new DashboardClient(t, "192.0.2.20").login(email, PASSWORD);
      expect(limited.statusCode).toBe(429);
      expect(Number(limited.headers["retry-after"])).toBeGreaterThan(800);
      expect(limited.cookies.find((c) => c.name === "svc_session")).toBeUndefined();
      // 15 minutes after the first failure, the window has room again.
      t.setNow(new Date(start.getTime() + 15 * 60_000 + 1_000));
      const again = await new DashboardClient(t, "192.0.2.21").login(email, PASSWORD);
      expect(again.statusCode).toBe(303);
    } finally {
      t.setNow(undefined);
    }
  });

  it("limits failures to 5 per 15 minutes per client address, across e-mails", async () => {
    const ip = "192.0.2.99";
    for (let i = 0; i < 5; i++) {
      const res = await new DashboardClient(t, ip).login(`guess-${i}@shop.example`, "wrong password!!");
      expect(res.statusCode).toBe(401);
    }
    const limited = await new DashboardClient(t, ip).login(emailB, PASSWORD);
    expect(limited.statusCode).toBe(429);
    // Another address is not affected.
    expect((await new DashboardClient(t, "192.0.2.100").login(emailB, PASSWORD)).statusCode).toBe(303);
  });

  it("does not let a right password of another workspace with the same e-mail reset the failures", async () => {
    const email = `victim-${Math.random().toString(36).slice(2, 8)}@shop.example`;
    await createWorkspace(t, { name: "Victim", adminEmail: email, adminPassword: PASSWORD });
    // An attacker's own workspace given the victim's e-mail, with a password the attacker knows.
    await createWorkspace(t, {
      name: "Attacker",
      adminEmail: email,
      adminPassword: "the attacker's password",
    });
    const answers: number[] = [];
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 4; i++)
        answers.push(
          (
            await new DashboardClient(t, `192.0.2.${130 + round * 10 + i}`).login(
              email,
              `guess ${round}-${i}`,
            )
          ).statusCode,
        );
      answers.push(
        (await new DashboardClient(t, `192.0.2.${139 + round * 10}`).login(email, "the attacker's password"))
          .statusCode,
      );
    }
    expect(answers).toEqual([401, 401, 401, 401, 303, 401, 429, 429, 429, 429]);
  });

  it("answers a NUL character in a form field with 400 naming it, before any sign-in", async () => {
    const browser = new DashboardClient(t, "198.51.100.60");
    const page = await browser.get("/dashboard/login");
    const res = await browser.post("/dashboard/login", {
      email: "a\u0000b@shop.example",
      password: PASSWORD,
      _csrf: /name="_csrf" value="([^"]+)"/.exec(page.body)?.[1] ?? "",
    });
    expect(res.statusCode).toBe(400);
    expect(res.body).toContain("email must not contain NUL characters");
  });

  it("asks which workspace when several share the e-mail and the password", async () => {
    const email = `shared-${Math.random().toString(36).slice(2, 8)}@shop.example`;
    const first = await createWorkspace(t, {
      name: "Shared One",
      adminEmail: email,
      adminPassword: PASSWORD,
    });
    const second = await createWorkspace(t, {
      name: "Shared Two",
      adminEmail: email,
      adminPassword: PASSWORD,
    });
    const browser = new DashboardClient(t, "198.51.100.6");
    const choose = await browser.login(email, PASSWORD);
    expect(choose.statusCode).toBe(200);
    expect(choose.body).toContain(`value="${first.id}"`);
    expect(choose.body).toContain(`value="${second.id}"`);
    expect(browser.cookies.get("svc_session")).toBeUndefined();
    const res = await browser.login(email, PASSWORD, { workspaceId: second.id });
    expect(res.statusCode).toBe(303);
    expect((await browser.get("/dashboard/sandbox")).body).toContain("Shared Two");
  });
});

describe("sessions", () => {
  it("expire after 12 hours idle, and each request moves the expiry on", async () => {
    const browser = new DashboardClient(t, "198.51.100.7");
    const start = new Date();
    const at = (hours: number) => t.setNow(new Date(start.getTime() + hours * 3_600_000));
    t.setNow(start);
    try {
      await browser.login(emailA, PASSWORD);
      at(11);
      expect((await browser.get("/dashboard/sandbox")).statusCode).toBe(200);
      // 22 h after login but only 11 h after the last request: still signed in.
      at(22);
      expect((await browser.get("/dashboard/sandbox")).statusCode).toBe(200);
      const idle = new DashboardClient(t, "198.51.100.7");
      at(0);
      await idle.login(emailA, PASSWORD);
      at(11);
      expect((await idle.get("/dashboard/sandbox")).statusCode).toBe(200);
      // 12 h and a minute after its last request (23 h after its login): ended.
      at(23 + 1 / 60);
      const expired = await idle.get("/dashboard/sandbox");
      expect(expired.statusCode).toBe(303);
      expect(expired.headers.location).toBe("/dashboard/login");
    } finally {
      t.setNow(undefined);
    }
  });

  it("end 24 hours after their login however recently they were used", async () => {
    const browser = new DashboardClient(t, "198.51.100.17");
    const start = new Date();
    const at = (ms: number) => t.setNow(new Date(start.getTime() + ms));
    t.setNow(start);
    try {
      expect((await browser.login(emailA, PASSWORD)).statusCode).toBe(303);
      for (const hours of [6, 12, 18, 23]) {
        at(hours * 3_600_000);
        expect((await browser.get("/dashboard/sandbox")).statusCode, `${hours} h`).toBe(200);
      }
      at(24 * 3_600_000 - 60_000);
      expect((await browser.get("/dashboard/sandbox")).statusCode).toBe(200);
      // A minute after the last request, but 24 h after the login.
      at(24 * 3_600_000);
      const ended = await browser.get("/dashboard/sandbox");
      expect(ended.statusCode).toBe(303);
      expect(ended.headers.location).toBe("/dashboard/login");
      // A new login gives a new 24 hours.
      expect((await browser.login(emailA, PASSWORD)).statusCode).toBe(303);
      at(35 * 3_600_000);
      expect((await browser.get("/dashboard/sandbox")).statusCode).toBe(200);
    } finally {
      t.setNow(undefined);
    }
  });

  it("end at logout", async () => {
    const browser = new DashboardClient(t, "198.51.100.8");
    await browser.login(emailA, PASSWORD);
    const token = browser.cookies.get("svc_session");
    const csrf = await browser.csrf();
    const out = await browser.post("/dashboard/logout", { _csrf: csrf });
    expect(out.statusCode).toBe(303);
    expect(out.headers.location).toBe("/dashboard/login");
    const replay = new DashboardClient(t);
    replay.cookies.set("svc_session", token ?? "");
    expect((await replay.get("/dashboard/sandbox")).statusCode).toBe(303);
  });

  it("send a visitor without a session to the login page", async () => {
    const res = await new DashboardClient(t).get("/dashboard/sandbox/payments");
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe("/dashboard/login");
  });
});

describe("state-changing requests", () => {
  it("refuse a POST without the session's CSRF token, and accept it with the token", async () => {
    const payment = await createPayment(a.liveKey);
    const browser = new DashboardClient(t, "198.51.100.9");
    await browser.login(emailA, PASSWORD);
    const forged = await browser.post(`/dashboard/live/payments/${payment.id}/cancel`, {});
    expect(forged.statusCode).toBe(403);
    const wrongToken = await browser.post(`/dashboard/live/payments/${payment.id}/cancel`, {
      _csrf: "x".repeat(32),
    });
    expect(wrongToken.statusCode).toBe(403);
    const read = await t.request({
      method: "GET",
      url: `/api/v1/payments/${payment.id}`,
      headers: bearer(a.liveKey),
    });
    expect(read.json().payment.status).toBe("pending");

    const csrf = await browser.csrf(`/dashboard/live/payments/${payment.id}`);
    const done = await browser.post(`/dashboard/live/payments/${payment.id}/cancel`, { _csrf: csrf });
    expect(done.statusCode, done.body).toBe(303);
    expect(done.headers.location).toBe(`/dashboard/live/payments/${payment.id}?notice=cancelled`);
    const after = await t.request({
      method: "GET",
      url: `/api/v1/payments/${payment.id}`,
      headers: bearer(a.liveKey),
    });
    expect(after.json().payment.status).toBe("cancelled");
    const page = await browser.get(done.headers.location ?? "");
    expect(page.body).toContain("The payment was cancelled.");
    expect(page.body).toContain("payment.cancelled");
  });
});

describe("tenants", () => {
  it("a session of one workspace gets 404 for another's payment, in either environment", async () => {
    const theirs = await createPayment(b.liveKey, { description: "B's secret order" });
    const browser = new DashboardClient(t, "198.51.100.10");
    await browser.login(emailA, PASSWORD);
    for (const env of ["live", "sandbox"]) {
      const res = await browser.get(`/dashboard/${env}/payments/${theirs.id}`);
      expect(res.statusCode).toBe(404);
      expect(res.body).not.toContain("B's secret order");
    }
    const csrf = await browser.csrf();
    const cancel = await browser.post(`/dashboard/live/payments/${theirs.id}/cancel`, { _csrf: csrf });
    expect(cancel.statusCode).toBe(404);
    const read = await t.request({
      method: "GET",
      url: `/api/v1/payments/${theirs.id}`,
      headers: bearer(b.liveKey),
    });
    expect(read.json().payment.status).toBe("pending");
  });

  it("a page shows only the environment its URL names", async () => {
    const sandboxPayment = await createPayment(a.testKey, { description: "sandbox-only order" });
    const browser = new DashboardClient(t, "198.51.100.11");
    await browser.login(emailA, PASSWORD);
    expect((await browser.get("/dashboard/sandbox")).body).toContain(sandboxPayment.id.slice(0, 8));
    expect((await browser.get("/dashboard/live")).body).not.toContain(sandboxPayment.id.slice(0, 8));
    expect((await browser.get(`/dashboard/live/payments/${sandboxPayment.id}`)).statusCode).toBe(404);
    expect((await browser.get("/dashboard/staging")).statusCode).toBe(404);
  });
});

describe("escaping", () => {
  it("shows a payer's or merchant's markup as text", async () => {
    const payment = await createPayment(a.testKey, {
      description: `<script>alert(1)</script><img src=x onerror=alert(2)>"'`,
      metadata: { "<b>key</b>": "<i>value</i>" },
    });
    const browser = new DashboardClient(t, "198.51.100.12");
    await browser.login(emailA, PASSWORD);
    const detail = await browser.get(`/dashboard/sandbox/payments/${payment.id}`);
    expect(detail.statusCode).toBe(200);
    expect(detail.body).not.toContain("<script>alert(1)");
    expect(detail.body).not.toContain("<img src=x");
    expect(detail.body).toContain("&lt;script&gt;alert(1)");
    expect(decodeEntities(detail.body)).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    expect(detail.body).not.toContain("<b>key</b>");
    expect(decodeEntities(detail.body)).toContain("&lt;i&gt;value&lt;/i&gt;");
  });
});

/** Undoes the escaping of characters that need none in text ("/", "="), keeping &lt; &gt; &amp;. */
function decodeEntities(body: string): string {
  return body.replaceAll("&#x2F;", "/").replaceAll("&#x3D;", "=");
}
