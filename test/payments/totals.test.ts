import fc from "fast-check";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PAYMENT_STATUSES } from "../../src/domain/payment-state.ts";
import { compactPaymentTotals } from "../../src/modules/payments/totals.ts";
import { vacuumTotals } from "../../src/modules/payments/totals-repo.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { FakeCardProvider } from "../support/fake-card-provider.ts";

// payment_totals (migrations 020, 034): the database's running totals of payments per network, day,
// token and status must always equal what summing the payments gives, whatever statement changed them
// (inserts of one or many rows, status moves, amount or day changes, deletes), before and after
// the deltas are folded. On PGlite or the PostgreSQL of DATABASE_URL.

const fake = new FakeCardProvider();
let t: TestApp;
let ws: CreatedWorkspace;

beforeAll(async () => {
  await fake.start();
  t = await startTestApp({
    CARD_SECRET_KEY_LIVE: "sk_test_paymentTotals0123456789",
    CARD_WEBHOOK_SECRET_LIVE: "whsec_payment_totals_0123456789abcdef",
    CARD_API_BASE: fake.url,
  });
  ws = await createWorkspace(t);
});

afterAll(async () => {
  await t?.close();
  await fake.stop();
});

type Bucket = { day: string; token: string; status: string; count: string; volume: string };

/** What summing the workspace's payments gives, and what the totals say, bucket by bucket. */
async function both(workspaceId: string): Promise<{ truth: Bucket[]; totals: Bucket[] }> {
  const db = t.database.db;
  const truth = await sql<Bucket>`
    SELECT environment || ' ' || coalesce(network, '-') || ' '
           || to_char((created_at AT TIME ZONE 'UTC')::date, 'YYYY-MM-DD') AS day,
           token_symbol AS token, status, count(*)::text AS count, sum(gross_amount)::text AS volume
    FROM payments WHERE workspace_id = ${workspaceId} GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`.execute(db);
  const totals = await sql<Bucket>`
    SELECT environment || ' ' || coalesce(network, '-') || ' ' || to_char(day, 'YYYY-MM-DD') AS day,
           token_symbol AS token, status,
           sum(count)::text AS count, sum(volume)::text AS volume
    FROM payment_totals WHERE workspace_id = ${workspaceId} GROUP BY 1, 2, 3 HAVING sum(count) <> 0
    ORDER BY 1, 2, 3`.execute(db);
  return { truth: truth.rows, totals: totals.rows };
}

async function expectExact(workspaceId: string): Promise<void> {
  const { truth, totals } = await both(workspaceId);
  expect(totals).toEqual(truth);
}

async function create(key: string, body: Record<string, unknown>): Promise<string> {
  const res = await t.request({
    method: "POST",
    url: "/api/v1/payments",
    headers: bearer(key),
    payload: body,
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().payment.id as string;
}

describe("payment totals", () => {
  it("follow payments made and cancelled through the API, and /wallet/stats reads them", async () => {
    await create(ws.testKey, { amount: "10.00", tokenSymbol: "USDC" });
    await create(ws.testKey, { amount: "0.5", tokenSymbol: "ETH" });
    const card = await create(ws.liveKey, { amount: "20.00", tokenSymbol: "USD", paymentMethod: "card" });
    await expectExact(ws.id);
    const cancel = await t.request({
      method: "POST",
      url: `/api/v1/payments/${card}/cancel`,
      headers: bearer(ws.liveKey),
    });
    expect(cancel.statusCode, cancel.body).toBe(200);
    await expectExact(ws.id);
    const stats = await t.request({
      method: "GET",
      url: "/api/v1/wallet/stats",
      headers: bearer(ws.testKey),
    });
    expect(stats.statusCode, stats.body).toBe(200);
    const forwarded = [
      { status: "forwarded", tokenSymbol: "ETH", count: 1, volume: "0.50" },
      { status: "forwarded", tokenSymbol: "USDC", count: 1, volume: "10.00" },
    ];
    expect(stats.json().payments).toEqual(forwarded);
    // Per network too (D22): the sandbox's payments are on its network; a card payment on none.
    expect(stats.json().networks).toEqual({ "sandbox-a": { payments: forwarded, payouts: [] } });
    const live = await t.request({ method: "GET", url: "/api/v1/wallet/stats", headers: bearer(ws.liveKey) });
    expect(live.json().payments).toEqual([
      { status: "cancelled", tokenSymbol: "USD", count: 1, volume: "20.00" },
    ]);
    expect(live.json().networks).toEqual({});
  });

  it("stay exact through any sequence of inserts, status moves, amount and day changes and deletes, folded or not", async () => {
    const statuses = PAYMENT_STATUSES;
    const own = await createWorkspace(t);
    const db = t.database.db;
    const op = fc.oneof(
      fc.record({
        kind: fc.constant("insert" as const),
        rows: fc.array(
          fc.record({
            status: fc.constantFrom(...statuses),
            token: fc.constantFrom("USDC", "ETH", "ADAO"),
            amount: fc.integer({ min: 1, max: 1_000_000 }),
            daysAgo: fc.integer({ min: 0, max: 40 }),
            env: fc.constantFrom("sandbox", "live"),
            network: fc.constantFrom("default", "base", null),
          }),
          { minLength: 1, maxLength: 6 },
        ),
      }),
      fc.record({
        kind: fc.constant("status" as const),
        status: fc.constantFrom(...statuses),
        share: fc.integer({ min: 1, max: 3 }),
      }),
      fc.record({ kind: fc.constant("amount" as const), add: fc.integer({ min: 1, max: 1000 }) }),
      fc.record({ kind: fc.constant("day" as const), days: fc.integer({ min: 1, max: 3 }) }),
      fc.record({ kind: fc.constant("network" as const), to: fc.constantFrom("default", "base", null) }),
      fc.record({ kind: fc.constant("other" as const) }),
      fc.record({ kind: fc.constant("delete" as const) }),
      fc.record({ kind: fc.constant("fold" as const) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 8 }), async (ops) => {
        for (const o of ops) {
          if (o.kind === "insert") {
            for (const r of o.rows) {
              await sql`INSERT INTO payments (workspace_id, environment, network, status, payment_method,
                  payment_provider, token_symbol, gross_amount, fee_amount, net_amount, wallet_type, metadata,
                  expires_at, created_at)
                VALUES (${own.id}, ${r.env}, ${r.network}, ${r.status}, 'crypto', 'onchain', ${r.token}, ${r.amount},
                  0, ${r.amount}, 'eoa', '{}'::jsonb, now(), now() - make_interval(days => ${r.daysAgo}))`.execute(
                db,
              );
            }
          } else if (o.kind === "status") {
            // Many rows in one statement: every third (or second, or every) payment moves.
            await sql`UPDATE payments SET status = ${o.status}
              WHERE workspace_id = ${own.id} AND abs(hashtext(id::text)) % ${o.share} = 0`.execute(db);
          } else if (o.kind === "amount") {
            await sql`UPDATE payments SET gross_amount = gross_amount + ${o.add}, net_amount = net_amount + ${o.add}
              WHERE workspace_id = ${own.id} AND abs(hashtext(id::text)) % 2 = 0`.execute(db);
          } else if (o.kind === "day") {
            await sql`UPDATE payments SET created_at = created_at - make_interval(days => ${o.days})
              WHERE workspace_id = ${own.id} AND abs(hashtext(id::text)) % 3 = 1`.execute(db);
          } else if (o.kind === "network") {
            // A payment's network set when its transfer arrives (one payable on several networks).
            await sql`UPDATE payments SET network = ${o.to}
              WHERE workspace_id = ${own.id} AND abs(hashtext(id::text)) % 3 = 2`.execute(db);
          } else if (o.kind === "other") {
            await sql`UPDATE payments SET description = 'touched' WHERE workspace_id = ${own.id}`.execute(db);
          } else if (o.kind === "delete") {
            await sql`DELETE FROM payments WHERE workspace_id = ${own.id} AND abs(hashtext(id::text)) % 4 = 0`.execute(
              db,
            );
          } else {
            await compactPaymentTotals(db);
          }
          await expectExact(own.id);
        }
      }),
      { numRuns: 15 },
    );
    // Folding leaves one row per bucket and nothing unfolded.
    await compactPaymentTotals(db);
    await expectExact(own.id);
    const left = await sql<{
      n: string;
    }>`SELECT count(*)::text AS n FROM payment_totals WHERE NOT compacted`.execute(db);
    expect(Number(left.rows[0]?.n)).toBe(0);
    // One compacted row per bucket, network null (card payments') included.
    const twice = await sql<{ n: string }>`
      SELECT count(*)::text AS n FROM (
        SELECT 1 FROM payment_totals WHERE compacted AND workspace_id = ${own.id}
        GROUP BY environment, network, day, token_symbol, status HAVING count(*) > 1) AS doubled`.execute(db);
    expect(Number(twice.rows[0]?.n)).toBe(0);
  });

  it("write nothing for an update that moves no bucket", async () => {
    const own = await createWorkspace(t);
    await create(own.testKey, { amount: "3.00", tokenSymbol: "USDC" });
    const db = t.database.db;
    await compactPaymentTotals(db);
    const before = await sql<{
      n: string;
    }>`SELECT count(*)::text AS n FROM payment_totals WHERE workspace_id = ${own.id}`.execute(db);
    await sql`UPDATE payments SET description = 'no bucket moves' WHERE workspace_id = ${own.id}`.execute(db);
    const after = await sql<{
      n: string;
    }>`SELECT count(*)::text AS n FROM payment_totals WHERE workspace_id = ${own.id}`.execute(db);
    expect(after.rows[0]?.n).toBe(before.rows[0]?.n);
  });

  it("drop a bucket that came back to nothing, and the table can be vacuumed", async () => {
    const own = await createWorkspace(t);
    const db = t.database.db;
    await sql`INSERT INTO payments (workspace_id, environment, status, payment_method, payment_provider,
        token_symbol, gross_amount, fee_amount, net_amount, wallet_type, metadata, expires_at)
      VALUES (${own.id}, 'live', 'pending', 'crypto', 'onchain', 'USDC', 5, 0, 5, 'eoa', '{}'::jsonb, now())`.execute(
      db,
    );
    await compactPaymentTotals(db);
    await sql`UPDATE payments SET status = 'expired' WHERE workspace_id = ${own.id}`.execute(db);
    const state = { foldedSinceVacuum: 0 };
    expect(await compactPaymentTotals(db, state)).toBeGreaterThan(0);
    const rows = await sql<{ status: string; count: string }>`
      SELECT status, count::text FROM payment_totals WHERE workspace_id = ${own.id} ORDER BY status`.execute(
      db,
    );
    expect(rows.rows).toEqual([{ status: "expired", count: "1" }]);
    await vacuumTotals(db);
    await expectExact(own.id);
  });

  // Last: it empties the payments of every test above.
  it("are emptied by a TRUNCATE of the payments", async () => {
    const db = t.database.db;
    await sql`TRUNCATE payments CASCADE`.execute(db);
    const left = await sql<{ n: string }>`SELECT count(*)::text AS n FROM payment_totals`.execute(db);
    expect(left.rows[0]?.n).toBe("0");
  });
});
