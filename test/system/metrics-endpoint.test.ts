import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.ts";
import { freePort } from "../../src/devnet/chain.ts";
import { bearer, createWorkspace, freshDatabaseUrl, startTestApp, type TestApp } from "../support/app.ts";
import { scrape, scrapeUntil, scrapeUrl } from "../support/prometheus.ts";
import {
  callService,
  type ServiceProcess,
  startService,
  stopAllServices,
  stopService,
} from "../support/service-process.ts";

// Where the metrics are served: GET /metrics on the service's port to the bearer METRICS_TOKEN
// (401 otherwise, wrong tokens counted toward the address's failed-authentication limit), nowhere when neither METRICS_TOKEN nor METRICS_PORT is set (404, nothing
// collected), and, with METRICS_PORT, on a listener of its own on 127.0.0.1 that needs no token
// (the service as a real process), while the main port has no /metrics.

const TOKEN = "metrics-endpoint-token-0123456789";
const PROM_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";
const ADMIN = "metrics-endpoint-admin-secret-0123456789";

let t: TestApp;
const read = () => scrape(t, TOKEN);

beforeAll(async () => {
  t = await startTestApp({ METRICS_TOKEN: TOKEN });
});

afterAll(async () => {
  await t?.close();
});

describe("GET /metrics", () => {
  const extraApps: TestApp[] = [];
  afterEach(async () => {
    for (const app of extraApps.splice(0)) await app.close();
  });

  it("answers 401 without the bearer METRICS_TOKEN or with a wrong one, 200 in the text format with it", async () => {
    const refused = [
      {},
      { authorization: `Bearer ${TOKEN}x` },
      { authorization: "Bearer wrong-token-0123456789abcdef" },
      { authorization: `Basic ${TOKEN}` },
      { authorization: TOKEN },
      { authorization: "Bearer " },
    ];
    for (const headers of refused) {
      const res = await t.request({ method: "GET", url: "/metrics", headers });
      expect(res.statusCode, JSON.stringify(headers)).toBe(401);
      expect(res.headers["www-authenticate"]).toBe("Bearer");
      expect(res.body).not.toContain("process_cpu_seconds_total");
    }
    const res = await t.request({ method: "GET", url: "/metrics", headers: bearer(TOKEN) });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toBe(PROM_CONTENT_TYPE);
    const s = await read();
    // prom-client's default process metrics, and every metric the service declares.
    expect(s.find("process_cpu_seconds_total")).toBeDefined();
    for (const name of [
      "http_request_duration_seconds",
      "payment_transitions_total",
      "payouts_total",
      "transfers_total",
      "circuit_breaker_trips_total",
      "workspaces_paused",
      "webhook_delivery_attempts_total",
      "webhook_delivery_attempt_duration_seconds",
      "webhook_deliveries_due",
      "webhook_oldest_due_delivery_age_seconds",
      "chain_watcher_lag_blocks",
      "chain_watcher_last_tick_age_seconds",
      "gas_topups_total",
      "db_pool_connections",
      "db_pool_waiting",
    ]) {
      expect(s.text, name).toMatch(new RegExp(`^# TYPE ${name} `, "m"));
    }
  });

  it("counts wrong tokens toward the address's failed-authentication limit: 20 are 401, then 429, the right one too", async () => {
    const metricsFrom = (remoteAddress: string, authorization?: string) =>
      t.request({
        method: "GET",
        url: "/metrics",
        remoteAddress,
        headers: authorization ? { authorization } : {},
      });
    const guesser = "203.0.113.150";
    for (let i = 0; i < 20; i++) {
      const res = await metricsFrom(guesser, `Bearer wrong-metrics-token-${i}`);
      expect(res.statusCode, `guess ${i + 1}`).toBe(401);
    }
    const limited = await metricsFrom(guesser, "Bearer wrong-metrics-token-20");
    expect(limited.statusCode).toBe(429);
    expect(Number(limited.headers["retry-after"])).toBeGreaterThan(0);
    expect(limited.json()).toEqual({
      error: "Too many failed authentication attempts from this address: try again after Retry-After seconds",
    });
    // The right token is not checked from there (a different answer would confirm a guess)…
    const right = await metricsFrom(guesser, `Bearer ${TOKEN}`);
    expect(right.statusCode).toBe(429);
    expect(right.body).not.toContain("process_cpu_seconds_total");
    // …and works from any other address; no credential at all is not a guess.
    expect((await metricsFrom("203.0.113.151", `Bearer ${TOKEN}`)).statusCode).toBe(200);
    for (let i = 0; i < 25; i++) expect((await metricsFrom("203.0.113.152")).statusCode).toBe(401);
    expect((await metricsFrom("203.0.113.152", `Bearer ${TOKEN}`)).statusCode).toBe(200);
  });

  it("shares the limit with API keys: wrong keys and wrong metrics tokens from one address add up", async () => {
    const address = "203.0.113.160";
    for (let i = 0; i < 10; i++) {
      const key = await t.request({
        method: "GET",
        url: "/api/v1/keys",
        remoteAddress: address,
        headers: bearer(`svc_test_${String(i).padStart(40, "Q")}`),
      });
      expect(key.statusCode).toBe(401);
      const metrics = await t.request({
        method: "GET",
        url: "/metrics",
        remoteAddress: address,
        headers: bearer(`wrong-metrics-token-${i}`),
      });
      expect(metrics.statusCode).toBe(401);
    }
    const next = await t.request({
      method: "GET",
      url: "/api/v1/keys",
      remoteAddress: address,
      headers: bearer(`svc_test_${"Z".repeat(40)}`),
    });
    expect(next.statusCode).toBe(429);
  });

  it("is 404 when neither METRICS_TOKEN nor METRICS_PORT is set, and on the main port with METRICS_PORT only", async () => {
    const off = await startTestApp();
    extraApps.push(off);
    for (const headers of [{}, bearer(TOKEN)]) {
      expect((await off.request({ method: "GET", url: "/metrics", headers })).statusCode).toBe(404);
    }
    expect(off.app.metrics.enabled).toBe(false);
    // Nothing is collected: requests and payments leave no sample behind.
    const ws = await createWorkspace(off);
    const created = await off.request({
      method: "POST",
      url: "/api/v1/payments",
      headers: bearer(ws.testKey),
      payload: { tokenSymbol: "USDC", amount: "1" },
    });
    expect(created.statusCode).toBe(201);
    const registry = off.app.metrics.registry;
    for (const name of ["http_request_duration_seconds", "payment_transitions_total"]) {
      expect((await registry.getSingleMetric(name)?.get())?.values, name).toEqual([]);
    }
    expect(await registry.getSingleMetric("process_cpu_seconds_total")).toBeUndefined();

    const portOnly = await startTestApp({ METRICS_PORT: "9" });
    extraApps.push(portOnly);
    expect(portOnly.app.metrics.enabled).toBe(true);
    expect((await portOnly.request({ method: "GET", url: "/metrics" })).statusCode).toBe(404);
    expect(
      (await portOnly.request({ method: "GET", url: "/metrics", headers: bearer(TOKEN) })).statusCode,
    ).toBe(404);
  });
});

describe("metrics configuration", () => {
  const base = { ADMIN_SECRET: ADMIN, PUBLIC_BASE_URL: "http://pay.test" };

  it("refuses a METRICS_TOKEN under 16 characters and a METRICS_PORT out of range", () => {
    expect(() => loadConfig({ ...base, METRICS_TOKEN: "short-token" })).toThrow(ConfigError);
    expect(() => loadConfig({ ...base, METRICS_TOKEN: "x".repeat(15) })).toThrow(
      /METRICS_TOKEN must be at least 16/,
    );
    for (const port of ["0", "65536", "-1", "abc"]) {
      expect(() => loadConfig({ ...base, METRICS_PORT: port }), port).toThrow(ConfigError);
    }
  });

  it("binds the listener to loopback unless METRICS_HOST says otherwise; off when neither is set", () => {
    expect(loadConfig(base).metrics).toEqual({ token: undefined, port: undefined, host: "127.0.0.1" });
    expect(loadConfig({ ...base, METRICS_PORT: "9464" }).metrics).toEqual({
      token: undefined,
      port: 9464,
      host: "127.0.0.1",
    });
    expect(loadConfig({ ...base, METRICS_TOKEN: TOKEN, METRICS_HOST: "::1" }).metrics).toEqual({
      token: TOKEN,
      port: undefined,
      host: "::1",
    });
  });
});

describe("the metrics listener of the service as a process (METRICS_PORT)", () => {
  let service: ServiceProcess;
  let metricsUrl: string;
  let dataDir: string;
  let database: Awaited<ReturnType<typeof freshDatabaseUrl>>;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "metrics-listener-"));
    database = await freshDatabaseUrl();
    const metricsPort = await freePort();
    metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    service = await startService({
      DATA_DIR: dataDir,
      ADMIN_SECRET: ADMIN,
      METRICS_PORT: String(metricsPort),
      LOG_LEVEL: "info",
      ...(database ? { DATABASE_URL: database.url, MASTER_KEY: randomBytes(32).toString("hex") } : {}),
    });
  }, 120_000);

  afterAll(async () => {
    await stopAllServices();
    await database?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it("answers GET /metrics on 127.0.0.1 without a token, with the process metrics", async () => {
    const res = await fetch(metricsUrl, { signal: AbortSignal.timeout(10_000) });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe(PROM_CONTENT_TYPE);
    const s = await scrapeUrl(metricsUrl);
    for (const name of [
      "process_cpu_seconds_total",
      "process_resident_memory_bytes",
      "nodejs_heap_size_used_bytes",
    ]) {
      expect(s.find(name)?.value, name).toBeGreaterThan(0);
    }
    expect(s.find("webhook_deliveries_due")?.value).toBe(0);
    // The start-up line names where the metrics are (loopback: METRICS_HOST's default).
    const ready = service
      .stdout()
      .split("\n")
      .filter((line) => line.includes("service ready"))
      .map((line) => JSON.parse(line) as { metrics?: string });
    expect(ready.map((line) => line.metrics)).toEqual([metricsUrl]);
  });

  it("serves /metrics only: other paths and methods are 404 there", async () => {
    const base = metricsUrl.replace(/\/metrics$/, "");
    for (const [method, path] of [
      ["GET", "/"],
      ["GET", "/health"],
      ["GET", "/metrics/extra"],
      ["GET", "/api/v1/payments"],
      ["POST", "/metrics"],
    ] as const) {
      const res = await fetch(`${base}${path}`, { method, signal: AbortSignal.timeout(10_000) });
      expect(res.status, `${method} ${path}`).toBe(404);
      await res.arrayBuffer();
    }
    expect((await fetch(`${metricsUrl}?x=1`, { signal: AbortSignal.timeout(10_000) })).status).toBe(200);
  });

  it("has no /metrics on the main port (no METRICS_TOKEN), with or without a bearer", async () => {
    expect((await callService(service, "GET", "/metrics")).status).toBe(404);
    expect((await callService(service, "GET", "/metrics", TOKEN)).status).toBe(404);
    expect((await callService(service, "GET", "/metrics", ADMIN)).status).toBe(404);
  });

  it("counts what the main port did: a sandbox payment and its POST", async () => {
    const before = await scrapeUrl(metricsUrl);
    const ws = await callService<{ apiKeys: { test: { key: string } } }>(
      service,
      "POST",
      "/api/v1/workspaces",
      ADMIN,
      {
        name: "Metrics listener",
        settlementAddress: "0x1111111111111111111111111111111111111111",
      },
    );
    expect(ws.status).toBe(201);
    const created = await callService(service, "POST", "/api/v1/payments", ws.json.apiKeys.test.key, {
      tokenSymbol: "USDC",
      amount: "10",
    });
    expect(created.status).toBe(201);
    const post = { method: "POST", route: "/api/v1/payments", status_class: "2xx" };
    const count = "http_request_duration_seconds_count";
    const after = await scrapeUntil(
      () => scrapeUrl(metricsUrl),
      "the POST counted",
      (s) => s.count(count, post) > before.count(count, post),
    );
    expect(after.count(count, post) - before.count(count, post)).toBe(1);
    for (const status of ["pending", "forwarded"]) {
      const labels = { rail: "crypto", environment: "sandbox", status };
      expect(
        after.count("payment_transitions_total", labels) - before.count("payment_transitions_total", labels),
      ).toBe(1);
    }
  });

  it("closes the listener on SIGTERM and exits 0", async () => {
    await stopService(service.child, "SIGTERM");
    expect(service.child.exitCode).toBe(0);
    await expect(fetch(metricsUrl, { signal: AbortSignal.timeout(5_000) })).rejects.toThrow();
  });
});
