import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, createWorkspace, freshDatabaseUrl, startTestApp, type TestApp } from "../support/app.ts";
import { type ServiceProcess, startService, stopAllServices } from "../support/service-process.ts";

// Every request has an id: the client's X-Request-Id when it is a safe token
// (/^[A-Za-z0-9._:-]{1,128}$/), a new UUID otherwise; it is echoed in the response's X-Request-Id
// and carried by the log lines written while the request is handled, by the services' logger as
// well as Fastify's own request lines (the service as a real process at LOG_LEVEL=info).

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const ADMIN = "request-id-admin-secret-0123456789";
const FAILURE_ADDRESS = "0x000000000000000000000000000000000000dEaD";
const NO_ADMIN_EMAIL = "payouts paused; the workspace has no adminEmail to notify";

describe("X-Request-Id on the response", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  const idOf = async (headers: Record<string, string>, url = "/health") => {
    const res = await t.request({ method: "GET", url, headers });
    const id = res.headers["x-request-id"];
    expect(typeof id, `${url} ${JSON.stringify(headers)}`).toBe("string");
    return id as string;
  };

  it("echoes a safe id as given", async () => {
    const safe = [
      "abc",
      "a",
      "0af7651916cd43dd8448eb211c80319c",
      "lb-7f3a.trace:42_x",
      "Root=1-67891233-abcdef012345678912345678".replace("=", ":"),
      "x".repeat(128),
      "A-Z.a-z:0-9_",
    ];
    for (const id of safe) expect(await idOf({ "x-request-id": id })).toBe(id);
  });

  it("replaces an unsafe id with a new UUID", async () => {
    const unsafe = [
      "has spaces in it",
      "x".repeat(129),
      "a".repeat(200),
      "<script>alert(1)</script>",
      "id<>",
      'quote"d',
      "semi;colon",
      "slash/id",
      "",
      "ünïcode",
      "tab\tid",
    ];
    const seen = new Set<string>();
    for (const id of unsafe) {
      const got = await idOf({ "x-request-id": id });
      expect(got, JSON.stringify(id)).toMatch(UUID);
      expect(got).not.toBe(id);
      seen.add(got);
    }
    expect(seen.size).toBe(unsafe.length);
  });

  it("generates a UUID when none is given, a different one per request", async () => {
    const a = await idOf({});
    const b = await idOf({});
    expect(a).toMatch(UUID);
    expect(b).toMatch(UUID);
    expect(a).not.toBe(b);
  });

  it("is echoed on every kind of answer: 201, 401, 404 of a route and of an unknown path, 400", async () => {
    const ws = await createWorkspace(t);
    const cases: Array<{
      status: number;
      method: "GET" | "POST";
      url: string;
      headers?: Record<string, string>;
      payload?: unknown;
    }> = [
      {
        status: 201,
        method: "POST",
        url: "/api/v1/payments",
        headers: bearer(ws.testKey),
        payload: { tokenSymbol: "USDC", amount: "3" },
      },
      { status: 401, method: "GET", url: "/api/v1/payments" },
      {
        status: 404,
        method: "GET",
        url: "/api/v1/payments/00000000-0000-4000-8000-000000000000",
        headers: bearer(ws.testKey),
      },
      { status: 404, method: "GET", url: "/no/such/route" },
      {
        status: 400,
        method: "POST",
        url: "/api/v1/payments",
        headers: bearer(ws.testKey),
        payload: { amount: "x" },
      },
      { status: 200, method: "GET", url: "/ready" },
    ];
    for (const [i, c] of cases.entries()) {
      const id = `case-${i}.${c.status}`;
      const res = await t.request({
        method: c.method,
        url: c.url,
        headers: { ...c.headers, "x-request-id": id },
        ...(c.payload === undefined ? {} : { payload: c.payload as Record<string, unknown> }),
      });
      expect(res.statusCode, `${c.method} ${c.url}: ${res.body}`).toBe(c.status);
      expect(res.headers["x-request-id"], `${c.method} ${c.url}`).toBe(id);
    }
  });

  // Fastify answers these before routing, where no hook runs: the app adds the id itself.
  it("is echoed on a URL Fastify refuses before routing (malformed %-escape, long segment)", async () => {
    const ws = await createWorkspace(t);
    for (const [i, url] of ["/api/v1/payments/%zz", `/api/v1/payments/${"a".repeat(101)}`].entries()) {
      const id = `framework-error-${i}`;
      const res = await t.request({
        method: "GET",
        url,
        headers: { ...bearer(ws.testKey), "x-request-id": id },
      });
      expect(res.statusCode, url).toBe(400);
      expect(res.headers["x-request-id"], url).toBe(id);
    }
  });
});

describe("the request id on the log lines of the service as a process", () => {
  let service: ServiceProcess;
  let dataDir: string;
  let database: Awaited<ReturnType<typeof freshDatabaseUrl>>;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "request-id-"));
    database = await freshDatabaseUrl();
    service = await startService({
      DATA_DIR: dataDir,
      ADMIN_SECRET: ADMIN,
      LOG_LEVEL: "info",
      RATE_LIMIT_SANDBOX: "100000",
      ...(database ? { DATABASE_URL: database.url, MASTER_KEY: randomBytes(32).toString("hex") } : {}),
    });
  }, 120_000);

  afterAll(async () => {
    await stopAllServices();
    await database?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  async function call(method: string, path: string, key: string, body?: unknown, requestId?: string) {
    const res = await fetch(`${service.baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...(requestId === undefined ? {} : { "x-request-id": requestId }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(15_000),
    });
    return {
      status: res.status,
      json: (await res.json()) as Record<string, unknown>,
      id: res.headers.get("x-request-id"),
    };
  }

  /** The process's log lines (JSON, one a line) naming `text` anywhere, raw and parsed. */
  function linesWith(text: string): Array<{ raw: string; line: Record<string, unknown> }> {
    return service
      .stdout()
      .split("\n")
      .filter((raw) => raw.includes(text))
      .map((raw) => ({ raw, line: JSON.parse(raw) as Record<string, unknown> }));
  }

  /** Bounded wait for a log line (pino writes asynchronously to the pipe). */
  async function waitForLine(what: string, probe: (line: Record<string, unknown>) => boolean) {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const found = service
        .stdout()
        .split("\n")
        .filter((raw) => raw.startsWith("{"))
        .map((raw) => JSON.parse(raw) as Record<string, unknown>)
        .filter(probe);
      if (found.length > 0) return found;
      if (Date.now() > deadline) throw new Error(`no log line ${what}\n${service.output()}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  it("a service's own line written during the request carries reqId; Fastify's lines carry it once", async () => {
    const created = await call("POST", "/api/v1/workspaces", ADMIN, {
      name: "Request ids",
      settlementAddress: "0x1111111111111111111111111111111111111111",
    });
    expect(created.status).toBe(201);
    const workspace = created.json.workspace as { id: string };
    const key = (created.json.apiKeys as { test: { key: string } }).test.key;
    expect(
      (await call("POST", "/api/v1/sandbox/faucet", key, { tokenSymbol: "USDC", amount: "10" })).status,
    ).toBe(200);
    const failing = { tokenSymbol: "USDC", amount: "1", destinationAddress: FAILURE_ADDRESS };
    expect((await call("POST", "/api/v1/payouts", key, failing, "first-failure")).status).toBe(500);
    expect((await call("POST", "/api/v1/payouts", key, failing, "second-failure")).status).toBe(500);
    const id = `trip-${randomBytes(6).toString("hex")}.breaker:3`;
    const third = await call("POST", "/api/v1/payouts", key, failing, id);
    expect(third.status).toBe(503);
    expect(third.id).toBe(id);

    // The payouts code's warning (no Fastify request logger involved) names the request.
    const [paused] = await waitForLine(NO_ADMIN_EMAIL, (l) => l.msg === NO_ADMIN_EMAIL);
    expect(paused).toMatchObject({ reqId: id, workspaceId: workspace.id, level: 40 });
    expect(await waitForLine("paused, once", (l) => l.msg === NO_ADMIN_EMAIL)).toHaveLength(1);

    // Fastify's own lines of that request carry the same id, once each.
    await waitForLine("request completed", (l) => l.msg === "request completed" && l.reqId === id);
    const ofRequest = linesWith(id);
    expect(ofRequest.map(({ line }) => line.msg)).toEqual([
      "incoming request",
      NO_ADMIN_EMAIL,
      "request completed",
    ]);
    for (const { raw, line } of ofRequest) {
      expect(line.reqId).toBe(id);
      expect(raw.match(/"reqId"/g), raw).toHaveLength(1);
    }
    const completed = ofRequest[2]?.line as { res?: { statusCode?: number } };
    expect(completed.res?.statusCode).toBe(503);

    // The other requests' lines name their own ids, never this one.
    for (const other of ["first-failure", "second-failure"]) {
      const lines = linesWith(`"reqId":"${other}"`).map(({ line }) => line.msg);
      expect(lines).toContain("incoming request");
      expect(lines).toContain("request completed");
      expect(lines).not.toContain(NO_ADMIN_EMAIL);
    }
  });

  it("a line written outside any request has no reqId; a request without X-Request-Id logs its UUID", async () => {
    const [ready] = await waitForLine(
      "service ready",
      (l) => typeof l.msg === "string" && l.msg.startsWith("service ready"),
    );
    expect(ready).not.toHaveProperty("reqId");

    const res = await fetch(`${service.baseUrl}/health`, { signal: AbortSignal.timeout(10_000) });
    const id = res.headers.get("x-request-id") ?? "";
    expect(id).toMatch(UUID);
    await waitForLine("its request completed", (l) => l.msg === "request completed" && l.reqId === id);
    const lines = linesWith(id);
    expect(lines.map(({ line }) => line.msg)).toEqual(["incoming request", "request completed"]);
    for (const { raw } of lines) expect(raw.match(/"reqId"/g)).toHaveLength(1);
  });
});
