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

// The HTTP contract shared by every endpoint: D1 (health, ready), D9 (rate limits), D10 (errors and
// input), part 7 (error body) and part 9 (versioned paths) of the interface.

/** No stack frames, file paths or SQL in an error body (D10). */
function expectCleanJsonError(res: LightMyRequestResponse, label: string): void {
  expect(res.statusCode, label).toBeGreaterThanOrEqual(400);
  expect(res.headers["content-type"], label).toMatch(/^application\/json/);
  let body: unknown;
  expect(() => {
    body = JSON.parse(res.body);
  }, `${label}: body is JSON`).not.toThrow();
  expect(body, label).toBeTypeOf("object");
  expect(typeof (body as { error?: unknown }).error, `${label}: error is a string`).toBe("string");
  expect((body as { error: string }).error.length, label).toBeGreaterThan(0);
  expect(res.body, `${label}: no stack frames`).not.toMatch(
    /\bat [\w$.<>]+ \(|\n\s+at |\bat file:|node:internal/,
  );
  expect(res.body, `${label}: no stack property`).not.toMatch(/"stack"/);
  expect(res.body, `${label}: no source paths`).not.toMatch(/\/work\/|src\/|\.ts:\d+|node_modules/);
  expect(res.body, `${label}: no SQL`).not.toMatch(
    /insert into|select .* from|update .* set|delete from|syntax error at|violates|relation "|column "|duplicate key|pglite|postgres/i,
  );
}

describe("HTTP contract", () => {
  let t: TestApp;
  let ws: CreatedWorkspace;
  beforeAll(async () => {
    t = await startTestApp();
    ws = await createWorkspace(t);
  });
  afterAll(async () => t.close());

  describe("errors are JSON (D10)", () => {
    it("unknown route → 404 JSON with error", async () => {
      for (const [method, url, headers] of [
        ["GET", "/no/such/route", {}],
        ["POST", "/api/v1/nothing-here", bearer(ADMIN_SECRET)],
        ["GET", "/api/v2/payments", {}],
        ["DELETE", "/health", {}],
      ] as const) {
        const res = await t.request({ method, url, headers });
        expect(res.statusCode, `${method} ${url}`).toBe(404);
        expectCleanJsonError(res, `${method} ${url}`);
      }
    });

    it("malformed JSON → 400 {error: 'Invalid JSON body'}", async () => {
      for (const [url, headers, payload] of [
        ["/api/v1/payments", bearer(ws.testKey), '{"tokenSymbol": "USDC", "amount": '],
        ["/api/v1/keys", bearer(ws.testKey), "{bad json"],
        ["/api/v1/workspaces", bearer(ADMIN_SECRET), "[1, 2,"],
        ["/api/v1/payments", bearer(ws.testKey), "not json at all"],
      ] as const) {
        const res = await t.request({
          method: "POST",
          url,
          headers: { ...headers, "content-type": "application/json" },
          payload,
        });
        expect(res.statusCode, `${url} ${payload}`).toBe(400);
        expect(res.json()).toEqual({ error: "Invalid JSON body" });
        expectCleanJsonError(res, `invalid JSON to ${url}`);
      }
    });

    it("a body over 1 MiB → 413 JSON, and nothing is created", async () => {
      const before = await t.database.db
        .selectFrom("payments")
        .select("id")
        .where("workspace_id", "=", ws.id)
        .execute();
      const payload = JSON.stringify({
        tokenSymbol: "USDC",
        amount: "1",
        merchantWallet: "0x1111111111111111111111111111111111111111",
        description: "x".repeat(1024 * 1024),
      });
      expect(Buffer.byteLength(payload)).toBeGreaterThan(1024 * 1024);
      const res = await t.request({
        method: "POST",
        url: "/api/v1/payments",
        headers: { ...bearer(ws.testKey), "content-type": "application/json" },
        payload,
      });
      expect(res.statusCode).toBe(413);
      expectCleanJsonError(res, "413");
      const after = await t.database.db
        .selectFrom("payments")
        .select("id")
        .where("workspace_id", "=", ws.id)
        .execute();
      expect(after).toHaveLength(before.length);
    });

    it("a body just under 1 MiB is not refused for its size", async () => {
      const res = await t.request({
        method: "POST",
        url: "/api/v1/workspaces",
        headers: { ...bearer(ADMIN_SECRET), "content-type": "application/json" },
        payload: JSON.stringify({ name: "Big", pad: "y".repeat(1024 * 1024 - 100) }),
      });
      expect(res.statusCode).not.toBe(413);
    });

    it("content-type text/plain → 415 JSON", async () => {
      for (const [url, headers] of [
        ["/api/v1/payments", bearer(ws.testKey)],
        ["/api/v1/workspaces", bearer(ADMIN_SECRET)],
      ] as const) {
        const res = await t.request({
          method: "POST",
          url,
          headers: { ...headers, "content-type": "text/plain" },
          payload: JSON.stringify({ tokenSymbol: "USDC", amount: "1", name: "x" }),
        });
        expect(res.statusCode, url).toBe(415);
        expectCleanJsonError(res, `415 ${url}`);
      }
    });

    it("other wrong content types → 415 JSON", async () => {
      for (const contentType of [
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "text/xml",
      ]) {
        const res = await t.request({
          method: "POST",
          url: "/api/v1/payments",
          headers: { ...bearer(ws.testKey), "content-type": contentType },
          payload: "tokenSymbol=USDC&amount=1",
        });
        expect(res.statusCode, contentType).toBe(415);
        expectCleanJsonError(res, contentType);
      }
    });

    it("every error response is application/json with no stack trace or SQL", async () => {
      const other = await createWorkspace(t);
      const cases: Array<[string, Parameters<TestApp["request"]>[0]]> = [
        ["401 no key", { method: "GET", url: "/api/v1/payments" }],
        ["401 garbage key", { method: "GET", url: "/api/v1/payments", headers: bearer("garbage") }],
        [
          "401 unknown key",
          { method: "GET", url: "/api/v1/payments", headers: bearer(`svc_live_${"Z".repeat(40)}`) },
        ],
        [
          "401 malformed header",
          { method: "GET", url: "/api/v1/payments", headers: { authorization: "Basic abc" } },
        ],
        [
          "403 admin-only",
          { method: "POST", url: "/api/v1/workspaces", headers: bearer(ws.testKey), payload: { name: "x" } },
        ],
        [
          "403 other workspace",
          { method: "GET", url: `/api/v1/workspaces/${other.id}`, headers: bearer(ws.testKey) },
        ],
        ["404 workspace", { method: "GET", url: "/api/v1/workspaces/nope", headers: bearer(ADMIN_SECRET) }],
        [
          "404 payment malformed id",
          { method: "GET", url: "/api/v1/payments/nope", headers: bearer(ws.testKey) },
        ],
        [
          "404 payment unknown id",
          {
            method: "GET",
            url: "/api/v1/payments/00000000-0000-4000-8000-000000000000",
            headers: bearer(ws.testKey),
          },
        ],
        [
          "404 SQL-ish id",
          {
            method: "GET",
            url: "/api/v1/payments/'%3B%20DROP%20TABLE%20payments",
            headers: bearer(ws.testKey),
          },
        ],
        ["404 key", { method: "DELETE", url: "/api/v1/keys/nope", headers: bearer(ws.testKey) }],
        ["400 limit", { method: "GET", url: "/api/v1/payments?limit=abc", headers: bearer(ws.testKey) }],
        [
          "400 limit range",
          { method: "GET", url: "/api/v1/payments?limit=1000", headers: bearer(ws.testKey) },
        ],
        [
          "400 payment body",
          {
            method: "POST",
            url: "/api/v1/payments",
            headers: bearer(ws.testKey),
            payload: { tokenSymbol: "DOGE" },
          },
        ],
        [
          "400 payment amount",
          {
            method: "POST",
            url: "/api/v1/payments",
            headers: bearer(ws.testKey),
            payload: { tokenSymbol: "USDC", amount: "1e5" },
          },
        ],
        [
          "400 workspace body",
          { method: "POST", url: "/api/v1/workspaces", headers: bearer(ADMIN_SECRET), payload: { name: 42 } },
        ],
        [
          "400 array body",
          { method: "POST", url: "/api/v1/workspaces", headers: bearer(ADMIN_SECRET), payload: [1, 2] },
        ],
        ["400 bad url", { method: "GET", url: "/api/v1/payments/%E0%A4%A", headers: bearer(ws.testKey) }],
        [
          "415",
          {
            method: "POST",
            url: "/api/v1/keys",
            headers: { ...bearer(ws.testKey), "content-type": "text/plain" },
            payload: "x",
          },
        ],
      ];
      const failures: string[] = [];
      for (const [label, request] of cases) {
        const res = await t.request(request);
        expectCleanJsonError(res, label);
        // Client mistakes are 4xx, never an unexpected 500.
        if (res.statusCode >= 500) failures.push(`${label}: ${res.statusCode} ${res.body}`);
      }
      expect(failures).toEqual([]);
    });

    it("a NUL character in a text field is a client error (400), not a 500", async () => {
      // PostgreSQL text cannot hold U+0000; the input is invalid and must be answered as such.
      const cases: Array<[string, Parameters<TestApp["request"]>[0]]> = [
        [
          "400 NUL byte in name",
          {
            method: "POST",
            url: "/api/v1/workspaces",
            headers: bearer(ADMIN_SECRET),
            payload: { name: "a\u0000b" },
          },
        ],
        [
          "400 NUL byte in key name",
          { method: "POST", url: "/api/v1/keys", headers: bearer(ws.testKey), payload: { name: "a\u0000b" } },
        ],
        [
          "400 NUL byte in description",
          {
            method: "POST",
            url: "/api/v1/payments",
            headers: bearer(ws.testKey),
            payload: {
              tokenSymbol: "USDC",
              amount: "1",
              merchantWallet: "0x1111111111111111111111111111111111111111",
              description: "a\u0000b",
            },
          },
        ],
      ];
      const failures: string[] = [];
      for (const [label, request] of cases) {
        const res = await t.request(request);
        expectCleanJsonError(res, label);
        if (res.statusCode !== 400) failures.push(`${label}: ${res.statusCode} ${res.body}`);
      }
      expect(failures).toEqual([]);
    });
  });

  describe("health, readiness and documentation (D1)", () => {
    it("GET /health → 200 {status: 'ok'} without auth", async () => {
      const res = await t.request({ method: "GET", url: "/health" });
      expect(res.statusCode).toBe(200);
      expect(res.headers["content-type"]).toMatch(/^application\/json/);
      expect(res.json()).toEqual({ status: "ok" });
    });

    it("GET /ready → 200 while the database answers", async () => {
      const res = await t.request({ method: "GET", url: "/ready" });
      expect(res.statusCode).toBe(200);
    });

    it("GET /openapi.json → OpenAPI 3.1.0 with the v1 paths, without auth", async () => {
      const res = await t.request({ method: "GET", url: "/openapi.json" });
      expect(res.statusCode).toBe(200);
      const doc = res.json();
      expect(doc.openapi).toBe("3.1.0");
      expect(Object.keys(doc.paths)).toEqual(
        expect.arrayContaining(["/api/v1/payments", "/api/v1/keys", "/api/v1/workspaces"]),
      );
      expect(doc.paths["/api/v1/payments"]).toHaveProperty("post");
      expect(doc.paths["/api/v1/keys"]).toHaveProperty("post");
      expect(doc.paths["/api/v1/keys"]).toHaveProperty("get");
      expect(doc.paths["/api/v1/workspaces"]).toHaveProperty("post");
      // Merchant endpoints live under /api/v1 (part 9); only the families part 9 puts under /api
      // without a version (inbound provider webhooks, dashboard, agents, wallets) may appear there.
      const unversioned = Object.keys(doc.paths).filter(
        (p) => p.startsWith("/api/") && !p.startsWith("/api/v1/"),
      );
      for (const path of unversioned) {
        expect(path).toMatch(/^\/api\/(webhooks\/card|workspaces\/smart-wallet|agents|wallets)(\/|$)/);
      }
    });

    it("GET /docs → 200 HTML without auth", async () => {
      let res = await t.request({ method: "GET", url: "/docs" });
      if (res.statusCode >= 300 && res.statusCode < 400 && typeof res.headers.location === "string") {
        res = await t.request({ method: "GET", url: res.headers.location });
      }
      expect(res.statusCode).toBe(200);
      expect(res.headers["content-type"]).toMatch(/^text\/html/);
      expect(res.body).toMatch(/<html/i);
    });
  });
});

describe("rate limits (D9)", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ RATE_LIMIT_SANDBOX: "5", RATE_LIMIT_LIVE: "7" });
  });
  afterAll(async () => t.close());

  const nowSeconds = () => Date.now() / 1000;

  function expectRateLimitHeaders(res: LightMyRequestResponse, limit: number, remaining: number): void {
    expect(res.headers["x-ratelimit-limit"]).toBe(String(limit));
    expect(res.headers["x-ratelimit-remaining"]).toBe(String(remaining));
    const reset = Number(res.headers["x-ratelimit-reset"]);
    expect(Number.isInteger(reset), `reset ${res.headers["x-ratelimit-reset"]}`).toBe(true);
    const now = nowSeconds();
    // A Unix timestamp in seconds within the next window (60 s), rounded up.
    expect(reset).toBeGreaterThanOrEqual(Math.floor(now));
    expect(reset).toBeLessThanOrEqual(Math.ceil(now) + 61);
  }

  const noRateLimitHeaders = (res: LightMyRequestResponse) =>
    Object.keys(res.headers).filter((h) => h.startsWith("x-ratelimit") || h === "retry-after");

  it("labels authenticated responses, refuses the 6th sandbox request with 429 and Retry-After", async () => {
    const ws = await createWorkspace(t);
    // Request 1 creates a second sandbox key of the same workspace (it counts against the first key).
    const created = await t.request({
      method: "POST",
      url: "/api/v1/keys",
      headers: bearer(ws.testKey),
      payload: { environment: "sandbox", name: "second" },
    });
    expect(created.statusCode).toBe(201);
    expectRateLimitHeaders(created, 5, 4);
    const secondKey: string = created.json().apiKey.key;

    const resets = new Set<string>();
    resets.add(String(created.headers["x-ratelimit-reset"]));
    for (let i = 2; i <= 5; i++) {
      const res = await t.request({ method: "GET", url: "/api/v1/keys", headers: bearer(ws.testKey) });
      expect(res.statusCode, `request ${i}`).toBe(200);
      expectRateLimitHeaders(res, 5, 5 - i);
      resets.add(String(res.headers["x-ratelimit-reset"]));
    }
    // One fixed window: the reset time does not move (allowing one second of rounding).
    const resetValues = [...resets].map(Number);
    expect(Math.max(...resetValues) - Math.min(...resetValues)).toBeLessThanOrEqual(1);

    const sixth = await t.request({ method: "GET", url: "/api/v1/keys", headers: bearer(ws.testKey) });
    expect(sixth.statusCode).toBe(429);
    expect(sixth.headers["content-type"]).toMatch(/^application\/json/);
    expect(sixth.json()).toEqual({ error: "Rate limit exceeded" });
    expectRateLimitHeaders(sixth, 5, 0);
    const retryAfter = Number(sixth.headers["retry-after"]);
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);

    // Still limited: a refused write creates nothing.
    const seventh = await t.request({
      method: "POST",
      url: "/api/v1/payments",
      headers: bearer(ws.testKey),
      payload: { tokenSymbol: "USDC", amount: "1" },
    });
    expect(seventh.statusCode).toBe(429);
    const payments = await t.database.db
      .selectFrom("payments")
      .select("id")
      .where("workspace_id", "=", ws.id)
      .execute();
    expect(payments).toHaveLength(0);

    // The second key of the same workspace has its own budget.
    const other = await t.request({ method: "GET", url: "/api/v1/keys", headers: bearer(secondKey) });
    expect(other.statusCode).toBe(200);
    expectRateLimitHeaders(other, 5, 4);

    // The live key of the same workspace is untouched, with the live limit.
    const live = await t.request({ method: "GET", url: "/api/v1/keys", headers: bearer(ws.liveKey) });
    expect(live.statusCode).toBe(200);
    expectRateLimitHeaders(live, 7, 6);
  });

  it("live keys get the live limit (7) and their 8th request is refused", async () => {
    const ws = await createWorkspace(t);
    for (let i = 1; i <= 7; i++) {
      const res = await t.request({
        method: "GET",
        url: `/api/v1/workspaces/${ws.id}`,
        headers: bearer(ws.liveKey),
      });
      expect(res.statusCode, `request ${i}`).toBe(200);
      expectRateLimitHeaders(res, 7, 7 - i);
    }
    const eighth = await t.request({
      method: "GET",
      url: `/api/v1/workspaces/${ws.id}`,
      headers: bearer(ws.liveKey),
    });
    expect(eighth.statusCode).toBe(429);
    expect(eighth.json()).toEqual({ error: "Rate limit exceeded" });
    expect(eighth.headers["retry-after"]).toBeDefined();
  });

  it("keys of different workspaces have separate budgets", async () => {
    const a = await createWorkspace(t);
    const b = await createWorkspace(t);
    for (let i = 0; i < 5; i++)
      await t.request({ method: "GET", url: "/api/v1/keys", headers: bearer(a.testKey) });
    expect(
      (await t.request({ method: "GET", url: "/api/v1/keys", headers: bearer(a.testKey) })).statusCode,
    ).toBe(429);
    const resB = await t.request({ method: "GET", url: "/api/v1/keys", headers: bearer(b.testKey) });
    expect(resB.statusCode).toBe(200);
    expectRateLimitHeaders(resB, 5, 4);
  });

  it("error responses to key-authenticated requests carry the headers too (404)", async () => {
    const ws = await createWorkspace(t);
    const notFound = await t.request({
      method: "GET",
      url: "/api/v1/payments/00000000-0000-4000-8000-000000000000",
      headers: bearer(ws.testKey),
    });
    expect(notFound.statusCode).toBe(404);
    expectRateLimitHeaders(notFound, 5, 4);
  });

  it("body errors (400 invalid JSON, 415, 413) to a key-authenticated request are labelled and counted", async () => {
    const ws = await createWorkspace(t);
    const sends: Array<[string, Parameters<TestApp["request"]>[0]]> = [
      [
        "400 invalid JSON",
        {
          method: "POST",
          url: "/api/v1/payments",
          headers: { ...bearer(ws.testKey), "content-type": "application/json" },
          payload: "{oops",
        },
      ],
      [
        "415 text/plain",
        {
          method: "POST",
          url: "/api/v1/payments",
          headers: { ...bearer(ws.testKey), "content-type": "text/plain" },
          payload: "x",
        },
      ],
      [
        "413 too large",
        {
          method: "POST",
          url: "/api/v1/payments",
          headers: { ...bearer(ws.testKey), "content-type": "application/json" },
          payload: JSON.stringify({ description: "z".repeat(1024 * 1024 + 1) }),
        },
      ],
    ];
    const unlabelled: string[] = [];
    for (const [label, request] of sends) {
      const res = await t.request(request);
      expect(res.statusCode, label).toBe(Number(label.slice(0, 3)));
      if (res.headers["x-ratelimit-limit"] !== "5") unlabelled.push(label);
    }
    expect(unlabelled, "D9: headers on every authenticated response").toEqual([]);
    // They count against the key's budget: 3 used, so the next request has 1 left.
    const next = await t.request({ method: "GET", url: "/api/v1/keys", headers: bearer(ws.testKey) });
    expectRateLimitHeaders(next, 5, 1);
  });

  it("admin-secret requests, unauthenticated requests and /health carry no rate-limit headers", async () => {
    const ws = await createWorkspace(t);
    // Far more admin requests than any key budget: never limited.
    for (let i = 0; i < 8; i++) {
      const res = await t.request({
        method: "GET",
        url: `/api/v1/workspaces/${ws.id}`,
        headers: bearer(ADMIN_SECRET),
      });
      expect(res.statusCode).toBe(200);
      expect(noRateLimitHeaders(res)).toEqual([]);
    }
    const created = await t.request({
      method: "POST",
      url: "/api/v1/workspaces",
      headers: bearer(ADMIN_SECRET),
      payload: { name: "Admin made" },
    });
    expect(created.statusCode).toBe(201);
    expect(noRateLimitHeaders(created)).toEqual([]);

    for (let i = 0; i < 8; i++) {
      const health = await t.request({ method: "GET", url: "/health" });
      expect(health.statusCode).toBe(200);
      expect(noRateLimitHeaders(health)).toEqual([]);
    }
    const unauthenticated = await t.request({ method: "GET", url: "/api/v1/keys" });
    expect(unauthenticated.statusCode).toBe(401);
    expect(noRateLimitHeaders(unauthenticated)).toEqual([]);
    const badKey = await t.request({
      method: "GET",
      url: "/api/v1/keys",
      headers: bearer(`svc_test_${"Q".repeat(40)}`),
    });
    expect(badKey.statusCode).toBe(401);
    expect(noRateLimitHeaders(badKey)).toEqual([]);

    // The admin traffic did not consume the workspace keys' budget.
    const keyRes = await t.request({ method: "GET", url: "/api/v1/keys", headers: bearer(ws.testKey) });
    expectRateLimitHeaders(keyRes, 5, 4);
  });
});
