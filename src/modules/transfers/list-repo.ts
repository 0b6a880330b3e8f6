import type { Kysely } from "kysely";
import { COMPLETED_PAYOUT, type PayoutStatus } from "../../domain/payout-state.ts";
import { keysetKey, olderThan } from "../../platform/db/page.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";
import type { Scope, TransferRow } from "../transfers/repo.ts";

// The SQL of the payouts export (D18): keyset batches, newest first, like the payments export;
// and the history of completed payouts (part 4.10).

/** A row with its exact key: created_at to the microsecond, which a JS Date would round to ms. */
export type KeyedPayoutRow = TransferRow & { key_at: string };

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
/** Completed payouts of the scope, newest first (GET /api/v1/payouts/history). */
export async function listCompleted(
  db: Kysely<DatabaseSchema>,
  scope: Scope,
  page: { limit: number; offset: number },
) {
  // scope: Scope, page: { limit: number; offset: number }) {
  const base = db
    .selectFrom("payouts")
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .where("kind", "=", "payout")
    .where("status", "=", COMPLETED_PAYOUT);
  const [rows, count] = await Promise.all([
    base
      .selectAll()
      .orderBy("created_at", "desc")
      .orderBy("id", "desc")
      .limit(page.limit)
      .offset(page.offset)
      .execute(),
    base.select((eb) => eb.fn.countAll().as("total")).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.total) };
}
