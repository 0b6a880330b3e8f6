import type { InjectOptions, LightMyRequestResponse } from "fastify";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { ADMIN_SECRET, bearer, createWorkspace, startTestApp, type TestApp } from "../support/app.ts";

// Failed authentication is limited per client address (issue 20): after 20 failures in a minute,
// an address's further failures get 429 with Retry-After. A valid API key keeps working, from any
// address, so an attacker cannot lock a real key out; the admin secret, the one guessable
// credential, is not checked from a limited address. Client addresses are set through inject's
// `remoteAddress`: nothing leaves the process.

const FAILURES_ALLOWED = 20;
const TOO_MANY = {
  error: "Too many failed authentication attempts from this address: try again after Retry-After seconds",
};

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" });
});
afterEach(() => {
  vi.useRealTimers();
});
afterAll(async () => t?.close());

let nextAddress = 10;
/** A client address of its own per test (TEST-NET-3 labels; inject opens no socket). */
const freshAddress = () => `203.0.113.${nextAddress++}`;

function from(address: string, options: InjectOptions): Promise<LightMyRequestResponse> {
  return t.request({ ...options, remoteAddress: address });
}

const listKeys = (address: string, token: string) =>
  from(address, { method: "GET", url: "/api/v1/keys", headers: bearer(token) });

const createWorkspaceAs = (address: string, token: string) =>
  from(address, {
    method: "POST",
    url: "/api/v1/workspaces",
    headers: bearer(token),
    payload: { name: "Limited" },
  });

const wrongKey = (i: number) => `svc_test_${String(i).padStart(40, "Q")}`;

function expectLimited(res: LightMyRequestResponse, label: string): void {
  expect(res.statusCode, `${label}: ${res.body}`).toBe(429);
  expect(res.headers["content-type"]).toMatch(/^application\/json/);
  expect(res.json()).toEqual(TOO_MANY);
  const retryAfter = Number(res.headers["retry-after"]);
  expect(Number.isInteger(retryAfter), `Retry-After ${res.headers["retry-after"]}`).toBe(true);
  expect(retryAfter).toBeGreaterThan(0);
  expect(retryAfter).toBeLessThanOrEqual(60);
}

/** Spends an address's allowance of failures; each of them is still an ordinary 401. */
async function exhaust(address: string): Promise<void> {
  for (let i = 0; i < FAILURES_ALLOWED; i++) {
    const res = await listKeys(address, wrongKey(i));
    expect(res.statusCode, `failure ${i + 1}: ${res.body}`).toBe(401);
  }
}

describe("failed authentication per client address", () => {
  it("300 wrong API keys in a row: 20 are answered 401, the rest 429 with Retry-After", async () => {
    const address = freshAddress();
    await exhaust(address);
    for (let i = FAILURES_ALLOWED; i < 300; i++) {
      const res = await listKeys(address, wrongKey(i));
      if (res.statusCode !== 429) expectLimited(res, `attempt ${i + 1}`);
    }
    expectLimited(await listKeys(address, wrongKey(300)), "attempt 301");
  });

  it("300 wrong admin secrets in a row: 20 are answered 401, the rest 429", async () => {
    const address = freshAddress();
    for (let i = 0; i < FAILURES_ALLOWED; i++) {
      const res = await createWorkspaceAs(address, `wrong-admin-secret-${i}`);
      expect(res.statusCode, `failure ${i + 1}: ${res.body}`).toBe(401);
    }
    for (let i = FAILURES_ALLOWED; i < 300; i++) {
      const res = await createWorkspaceAs(address, `wrong-admin-secret-${i}`);
      if (res.statusCode !== 429) expectLimited(res, `attempt ${i + 1}`);
    }
    expectLimited(await createWorkspaceAs(address, "wrong-admin-secret-last"), "last attempt");
  });

  it("malformed tokens and revoked keys count as failures too", async () => {
    const ws = await createWorkspace(t);
    const created = await t.request({
      method: "POST",
      url: "/api/v1/keys",
      headers: bearer(ws.testKey),
      payload: { environment: "sandbox", name: "revoked" },
    });
    const revoked = created.json().apiKey;
    const del = await t.request({
      method: "DELETE",
      url: `/api/v1/keys/${revoked.id}`,
      headers: bearer(ws.testKey),
    });
    expect(del.statusCode).toBe(200);

    const address = freshAddress();
    for (let i = 0; i < FAILURES_ALLOWED / 2; i++) {
      expect((await listKeys(address, revoked.key)).statusCode).toBe(401);
      const malformed = await from(address, {
        method: "GET",
        url: "/api/v1/keys",
        headers: { authorization: `Basic ${i}` },
      });
      expect(malformed.statusCode).toBe(401);
    }
    expectLimited(await listKeys(address, revoked.key), "revoked key after 20 failures");
  });

  it("requests without any credential are not counted (they guess nothing)", async () => {
    const address = freshAddress();
    for (let i = 0; i < FAILURES_ALLOWED * 2; i++) {
      const res = await from(address, { method: "GET", url: "/api/v1/keys" });
      expect(res.statusCode, `request ${i + 1}`).toBe(401);
    }
    expect((await listKeys(address, wrongKey(0))).statusCode).toBe(401);
  });

  it("an attacker cannot lock a real key out: it works from the limited address and from any other", async () => {
    const ws = await createWorkspace(t);
    const attacker = freshAddress();
    const merchant = freshAddress();
    await exhaust(attacker);
    expectLimited(await listKeys(attacker, wrongKey(99)), "attacker");

    const fromMerchant = await listKeys(merchant, ws.testKey);
    expect(fromMerchant.statusCode, fromMerchant.body).toBe(200);
    // A client sharing the attacker's address (NAT, a proxy) keeps working with its valid key.
    const fromSameAddress = await listKeys(attacker, ws.liveKey);
    expect(fromSameAddress.statusCode, fromSameAddress.body).toBe(200);
    // The merchant's address has its own allowance: a typo there is an ordinary 401.
    expect((await listKeys(merchant, wrongKey(1))).statusCode).toBe(401);
    // The limit is on failures, not on the valid key's use.
    expectLimited(await listKeys(attacker, wrongKey(100)), "attacker after the valid request");
  });

  it("the admin secret is not checked from a limited address, and still works from others", async () => {
    const attacker = freshAddress();
    await exhaust(attacker);
    // Checking it here would tell a guesser which secret is right: the answer is 429 either way.
    expectLimited(await createWorkspaceAs(attacker, ADMIN_SECRET), "right admin secret, limited address");
    const operator = await createWorkspaceAs(freshAddress(), ADMIN_SECRET);
    expect(operator.statusCode, operator.body).toBe(201);
  });

  it("the address may try again once the window has passed", async () => {
    const address = freshAddress();
    await exhaust(address);
    expectLimited(await listKeys(address, wrongKey(50)), "inside the window");
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + 61_000 });
    expect((await listKeys(address, wrongKey(51))).statusCode).toBe(401);
  });
});

describe("behind a reverse proxy (TRUST_PROXY)", () => {
  const PROXY = "198.51.100.1";
  let proxied: TestApp;
  beforeAll(async () => {
    proxied = await startTestApp({ TRUST_PROXY: `${PROXY},10.0.0.0/8` });
  });
  afterAll(async () => proxied?.close());

  const via = (remoteAddress: string, client: string, token: string) =>
    proxied.request({
      method: "POST",
      url: "/api/v1/workspaces",
      headers: { ...bearer(token), "x-forwarded-for": client },
      payload: { name: "Proxied" },
      remoteAddress,
    });

  it("counts failures per client the trusted proxy names, so one client cannot lock the admin secret out for all", async () => {
    const attacker = "203.0.113.200";
    for (let i = 0; i < FAILURES_ALLOWED; i++) {
      expect((await via(PROXY, attacker, `wrong-admin-secret-${i}`)).statusCode).toBe(401);
    }
    expectLimited(await via(PROXY, attacker, ADMIN_SECRET), "the attacker, through the proxy");
    // The operator comes through the same proxy (and a second one of the listed range).
    const operator = await via(PROXY, "203.0.113.201", ADMIN_SECRET);
    expect(operator.statusCode, operator.body).toBe(201);
    expect((await via("10.1.2.3", "203.0.113.202", ADMIN_SECRET)).statusCode).toBe(201);
  });

  it("ignores X-Forwarded-For from an address it does not trust: a client cannot pick its own address", async () => {
    const direct = "203.0.113.210";
    for (let i = 0; i < FAILURES_ALLOWED; i++) {
      const res = await via(direct, `192.0.2.${i}`, `wrong-admin-secret-${i}`);
      expect(res.statusCode, `failure ${i + 1}`).toBe(401);
    }
    expectLimited(await via(direct, "192.0.2.99", ADMIN_SECRET), "a new forwarded address, same connection");
  });
});
