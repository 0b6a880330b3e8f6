import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { type Labels, moved, type Scrape, scrape, scrapeUntil } from "../support/prometheus.ts";

// The metrics of the real app on a real database (PGlite, or PostgreSQL with DATABASE_URL): the
// counters move by exactly what a test did, scraped before and after (payments, HTTP requests,
// sandbox payouts and the circuit breaker); no label names a tenant. Webhooks:
// metrics-webhooks.test.ts; the live chain: metrics-chain.test.ts; /metrics itself (its token,
// the separate listener): metrics-endpoint.test.ts.

const TOKEN = "metrics-test-token-0123456789abcdef";
const FAILURE_ADDRESS = "0x000000000000000000000000000000000000dEaD";
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;
const ADDRESS = /0x[0-9a-f]{40}/i;

let t: TestApp;
/** Every workspace id, payment id, payout id and address the tests made: never a label value. */
const tenantValues = new Set<string>();
const read = () => scrape(t, TOKEN);
function addTenant(value: unknown): void {
  if (typeof value !== "string" || value.length < 16)
    throw new Error(`not an id or address: ${String(value)}`);
  tenantValues.add(value.toLowerCase());
}

beforeAll(async () => {
  t = await startTestApp({ METRICS_TOKEN: TOKEN, RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" });
});

afterAll(async () => {
  await t?.close();
});

const delta = (before: Scrape, after: Scrape, name: string, labels: Labels) =>
  after.count(name, labels) - before.count(name, labels);

const httpCount = (method: string, route: string, statusClass: string): Labels => ({
  method,
  route,
  status_class: statusClass,
});

async function workspace(body: Record<string, unknown> = {}): Promise<CreatedWorkspace> {
  const ws = await createWorkspace(t, body);
  addTenant(ws.id);
  addTenant(ws.eoaAddress);
  return ws;
}

async function sandboxPayment(ws: CreatedWorkspace): Promise<{ id: string; status: string }> {
  const res = await t.request({
    method: "POST",
    url: "/api/v1/payments",
    headers: bearer(ws.testKey),
    payload: { tokenSymbol: "USDC", amount: "25" },
  });
  expect(res.statusCode, res.body).toBe(201);
  const payment = res.json().payment as { id: string; status: string };
  addTenant(payment.id);
  return payment;
}

function post(key: string, url: string, payload?: Record<string, unknown>) {
  return t.request({ method: "POST", url, headers: bearer(key), ...(payload ? { payload } : {}) });
}

describe("payments and HTTP requests", () => {
  it("a sandbox crypto payment: pending +1 and forwarded +1, its POST counted once by route pattern", async () => {
    const ws = await workspace();
    const before = await read();
    const payment = await sandboxPayment(ws);
    expect(payment.status).toBe("forwarded");
    const post = httpCount("POST", "/api/v1/payments", "2xx");
    const after = await scrapeUntil(
      read,
      "the POST in the histogram",
      (s) => delta(before, s, "http_request_duration_seconds_count", post) >= 1,
    );

    expect(moved(before, after, "payment_transitions_total")).toEqual({
      "environment=sandbox,rail=crypto,status=pending": 1,
      "environment=sandbox,rail=crypto,status=forwarded": 1,
    });
    expect(delta(before, after, "http_request_duration_seconds_count", post)).toBe(1);
    // The histogram's buckets saw the same request (le="+Inf" equals the count).
    expect(delta(before, after, "http_request_duration_seconds_bucket", { ...post, le: "+Inf" })).toBe(1);
    // Nothing else was answered meanwhile but the scrapes themselves.
    const requests = moved(before, after, "http_request_duration_seconds_count");
    expect(Object.keys(requests).filter((k) => !k.includes("route=/metrics,"))).toEqual([
      "method=POST,route=/api/v1/payments,status_class=2xx",
    ]);
  });

  it("counts a read by its route pattern (never the id in the URL), and an unknown path as unmatched 4xx", async () => {
    const ws = await workspace();
    const payment = await sandboxPayment(ws);
    const before = await read();
    const got = await t.request({
      method: "GET",
      url: `/api/v1/payments/${payment.id}`,
      headers: bearer(ws.testKey),
    });
    expect(got.statusCode).toBe(200);
    const missing = randomUUID();
    const notFound = await t.request({
      method: "GET",
      url: `/api/v1/payments/${missing}`,
      headers: bearer(ws.testKey),
    });
    expect(notFound.statusCode).toBe(404);
    const unknown = await t.request({ method: "GET", url: `/no/such/path/${payment.id}` });
    expect(unknown.statusCode).toBe(404);

    const reads = [
      httpCount("GET", "/api/v1/payments/:id", "2xx"),
      httpCount("GET", "/api/v1/payments/:id", "4xx"),
      httpCount("GET", "unmatched", "4xx"),
    ];
    const count = "http_request_duration_seconds_count";
    const after = await scrapeUntil(read, "the three reads", (s) =>
      reads.every((labels) => delta(before, s, count, labels) >= 1),
    );
    for (const labels of reads) expect(delta(before, after, count, labels), JSON.stringify(labels)).toBe(1);
    // No route label is a path with an id in it; the ids appear nowhere in the scrape.
    for (const sample of after.all("http_request_duration_seconds_count")) {
      expect(sample.labels.route === "unmatched" || sample.labels.route?.startsWith("/")).toBe(true);
      expect(sample.labels.route).not.toMatch(UUID);
    }
    expect(after.text).not.toContain(payment.id);
    expect(after.text).not.toContain(missing);
    expect(after.text).not.toContain("/no/such/path");
  });

  it("a create replayed with the same Idempotency-Key counts its transitions once", async () => {
    const ws = await workspace();
    const before = await read();
    const key = `replay-${randomUUID()}`;
    const bodies: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await t.request({
        method: "POST",
        url: "/api/v1/payments",
        headers: { ...bearer(ws.testKey), "idempotency-key": key },
        payload: { tokenSymbol: "USDC", amount: "7" },
      });
      expect(res.statusCode, res.body).toBe(201);
      bodies.push(res.json().payment.id);
    }
    expect(new Set(bodies).size).toBe(1);
    addTenant(bodies[0]);
    const post = httpCount("POST", "/api/v1/payments", "2xx");
    const after = await scrapeUntil(
      read,
      "the three POSTs",
      (s) => delta(before, s, "http_request_duration_seconds_count", post) >= 3,
    );
    expect(moved(before, after, "payment_transitions_total")).toEqual({
      "environment=sandbox,rail=crypto,status=pending": 1,
      "environment=sandbox,rail=crypto,status=forwarded": 1,
    });
    expect(delta(before, after, "http_request_duration_seconds_count", post)).toBe(3);
  });

  // Fastify answers these before routing, where no hook runs: the app counts them itself.
  it("counts a URL Fastify refuses before routing (malformed %-escape) as unmatched 4xx", async () => {
    const before = await read();
    const res = await t.request({ method: "GET", url: "/api/v1/payments/%zz" });
    expect(res.statusCode).toBe(400);
    const unmatched = httpCount("GET", "unmatched", "4xx");
    const after = await scrapeUntil(
      read,
      "the malformed URL counted",
      (s) => delta(before, s, "http_request_duration_seconds_count", unmatched) >= 1,
      2_000,
    );
    expect(delta(before, after, "http_request_duration_seconds_count", unmatched)).toBe(1);
  });
});

describe("sandbox payouts and the circuit breaker", () => {
  it("three failed payouts: failed +3, one trip, one paused workspace; after a resume a payout completes +1", async () => {
    const ws = await workspace(); // no adminEmail: nobody to mail when it trips
    expect(
      (await post(ws.testKey, "/api/v1/sandbox/faucet", { tokenSymbol: "USDC", amount: "100" })).statusCode,
    ).toBe(200);
    const before = await read();
    const failing = { tokenSymbol: "USDC", amount: "1", destinationAddress: FAILURE_ADDRESS };
    const answers: number[] = [];
    for (let i = 0; i < 3; i++) answers.push((await post(ws.testKey, "/api/v1/payouts", failing)).statusCode);
    expect(answers).toEqual([500, 500, 503]);
    const rows = await t.database.db
      .selectFrom("payouts")
      .select(["id", "wallet_type", "status"])
      .where("workspace_id", "=", ws.id)
      .execute();
    expect(rows.map((r) => r.status)).toEqual(["failed", "failed", "failed"]);
    for (const row of rows) addTenant(row.id);
    const walletType = rows[0]?.wallet_type as string;
    expect(rows.every((r) => r.wallet_type === walletType)).toBe(true);

    const failed = { outcome: "failed", wallet_type: walletType, environment: "sandbox" };
    const fiveHundreds = httpCount("POST", "/api/v1/payouts", "5xx");
    const tripped = await scrapeUntil(
      read,
      "three 5xx payouts",
      (s) => delta(before, s, "http_request_duration_seconds_count", fiveHundreds) >= 3,
    );
    expect(moved(before, tripped, "payouts_total")).toEqual({
      [`environment=sandbox,outcome=failed,wallet_type=${walletType}`]: 3,
    });
    expect(delta(before, tripped, "payouts_total", failed)).toBe(3);
    expect(moved(before, tripped, "circuit_breaker_trips_total")).toEqual({ "environment=sandbox": 1 });
    expect(moved(before, tripped, "workspaces_paused")).toEqual({ "environment=sandbox": 1 });
    expect(delta(before, tripped, "http_request_duration_seconds_count", fiveHundreds)).toBe(3);

    // Paused: a valid payout is refused (503) without ending a payout.
    const refused = await post(ws.testKey, "/api/v1/payouts", {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: `0x${"12".repeat(20)}`,
    });
    expect(refused.statusCode).toBe(503);

    const resumed = await post(ws.testKey, `/api/v1/workspaces/${ws.id}/resume`);
    expect(resumed.statusCode, resumed.body).toBe(200);
    expect(resumed.json().resumed).toBe(true);
    const afterResume = await read();
    expect(afterResume.count("workspaces_paused", { environment: "sandbox" })).toBe(
      before.count("workspaces_paused", { environment: "sandbox" }),
    );
    expect(moved(tripped, afterResume, "payouts_total")).toEqual({});
    expect(moved(tripped, afterResume, "circuit_breaker_trips_total")).toEqual({});

    const destination = `0x${"ab".repeat(20)}`;
    addTenant(destination);
    const ok = await post(ws.testKey, "/api/v1/payouts", {
      tokenSymbol: "USDC",
      amount: "2",
      destinationAddress: destination,
    });
    expect(ok.statusCode, ok.body).toBe(200);
    addTenant(ok.json().payout.txHash);
    const completed = await read();
    expect(moved(afterResume, completed, "payouts_total")).toEqual({
      [`environment=sandbox,outcome=completed,wallet_type=${walletType}`]: 1,
    });
    expect(moved(afterResume, completed, "circuit_breaker_trips_total")).toEqual({});
  });
});

describe("transfers by kind", () => {
  it("a refund and a return count under their own kinds in transfers_total, never in payouts_total; a payout in both", async () => {
    const ws = await workspace();
    const payment = await sandboxPayment(ws);
    const before = await read();
    const refund = await post(ws.testKey, `/api/v1/payments/${payment.id}/refunds`, {
      amount: "1",
      destinationAddress: `0x${"cd".repeat(20)}`,
    });
    expect(refund.statusCode, refund.body).toBe(201);
    addTenant(refund.json().refund.id);
    const incoming = await post(ws.testKey, "/api/v1/sandbox/incoming-transfer", {
      tokenSymbol: "USDC",
      amount: "3",
    });
    expect(incoming.statusCode, incoming.body).toBe(201);
    const transfer = incoming.json().transfer as { id: string; from: string };
    addTenant(transfer.id);
    addTenant(transfer.from);
    const returned = await post(ws.testKey, `/api/v1/transfers/unmatched/${transfer.id}/return`, {});
    expect(returned.statusCode, returned.body).toBe(201);
    const afterBoth = await read();
    expect(moved(before, afterBoth, "payouts_total")).toEqual({});
    const walletType = (
      await t.database.db
        .selectFrom("payouts")
        .select("wallet_type")
        .where("workspace_id", "=", ws.id)
        .where("kind", "=", "refund")
        .executeTakeFirstOrThrow()
    ).wallet_type;
    const series = (kind: string) =>
      `environment=sandbox,kind=${kind},network=sandbox-a,outcome=completed,wallet_type=${walletType}`;
    expect(moved(before, afterBoth, "transfers_total")).toEqual({
      [series("refund")]: 1,
      [series("return")]: 1,
    });

    const payout = await post(ws.testKey, "/api/v1/payouts", {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: `0x${"ce".repeat(20)}`,
    });
    expect(payout.statusCode, payout.body).toBe(200);
    addTenant(payout.json().payout.txHash);
    const afterPayout = await read();
    expect(moved(afterBoth, afterPayout, "payouts_total")).toEqual({
      [`environment=sandbox,outcome=completed,wallet_type=${walletType}`]: 1,
    });
    expect(moved(afterBoth, afterPayout, "transfers_total")).toEqual({ [series("payout")]: 1 });
  });
});

describe("cardinality", () => {
  it("no label value is a workspace id, payment id, payout id or address", async () => {
    // Some more tenant-specific traffic: a payment read by id, and a 404 naming an id.
    const ws = await workspace();
    const payment = await sandboxPayment(ws);
    await t.request({ method: "GET", url: `/api/v1/payments/${payment.id}`, headers: bearer(ws.testKey) });
    await t.request({
      method: "POST",
      url: `/api/v1/payments/${payment.id}/cancel`,
      headers: bearer(ws.testKey),
    });
    await t.request({
      method: "GET",
      url: `/api/v1/workspaces/${ws.id}/payout-state`,
      headers: bearer(ws.testKey),
    });
    const s = await read();
    expect(tenantValues.size).toBeGreaterThan(10);
    const values = s.labelValues();
    expect(values.length).toBeGreaterThan(0);
    for (const value of values) {
      expect(value).not.toMatch(UUID);
      expect(value).not.toMatch(ADDRESS);
    }
    const text = s.text.toLowerCase();
    for (const tenant of tenantValues) expect(text, tenant).not.toContain(tenant.toLowerCase());
    // The routes are patterns.
    const routes = new Set(s.all("http_request_duration_seconds_count").map((x) => x.labels.route));
    expect(routes).toContain("/api/v1/payments/:id");
    expect(routes).toContain("/api/v1/payments/:id/cancel");
    expect(routes).toContain("/api/v1/workspaces/:id/payout-state");
  });
});

describe("database pools", () => {
  it.skipIf(!process.env.DATABASE_URL)(
    "on PostgreSQL: the main and lock pools' connections, in use and idle, and waiting",
    async () => {
      const s = await read();
      for (const pool of ["main", "locks"]) {
        for (const state of ["in_use", "idle"]) {
          const sample = s.find("db_pool_connections", { pool, state });
          expect(sample, `${pool} ${state}`).toBeDefined();
          expect(sample?.value).toBeGreaterThanOrEqual(0);
        }
        expect(s.find("db_pool_waiting", { pool })?.value).toBeGreaterThanOrEqual(0);
      }
      // The scrape's own queries ran on the main pool: it has opened a connection.
      const main =
        (s.find("db_pool_connections", { pool: "main", state: "in_use" })?.value ?? 0) +
        (s.find("db_pool_connections", { pool: "main", state: "idle" })?.value ?? 0);
      expect(main).toBeGreaterThan(0);
    },
  );

  it.skipIf(!!process.env.DATABASE_URL)("on the embedded database: no pool series", async () => {
    const s = await read();
    expect(s.all("db_pool_connections")).toEqual([]);
    expect(s.all("db_pool_waiting")).toEqual([]);
  });
});
