import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { DashboardClient } from "../support/dashboard.ts";
import { FakeCardProvider } from "../support/fake-card-provider.ts";

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

  it("never locks the owner out from elsewhere: 30 wrong passwords from one address, the right one from another signs in", async () => {
    const email = `targeted-${Math.random().toString(36).slice(2, 8)}@shop.example`;
    await createWorkspace(t, { name: "Targeted", adminEmail: email, adminPassword: PASSWORD });
    const attacker = "192.0.2.10";
    const answers: number[] = [];
    for (let i = 0; i < 30; i++)
      answers.push((await new DashboardClient(t, attacker).login(email, `wrong password ${i}`)).statusCode);
    // Five are checked, then the attacker waits (answered 429 unchecked, not counted).
    expect(answers.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    expect(new Set(answers.slice(5))).toEqual(new Set([429]));
    // Even the right password waits at the attacker's address…
    expect((await new DashboardClient(t, attacker).login(email, PASSWORD)).statusCode).toBe(429);
    // …but the owner, at an address that has not failed, signs in.
    const owner = await new DashboardClient(t, "192.0.2.11").login(email, PASSWORD);
    expect(owner.statusCode, owner.body.slice(0, 300)).toBe(303);
  });

  it("makes an (e-mail, address) wait after 5 failures, twice as long at each further failure", async () => {
    const email = `delayed-${Math.random().toString(36).slice(2, 8)}@shop.example`;
    await createWorkspace(t, { name: "Delayed", adminEmail: email, adminPassword: PASSWORD });
    const at = (ms: number) => t.setNow(new Date(start.getTime() + ms));
    const from = () => new DashboardClient(t, "192.0.2.30");
    const start = new Date();
    t.setNow(start);
    try {
      for (let i = 0; i < 5; i++) expect((await from().login(email, `wrong ${i}`)).statusCode).toBe(401);
      const limited = await from().login(email, PASSWORD);
      expect(limited.statusCode).toBe(429);
      expect(limited.headers["retry-after"]).toBe("30");
      expect(limited.body).toContain("Too many failed attempts from this address. Try again in 30 seconds.");
      expect(limited.cookies.find((c) => c.name === "svc_session")).toBeUndefined();
      // After 30 s a sixth guess is checked; the seventh waits a minute after it, then 2, 4 …
      at(30_000);
      expect((await from().login(email, "wrong 5")).statusCode).toBe(401);
      at(31_000);
      const longer = await from().login(email, PASSWORD);
      expect(longer.statusCode).toBe(429);
      expect(longer.headers["retry-after"]).toBe("59");
      at(90_000);
      expect((await from().login(email, "wrong 6")).statusCode).toBe(401);
      at(91_000);
      expect((await from().login(email, PASSWORD)).headers["retry-after"]).toBe("119");
      // The right password once the wait is over signs in, and clears this pair's failures.
      at(210_000);
      expect((await from().login(email, PASSWORD)).statusCode).toBe(303);
      expect((await from().login(email, "a typo")).statusCode).toBe(401);
    } finally {
      t.setNow(undefined);
    }
  });

  it("makes an address wait after 20 failures across e-mails; other addresses are not affected", async () => {
    const ip = "192.0.2.99";
    // In parallel: each attempt counts those written before it, so all 20 are still free.
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        new DashboardClient(t, ip)
          .login(`guess-${i}@shop.example`, "wrong password!!")
          .then((r) => r.statusCode),
      ),
    );
    expect(answers).toEqual(Array(20).fill(401));
    const limited = await new DashboardClient(t, ip).login(emailB, PASSWORD);
    expect(limited.statusCode).toBe(429);
    expect((await new DashboardClient(t, "192.0.2.100").login(emailB, PASSWORD)).statusCode).toBe(303);
  }, 60_000);

  it("does not let a right password of another workspace with the same e-mail free the address's failures", async () => {
    const email = `victim-${Math.random().toString(36).slice(2, 8)}@shop.example`;
    await createWorkspace(t, { name: "Victim", adminEmail: email, adminPassword: PASSWORD });
    // An attacker's own workspace given the victim's e-mail, with a password the attacker knows:
    // its right password clears the (e-mail, address) failures, never the address's.
    await createWorkspace(t, {
      name: "Attacker",
      adminEmail: email,
      adminPassword: "the attacker's password",
    });
    const ip = "192.0.2.140";
    const answers: number[] = [];
    for (let round = 0; round < 5; round++) {
      const guesses = await Promise.all(
        [0, 1, 2, 3].map((i) => new DashboardClient(t, ip).login(email, `guess ${round}-${i}`)),
      );
      answers.push(...guesses.map((r) => r.statusCode));
      answers.push((await new DashboardClient(t, ip).login(email, "the attacker's password")).statusCode);
    }
    // 20 failures at the address by the fifth round: even the attacker's own password now waits.
    expect(answers).toEqual([...Array(4).fill([401, 401, 401, 401, 303]).flat(), 401, 401, 401, 401, 429]);
  }, 90_000);

  it("keeps its count in the database: a second instance on the same database sees the failures", async () => {
    const email = `shared-db-${Math.random().toString(36).slice(2, 8)}@shop.example`;
    await createWorkspace(t, { name: "Shared", adminEmail: email, adminPassword: PASSWORD });
    const second = await startTestApp({}, { database: t.database });
    try {
      for (let i = 0; i < 5; i++)
        expect((await new DashboardClient(t, "192.0.2.150").login(email, `wrong ${i}`)).statusCode).toBe(401);
      const there = await new DashboardClient(second, "192.0.2.150").login(email, PASSWORD);
      expect(there.statusCode).toBe(429);
    } finally {
      await second.close(true);
    }
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
