import type { Kysely } from "kysely";
import type { PayoutStatus } from "../../domain/payout-state.ts";
import { keysetKey, olderThan } from "../../platform/db/page.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";
import type { PayoutRow, Scope } from "./repo.ts";

// The SQL of the payouts export (D18): keyset batches, newest first, like the payments export.

/** A row with its exact key: created_at to the microsecond, which a JS Date would round to ms. */
export type KeyedPayoutRow = PayoutRow & { key_at: string };

/**
 * Up to `limit` payouts of the scope (of `status`, when given), newest first, after the row
 * `after` (its created_at ISO with microseconds, and id). The row comparison keeps every batch as
 * cheap as the first instead of an OFFSET that grows with the export.
 */
export async function payoutsAfter(
  db: Kysely<DatabaseSchema>,
  scope: Scope,
  status: PayoutStatus | undefined,
  after: { createdAt: string; id: string } | null,
  limit: number,
): Promise<KeyedPayoutRow[]> {
  let select = db
    .selectFrom("payouts")
    .selectAll()
    .select(keysetKey.as("key_at"))
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .where("kind", "=", "payout");
  if (status) select = select.where("status", "=", status);
  if (after) {
    select = select.where(olderThan(after));
  }
  return select.orderBy("created_at", "desc").orderBy("id", "desc").limit(limit).execute();
}

/** One payout of the scope by id (lower-case UUID). */
export async function payoutById(
  db: Kysely<DatabaseSchema>,
  scope: Scope,
  id: string,
): Promise<KeyedPayoutRow | undefined> {
  return db
    .selectFrom("payouts")
    .selectAll()
    .select(keysetKey.as("key_at"))
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .where("kind", "=", "payout")
    .where("id", "=", id)
    .executeTakeFirst();
}
