import type { Kysely } from "kysely";
import { COMPLETED_PAYOUT, type PayoutStatus, type TransferKindName } from "../../domain/payout-state.ts";
import { keysetKey, olderThan } from "../../platform/db/page.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";
import { type Scope, TRANSFER_COLUMNS, type TransferRow } from "./repo.ts";

// The SQL of the lists of one kind of transfer (a payouts list, its CSV export of D18, the history
// of completed payouts of part 4.10): keyset batches, newest first, like the payments export.

/** A row with its exact key: created_at to the microsecond, which a JS Date would round to ms. */
export type KeyedTransferRow = TransferRow & { key_at: string };

/**
 * Up to `limit` transfers of `kind` of the scope (of `status` and on `network`, when given), newest first, after the row
 * `after` (its created_at ISO with microseconds, and id). The row comparison keeps every batch as
 * cheap as the first instead of an OFFSET that grows with the export.
 */
export async function transfersAfter(
  db: Kysely<DatabaseSchema>,
  scope: Scope,
  kind: TransferKindName,
  only: { status?: PayoutStatus | undefined; network?: string | undefined },
  after: { createdAt: string; id: string } | null,
  limit: number,
): Promise<KeyedTransferRow[]> {
  let select = db
    .selectFrom("payouts")
    .select(TRANSFER_COLUMNS)
    .select(keysetKey.as("key_at"))
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .where("kind", "=", kind);
  if (only.status) select = select.where("status", "=", only.status);
  if (only.network) select = select.where("network", "=", only.network);
  if (after) {
    select = select.where(olderThan(after));
  }
  return select.orderBy("created_at", "desc").orderBy("id", "desc").limit(limit).execute();
}

/** One transfer of `kind` of the scope by id (lower-case UUID). */
export async function transferById(
  db: Kysely<DatabaseSchema>,
  scope: Scope,
  kind: TransferKindName,
  id: string,
): Promise<KeyedTransferRow | undefined> {
  return db
    .selectFrom("payouts")
    .select(TRANSFER_COLUMNS)
    .select(keysetKey.as("key_at"))
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .where("kind", "=", kind)
    .where("id", "=", id)
    .executeTakeFirst();
}
/** Completed transfers of `kind` of the scope, newest first (GET /api/v1/payouts/history). */
export async function listCompleted(
  db: Kysely<DatabaseSchema>,
  scope: Scope,
  kind: TransferKindName,
  page: { limit: number; offset: number },
) {
  // scope: Scope, page: { limit: number; offset: number }) {
  const base = db
    .selectFrom("payouts")
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .where("kind", "=", kind)
    .where("status", "=", COMPLETED_PAYOUT);
  const [rows, count] = await Promise.all([
    base
      .select(TRANSFER_COLUMNS)
      .orderBy("created_at", "desc")
      .orderBy("id", "desc")
      .limit(page.limit)
      .offset(page.offset)
      .execute(),
    base.select((eb) => eb.fn.countAll().as("total")).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.total) };
}
