import { CompiledQuery, sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../../../test/support/app.ts";
import type { PaymentFilter } from "./browse.ts";
import { paymentsAfterQuery } from "./browse-repo.ts";

// Keyset pages of the payments browser (browse.ts, browse-repo.ts) on a real database: every
// payment once, newest first, ties on created_at broken by id, and each page read from its place
// in the index however deep it is.

let t: TestApp;
let bulk: CreatedWorkspace;
const BULK = 1050;

beforeAll(async () => {
  t = await startTestApp();
  bulk = await createWorkspace(t);
  // Five payments per millisecond with microsecond offsets: ties on created_at at page
  // boundaries, and keys that a JS Date (milliseconds) would round.
  await sql`
    INSERT INTO payments (workspace_id, environment, status, payment_method, payment_provider, token_symbol,
                          gross_amount, fee_amount, net_amount, wallet_type, receiving_address, description,
                          expires_at, created_at, updated_at)
    SELECT ${bulk.id}::uuid, 'sandbox', CASE WHEN i % 2 = 0 THEN 'forwarded' ELSE 'expired' END, 'crypto',
           'onchain', 'USDC', 1000000, 15000, 985000, 'eoa', ${bulk.eoaAddress}, 'bulk ' || i,
           k.at + interval '1 hour', k.at, k.at
    FROM generate_series(1, ${BULK}::int) AS i,
         LATERAL (SELECT timestamptz '2024-06-01 00:00:00+00' + (i / 5) * interval '1 millisecond'
                         + (i % 3 + 1) * interval '1 microsecond' AS at) AS k`.execute(t.database.db);
});
afterAll(async () => t.close());

const tenantOf = (ws: CreatedWorkspace) => ({ workspaceId: ws.id, environment: "sandbox" as const });

async function walk(ws: CreatedWorkspace, filter: PaymentFilter, limit: number) {
  const seen: string[] = [];
  let after: string | undefined;
  let pages = 0;
  do {
    const page = await t.app.services.payments.browse(tenantOf(ws), filter, {
      limit,
      ...(after ? { after } : {}),
    });
    expect(page.payments.length).toBeLessThanOrEqual(limit);
    seen.push(...page.payments.map((p) => p.id));
    after = page.next ?? undefined;
    pages += 1;
  } while (after);
  return { seen, pages };
}

async function idsNewestFirst(ws: CreatedWorkspace, status?: string): Promise<string[]> {
  let query = t.database.db.selectFrom("payments").select("id").where("workspace_id", "=", ws.id);
  if (status) query = query.where("status", "=", status);
  const rows = await query.orderBy("created_at", "desc").orderBy("id", "desc").execute();
  return rows.map((row) => row.id);
}

describe("PaymentsService.browse", () => {
  it("walking every page returns each payment once, newest first", async () => {
    const { seen, pages } = await walk(bulk, {}, 100);
    expect(pages).toBe(11);
    expect(new Set(seen).size).toBe(BULK);
    expect(seen).toEqual(await idsNewestFirst(bulk));
  });

  it("pages a filtered list the same way", async () => {
    const { seen } = await walk(bulk, { status: "forwarded" }, 37);
    expect(seen).toEqual(await idsNewestFirst(bulk, "forwarded"));
  });

  it("orders payments created at the same instant by id, descending", async () => {
    const ws = await createWorkspace(t);
    await sql`
      INSERT INTO payments (workspace_id, environment, status, payment_method, payment_provider, token_symbol,
                            gross_amount, fee_amount, net_amount, wallet_type, description, expires_at,
                            created_at, updated_at)
      SELECT ${ws.id}::uuid, 'sandbox', 'forwarded', 'card', 'card', 'USD', 10000, 150, 9850, 'eoa',
             CASE WHEN i % 2 = 0 THEN 'even' ELSE 'odd' END, '2025-03-01T01:00:00Z', '2025-03-01T00:00:00Z',
             '2025-03-01T00:00:00Z'
      FROM generate_series(1, 11) AS i`.execute(t.database.db);
    const rows = await t.database.db
      .selectFrom("payments")
      .select(["id", "description"])
      .where("workspace_id", "=", ws.id)
      .execute();
    const descending = (ids: string[]) => [...ids].sort().reverse();
    expect((await walk(ws, {}, 3)).seen).toEqual(descending(rows.map((r) => r.id)));
    expect((await walk(ws, { search: "ODD" }, 2)).seen).toEqual(
      descending(rows.filter((r) => r.description === "odd").map((r) => r.id)),
    );
  });

  it("says there is a next page only when there is one, also when a page ends exactly at the end", async () => {
    const ws = await createWorkspace(t);
    const browse = (page: { after?: string; limit: number }) =>
      t.app.services.payments.browse(tenantOf(ws), {}, page);
    expect(await browse({ limit: 10 })).toEqual({ payments: [], next: null });
    await sql`
      INSERT INTO payments (workspace_id, environment, status, payment_method, payment_provider, token_symbol,
                            gross_amount, fee_amount, net_amount, wallet_type, expires_at, created_at, updated_at)
      SELECT ${ws.id}::uuid, 'sandbox', 'expired', 'card', 'card', 'USD', 10000, 150, 9850, 'eoa', now(),
             now() - i * interval '1 second', now()
      FROM generate_series(1, 3) AS i`.execute(t.database.db);
    const whole = await browse({ limit: 3 });
    expect(whole.payments).toHaveLength(3);
    expect(whole.next).toBeNull();
    const first = await browse({ limit: 2 });
    expect(first.next).not.toBeNull();
    const second = await browse({ limit: 2, after: first.next ?? "" });
    expect(second.payments.map((p) => p.id)).toEqual([whole.payments[2]?.id]);
    expect(second.next).toBeNull();
  });

  it("refuses a malformed cursor and a limit out of range with 400s naming them", async () => {
    const browse = (page: { after?: string; limit: number }) =>
      t.app.services.payments.browse(tenantOf(bulk), {}, page);
    await expect(browse({ limit: 3, after: "not-a-cursor" })).rejects.toThrow(/^cursor /);
    await expect(browse({ limit: 0 })).rejects.toThrow(/^limit /);
    await expect(browse({ limit: 101 })).rejects.toThrow(/^limit /);
  });

  it("starts a deep page at its place in the index: the row comparison is an index condition", async () => {
    const after = { createdAt: "2024-06-01T00:00:00.100002Z", id: "ffffffff-ffff-4fff-bfff-ffffffffffff" };
    for (const [query, index] of [
      [{}, "payments_list"],
      [{ status: "forwarded" as const }, "payments_list_status"],
    ] as const) {
      const compiled = paymentsAfterQuery(t.database.db, tenantOf(bulk), query, after, 101).compile();
      // Only whether the index CAN serve it is asked: the planner's choice on a table this small
      // (and never analyzed) is its own.
      const plan = await t.database.db.transaction().execute(async (trx) => {
        await sql`SET LOCAL enable_seqscan = off`.execute(trx);
        await sql`SET LOCAL enable_bitmapscan = off`.execute(trx);
        await sql`SET LOCAL enable_sort = off`.execute(trx);
        const explained = await trx.executeQuery<Record<string, string>>(
          CompiledQuery.raw(`EXPLAIN ${compiled.sql}`, [...compiled.parameters]),
        );
        return explained.rows.map((row) => Object.values(row)[0]).join("\n");
      });
      expect(plan).toContain(`Index Scan using ${index} on payments`);
      expect(plan).toMatch(/Index Cond: .*ROW\(created_at, id\) < ROW\(/);
      expect(plan).not.toMatch(/\bSort\b/);
    }
  });
});
