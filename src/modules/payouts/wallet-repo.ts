import { type Kysely, sql } from "kysely";
import type { Environment } from "../../config.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";
import { type StatusTotal, totalsByStatus as statusTotals } from "../../platform/db/status-totals.ts";

// SQL of the wallet's stats over payouts (the payments side is the payments service's).

/** Count and volume of the scope's payouts per status and token (refunds and returns are not payouts). */
export function totalsByStatus(
  db: Kysely<DatabaseSchema>,
  scope: { workspaceId: string; environment: Environment },
): Promise<StatusTotal[]> {
  return statusTotals(db, { table: "payouts", amount: "amount" }, scope, sql<boolean>`kind = 'payout'`);
}
