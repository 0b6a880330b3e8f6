import { type Kysely, type RawBuilder, sql } from "kysely";
import type { Environment } from "../../config.ts";
import type { DatabaseSchema } from "./schema.ts";

// The wallet's stats count payments and payouts the same way; each module's repo names its own
// table and amount column, and this writes the one query.

/** Count and volume (smallest units, as text) of one status and token. */
export interface StatusTotal {
  status: string;
  token_symbol: string;
  count: string | number;
  volume: string;
}

/** Totals of a workspace's rows in one environment per status and token, in that order. */
export async function totalsByStatus(
  db: Kysely<DatabaseSchema>,
  of: { table: "payments"; amount: "gross_amount" } | { table: "payouts"; amount: "amount" },
  scope: { workspaceId: string; environment: Environment },
  /** Which of the table's rows count (the caller's own condition); default all. */
  only: RawBuilder<boolean> = sql<boolean>`true`,
): Promise<StatusTotal[]> {
  const result = await sql<StatusTotal>`
    SELECT status, token_symbol, count(*) AS count, coalesce(sum(${sql.ref(of.amount)}), 0)::text AS volume
    FROM ${sql.table(of.table)}
    WHERE workspace_id = ${scope.workspaceId} AND environment = ${scope.environment} AND ${only}
    GROUP BY status, token_symbol ORDER BY status, token_symbol
  `.execute(db);
  return result.rows;
}
