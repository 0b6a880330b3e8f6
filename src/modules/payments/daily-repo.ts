import { type Kysely, sql } from "kysely";
import { SETTLED_STATUS } from "../../domain/payment-state.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";
import type { Tenant } from "../../platform/http/auth.ts";

// Payments per day (UTC) of a tenant since a day: how many were created, and the gross of those
// that were paid (forwarded) per token. Read through the list index (workspace, environment,
// created_at).

export interface DailyRow {
  day: string;
  token_symbol: string;
  count: string;
  paid: string;
}

export async function dailyTotals(
  db: Kysely<DatabaseSchema>,
  tenant: Tenant,
  since: Date,
): Promise<DailyRow[]> {
  const { rows } = await sql<DailyRow>`
    SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, token_symbol,
           count(*)::text AS count,
           coalesce(sum(gross_amount) FILTER (WHERE status = ${SETTLED_STATUS}), 0)::text AS paid
    FROM payments
    WHERE workspace_id = ${tenant.workspaceId} AND environment = ${tenant.environment} AND created_at >= ${since}
    GROUP BY 1, 2
    ORDER BY 1, 2`.execute(db);
  return rows;
}
