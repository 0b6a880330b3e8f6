import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, createWorkspace, startTestApp, type TestApp } from "../support/app.ts";
import { DashboardClient } from "../support/dashboard.ts";

// When the public URL is https (D21): the session cookie is `__Host-svc_session` (Secure, Path=/,
// no Domain) and every answer carries Strict-Transport-Security; over a plain-http public URL the
// cookie is `svc_session` without Secure and no answer has the header.

const PASSWORD = "correct horse battery";
let https: TestApp;
let http: TestApp;

beforeAll(async () => {
  https = await startTestApp({ PUBLIC_BASE_URL: "https://pay.example.com" });
  http = await startTestApp({ PUBLIC_BASE_URL: "http://pay.test" }, { database: https.database });
});

afterAll(async () => {
  await http?.close(true);
  await https?.close();
});

async function signIn(t: TestApp, ip: string) {
  const email = `https-${Math.random().toString(36).slice(2, 8)}@shop.example`;
  await createWorkspace(t, { name: "Secure Co", adminEmail: email, adminPassword: PASSWORD });
  const browser = new DashboardClient(t, ip);
  const res = await browser.login(email, PASSWORD);
  expect(res.statusCode, res.body.slice(0, 300)).toBe(303);
  return { browser, res };
}

describe("an https public URL", () => {
  it("sets the session cookie as __Host-svc_session: Secure, HttpOnly, SameSite=Lax, Path=/, no Domain", async () => {
    const { browser, res } = await signIn(https, "198.51.100.201");
    expect(res.cookies.find((c) => c.name === "svc_session")).toBeUndefined();
    const cookie = res.cookies.find((c) => c.name === "__Host-svc_session");
    expect(cookie).toMatchObject({ secure: true, httpOnly: true, sameSite: "Lax", path: "/" });
    expect(cookie?.domain).toBeUndefined();
    // The session works under that name, and only under it.
    expect((await browser.get("/dashboard/sandbox")).statusCode).toBe(200);
    const renamed = new DashboardClient(https, "198.51.100.201");
    renamed.cookies.set("svc_session", cookie?.value ?? "");
    expect((await renamed.get("/dashboard/sandbox")).statusCode).toBe(303);
    // Logout clears it (Secure too, or the browser would keep it).
    const out = await browser.post("/dashboard/logout", { _csrf: await browser.csrf() });
    const cleared = out.cookies.find((c) => c.name === "__Host-svc_session");
    expect(cleared).toMatchObject({ value: "", secure: true, path: "/" });
  });

  it("puts Strict-Transport-Security on every answer: pages, the API, errors", async () => {
    const ws = await createWorkspace(https);
    const answers = await Promise.all([
      https.request({ method: "GET", url: "/dashboard/login" }),
      https.request({ method: "GET", url: "/health" }),
      https.request({ method: "GET", url: "/api/v1/payments", headers: bearer(ws.testKey) }),
      https.request({ method: "GET", url: "/api/v1/payments" }),
      https.request({ method: "GET", url: "/no/such/page" }),
    ]);
    for (const res of answers)
      expect(res.headers["strict-transport-security"], res.body).toBe("max-age=31536000");
  });
});

describe("an http public URL", () => {
  it("keeps the plain cookie name without Secure, and sends no HSTS", async () => {
    const { res } = await signIn(http, "198.51.100.202");
    const cookie = res.cookies.find((c) => c.name === "svc_session");
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Lax", path: "/" });
    expect(cookie?.secure).toBeFalsy();
    expect(res.headers["strict-transport-security"]).toBeUndefined();
    expect(
      (await http.request({ method: "GET", url: "/health" })).headers["strict-transport-security"],
    ).toBeUndefined();
  });
});
