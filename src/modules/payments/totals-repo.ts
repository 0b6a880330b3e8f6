import { type Kysely, sql } from "kysely";
import { SETTLED_STATUS } from "../../domain/payment-state.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";
import type { StatusTotal } from "../../platform/db/status-totals.ts";
import type { Tenant } from "../../platform/http/auth.ts";

// Reads and compaction of payment_totals (migrations 020, 034): the database's own running totals
// of payments per UTC day, token, status and network. A bucket is its compacted row plus the deltas written
// since; both are summed, so every read is exact at its snapshot.

type Db = Kysely<DatabaseSchema>;

export interface DailyRow {
  day: string;
  token_symbol: string;
  /** Payments created that day, whatever their status now. */
  count: string;
  /** Gross of those paid (settled), smallest units. */
  paid: string;
}

export async function dailyTotals(db: Db, tenant: Tenant, since: Date): Promise<DailyRow[]> {
  const { rows } = await sql<DailyRow>`
    SELECT to_char(day, 'YYYY-MM-DD') AS day, token_symbol,
           sum(count)::text AS count,
           coalesce(sum(volume) FILTER (WHERE status = ${SETTLED_STATUS}), 0)::text AS paid
    FROM payment_totals
    WHERE workspace_id = ${tenant.workspaceId} AND environment = ${tenant.environment}
      AND day >= (${since}::timestamptz AT TIME ZONE 'UTC')::date
    GROUP BY day, token_symbol
    HAVING sum(count) <> 0
    ORDER BY day, token_symbol`.execute(db);
  return rows;
}

/** Count and gross volume per status, token and network, as the payments themselves would sum them. */
export async function statusTotals(db: Db, tenant: Tenant): Promise<StatusTotal[]> {
  const { rows } = await sql<StatusTotal>`
    SELECT network, status, token_symbol, sum(count)::bigint AS count, sum(volume)::text AS volume
    FROM payment_totals
    WHERE workspace_id = ${tenant.workspaceId} AND environment = ${tenant.environment}
    GROUP BY status, token_symbol, network
    HAVING sum(count) <> 0
    ORDER BY status, token_symbol, network`.execute(db);
  return rows;
}

/**
 * Folds up to `limit` deltas, oldest first, into their buckets' compacted rows, in one statement:
 * the deltas are deleted and added to their buckets together or not at all. Deltas another
 * compaction holds are skipped; buckets are written in key order. Answers how many it folded.
 */
export async function compactTotals(db: Db, limit: number): Promise<number> {
  const { rows } = await sql<{ folded: string | number }>`
    WITH picked AS (
      SELECT id FROM payment_totals WHERE NOT compacted ORDER BY id LIMIT ${limit} FOR UPDATE SKIP LOCKED
    ), gone AS (
      DELETE FROM payment_totals t USING picked WHERE t.id = picked.id
      RETURNING t.workspace_id, t.environment, t.network, t.day, t.token_symbol, t.status, t.count, t.volume
    ), merged AS (
      INSERT INTO payment_totals AS b (workspace_id, environment, network, day, token_symbol, status, count, volume,
                                       compacted)
      SELECT workspace_id, environment, network, day, token_symbol, status, sum(count), sum(volume), true
      FROM gone GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
      ON CONFLICT (workspace_id, environment, network, day, token_symbol, status) WHERE compacted
      DO UPDATE SET count = b.count + excluded.count, volume = b.volume + excluded.volume
      RETURNING 1
    )
    SELECT count(*) AS folded FROM gone`.execute(db);
  return Number(rows[0]?.folded ?? 0);
}

/** Compacted buckets back to nothing: they add nothing to any read. */
export async function dropEmptyBuckets(db: Db): Promise<void> {
  await sql`DELETE FROM payment_totals WHERE compacted AND count = 0 AND volume = 0`.execute(db);
}

/**
 * Space of folded deltas made reusable, and the planner's statistics refreshed. PGlite runs no
 * autovacuum: without this the table would only grow (PostgreSQL's autovacuum does it as well).
 */
export async function vacuumTotals(db: Db): Promise<void> {
  await sql`VACUUM (ANALYZE) payment_totals`.execute(db);
}
