import type { InjectOptions } from "fastify";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";

// Idempotency-Key on POST /api/v1/payments (decisions D5, D13): replay within 24 h, 409 on a
// different body, scoped per workspace and environment, exactly one payment under concurrency.

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp({ RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" });
});
afterAll(async () => t.close());

function create(key: string, payload: unknown, idempotencyKey?: string) {
  return t.request({
    method: "POST",
    url: "/api/v1/payments",
    headers: {
      ...bearer(key),
      ...(idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey }),
    },
    payload: payload as InjectOptions["payload"],
  });
}

async function paymentCount(ws: CreatedWorkspace, environment?: "sandbox" | "live"): Promise<number> {
  let query = t.database.db
    .selectFrom("payments")
    .select((eb) => eb.fn.countAll().as("n"))
    .where("workspace_id", "=", ws.id);
  if (environment) query = query.where("environment", "=", environment);
  return Number((await query.executeTakeFirstOrThrow()).n);
}

async function outboxCount(ws: CreatedWorkspace): Promise<number> {
  const row = await t.database.db
    .selectFrom("outbox_events")
    .select((eb) => eb.fn.countAll().as("n"))
    .where("workspace_id", "=", ws.id)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

const BODY = {
  tokenSymbol: "USDC",
  amount: "25.00",
  merchantWallet: "0x2222222222222222222222222222222222222222",
  description: "Order 1",
  metadata: { orderId: "1", customer: "alice" },
};

describe("Idempotency-Key on POST /api/v1/payments", () => {
  it("replays the original response for the same key and the same body", async () => {
    const ws = await createWorkspace(t);
    const first = await create(ws.testKey, BODY, "order-1");
    expect(first.statusCode, first.body).toBe(201);
    expect(first.headers["idempotent-replayed"]).toBeUndefined();

    const second = await create(ws.testKey, BODY, "order-1");
    expect(second.statusCode, second.body).toBe(201);
    expect(second.headers["idempotent-replayed"]).toBe("true");
    expect(second.json()).toEqual(first.json());
    expect(second.json().payment.id).toBe(first.json().payment.id);

    const third = await create(ws.testKey, BODY, "order-1");
    expect(third.statusCode).toBe(201);
    expect(third.headers["idempotent-replayed"]).toBe("true");
    expect(third.json().payment.id).toBe(first.json().payment.id);

    expect(await paymentCount(ws)).toBe(1);
    expect(await outboxCount(ws)).toBe(2);
  });

  it("treats the same body with keys reordered (also nested) as the same body", async () => {
    const ws = await createWorkspace(t);
    const first = await create(ws.testKey, BODY, "reorder");
    expect(first.statusCode).toBe(201);
    const reordered = {
      metadata: { customer: "alice", orderId: "1" },
      description: "Order 1",
      merchantWallet: BODY.merchantWallet,
      amount: "25.00",
      tokenSymbol: "USDC",
    };
    const second = await create(ws.testKey, reordered, "reorder");
    expect(second.statusCode, second.body).toBe(201);
    expect(second.headers["idempotent-replayed"]).toBe("true");
    expect(second.json().payment.id).toBe(first.json().payment.id);
    expect(await paymentCount(ws)).toBe(1);
  });

  it("answers 409 with the original payment for the same key and a different body", async () => {
    const ws = await createWorkspace(t);
    const first = await create(ws.testKey, BODY, "conflict");
    expect(first.statusCode).toBe(201);
    const original = first.json().payment;

    for (const different of [
      { ...BODY, amount: "26.00" },
      { ...BODY, amount: "25" }, // numerically equal, but not the same JSON
      { ...BODY, metadata: { orderId: "2", customer: "alice" } },
      { tokenSymbol: "USDC", amount: "25.00" },
    ]) {
      const res = await create(ws.testKey, different, "conflict");
      expect(res.statusCode, JSON.stringify(different)).toBe(409);
      expect(res.headers["content-type"]).toMatch(/^application\/json/);
      expect(res.json()).toEqual({ error: "Idempotency key already used", payment: original });
    }

    const read = await t.request({
      method: "GET",
      url: `/api/v1/payments/${original.id}`,
      headers: bearer(ws.testKey),
    });
    expect(read.json().payment).toEqual(original);
    expect(await paymentCount(ws)).toBe(1);
    expect(await outboxCount(ws)).toBe(2);
  });

  it("scopes keys per workspace: another workspace's identical request creates its own payment", async () => {
    const a = await createWorkspace(t);
    const b = await createWorkspace(t);
    const ra = await create(a.testKey, BODY, "shared-key");
    const rb = await create(b.testKey, BODY, "shared-key");
    expect(ra.statusCode).toBe(201);
    expect(rb.statusCode, rb.body).toBe(201);
    expect(rb.headers["idempotent-replayed"]).toBeUndefined();
    expect(rb.json().payment.id).not.toBe(ra.json().payment.id);
    expect(rb.json().receivingAddress).toBe(b.eoaAddress);

    // A different body under the same key in the other workspace is not a conflict either.
    const c = await createWorkspace(t);
    const rc = await create(c.testKey, { ...BODY, amount: "99" }, "shared-key");
    expect(rc.statusCode, rc.body).toBe(201);
    expect(rc.json().payment.grossAmount).toBe("99.00");

    expect(await paymentCount(a)).toBe(1);
    expect(await paymentCount(b)).toBe(1);
    expect(await paymentCount(c)).toBe(1);
  });

  it("scopes keys per environment: the live key never replays or conflicts with a sandbox record", async () => {
    const ws = await createWorkspace(t);
    const sandbox = await create(ws.testKey, BODY, "env-key");
    expect(sandbox.statusCode).toBe(201);

    // Same key, same body, live: not a replay of the sandbox payment (live has no network → 503).
    const liveSame = await create(ws.liveKey, BODY, "env-key");
    expect(liveSame.statusCode).toBe(503);
    expect(liveSame.headers["idempotent-replayed"]).toBeUndefined();
    expect(liveSame.json()).toEqual({ error: "Live network is not configured" });

    // Same key, different body, live: not a 409 conflict with the sandbox record.
    const liveDifferent = await create(ws.liveKey, { ...BODY, amount: "1" }, "env-key");
    expect(liveDifferent.statusCode).toBe(503);
    expect(liveDifferent.json()).toEqual({ error: "Live network is not configured" });
    expect(await paymentCount(ws, "live")).toBe(0);

    // A live record under a key does not affect the sandbox use of the same key.
    await t.database.db
      .insertInto("idempotency_keys")
      .values({
        workspace_id: ws.id,
        environment: "live",
        scope: "payments",
        key: "live-only",
        request_hash: "0".repeat(64),
        resource_id: null,
        response_status: null,
        response_body: null,
        created_at: new Date(),
      })
      .execute();
    const sandboxAfterLive = await create(ws.testKey, BODY, "live-only");
    expect(sandboxAfterLive.statusCode, sandboxAfterLive.body).toBe(201);
    expect(sandboxAfterLive.headers["idempotent-replayed"]).toBeUndefined();
    expect(sandboxAfterLive.json().payment.id).not.toBe(sandbox.json().payment.id);
    expect(await paymentCount(ws, "sandbox")).toBe(2);
  });

  it("creates exactly one payment for 10 concurrent requests with one key", async () => {
    const ws = await createWorkspace(t);
    const responses = await Promise.all(
      Array.from({ length: 10 }, () => create(ws.testKey, BODY, "concurrent")),
    );
    for (const res of responses) expect(res.statusCode, res.body).toBe(201);
    const ids = new Set(responses.map((res) => res.json().payment.id));
    expect(ids.size).toBe(1);
    const replayed = responses.filter((res) => res.headers["idempotent-replayed"] === "true");
    expect(replayed).toHaveLength(9);
    expect(await paymentCount(ws)).toBe(1);
    expect(await outboxCount(ws)).toBe(2);
  });

  it("does not consume the key when the request failed validation (400)", async () => {
    const ws = await createWorkspace(t);
    const bad = await create(ws.testKey, { ...BODY, amount: "-1" }, "retry-after-400");
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toBe("Amount must be a positive number");

    const good = await create(ws.testKey, BODY, "retry-after-400");
    expect(good.statusCode, good.body).toBe(201);
    expect(good.headers["idempotent-replayed"]).toBeUndefined();
    expect(good.json().payment.status).toBe("forwarded");
    expect(await paymentCount(ws)).toBe(1);

    const replay = await create(ws.testKey, BODY, "retry-after-400");
    expect(replay.headers["idempotent-replayed"]).toBe("true");
    expect(replay.json().payment.id).toBe(good.json().payment.id);
  });

  it("refuses an Idempotency-Key over 255 characters and accepts exactly 255", async () => {
    const ws = await createWorkspace(t);
    const tooLong = await create(ws.testKey, BODY, "k".repeat(256));
    expect(tooLong.statusCode).toBe(400);
    expect(typeof tooLong.json().error).toBe("string");
    expect(await paymentCount(ws)).toBe(0);

    const longest = await create(ws.testKey, BODY, "k".repeat(255));
    expect(longest.statusCode, longest.body).toBe(201);
    expect(await paymentCount(ws)).toBe(1);
  });

  it("no longer replays a key older than 24 hours: the key creates a new payment", async () => {
    const ws = await createWorkspace(t);
    const first = await create(ws.testKey, BODY, "old-key");
    expect(first.statusCode).toBe(201);

    // Still within 24 h (23 h old): replays.
    await t.database.db
      .updateTable("idempotency_keys")
      .set({ created_at: sql<Date>`now() - interval '23 hours'` })
      .where("workspace_id", "=", ws.id)
      .where("key", "=", "old-key")
      .execute();
    const within = await create(ws.testKey, BODY, "old-key");
    expect(within.statusCode).toBe(201);
    expect(within.headers["idempotent-replayed"]).toBe("true");
    expect(within.json().payment.id).toBe(first.json().payment.id);

    await t.database.db
      .updateTable("idempotency_keys")
      .set({ created_at: sql<Date>`now() - interval '25 hours'` })
      .where("workspace_id", "=", ws.id)
      .where("key", "=", "old-key")
      .execute();
    const second = await create(ws.testKey, BODY, "old-key");
    expect(second.statusCode, second.body).toBe(201);
    expect(second.headers["idempotent-replayed"]).toBeUndefined();
    expect(second.json().payment.id).not.toBe(first.json().payment.id);
    expect(await paymentCount(ws)).toBe(2);

    // The key now belongs to the new payment.
    const third = await create(ws.testKey, BODY, "old-key");
    expect(third.headers["idempotent-replayed"]).toBe("true");
    expect(third.json().payment.id).toBe(second.json().payment.id);

    // An expired key also accepts a different body without a conflict.
    await t.database.db
      .updateTable("idempotency_keys")
      .set({ created_at: sql<Date>`now() - interval '25 hours'` })
      .where("workspace_id", "=", ws.id)
      .where("key", "=", "old-key")
      .execute();
    const differentBody = await create(ws.testKey, { ...BODY, amount: "3" }, "old-key");
    expect(differentBody.statusCode, differentBody.body).toBe(201);
    expect(differentBody.json().payment.grossAmount).toBe("3.00");
    expect(await paymentCount(ws)).toBe(3);
  });

  it("measures the 24 hours on the service's clock: moved 25 h ahead, the key creates a new payment", async () => {
    const ws = await createWorkspace(t);
    const start = Date.now();
    try {
      const first = await create(ws.testKey, BODY, "clock-key");
      expect(first.statusCode, first.body).toBe(201);

      t.setNow(new Date(start + 23 * 3_600_000));
      const within = await create(ws.testKey, BODY, "clock-key");
      expect(within.headers["idempotent-replayed"]).toBe("true");
      expect(within.json().payment.id).toBe(first.json().payment.id);

      t.setNow(new Date(start + 25 * 3_600_000));
      const later = await create(ws.testKey, BODY, "clock-key");
      expect(later.statusCode, later.body).toBe(201);
      expect(later.headers["idempotent-replayed"]).toBeUndefined();
      expect(later.json().payment.id).not.toBe(first.json().payment.id);
      expect(later.json().payment.createdAt).toBe(new Date(start + 25 * 3_600_000).toISOString());
      expect(await paymentCount(ws)).toBe(2);
    } finally {
      t.setNow(undefined);
    }
  });

  it("creates a new payment for every request without a key", async () => {
    const ws = await createWorkspace(t);
    const a = await create(ws.testKey, BODY);
    const b = await create(ws.testKey, BODY);
    expect(a.statusCode).toBe(201);
    expect(b.statusCode).toBe(201);
    expect(b.headers["idempotent-replayed"]).toBeUndefined();
    expect(a.json().payment.id).not.toBe(b.json().payment.id);
    expect(await paymentCount(ws)).toBe(2);
  });
});
