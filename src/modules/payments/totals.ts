import type { Kysely } from "kysely";
import type { DatabaseSchema } from "../../platform/db/schema.ts";
import { compactTotals, dropEmptyBuckets, vacuumTotals } from "./totals-repo.ts";

// The payments.totals job: folding the deltas the payment_totals trigger appends (migration 020).

/** Deltas folded per statement of a compaction. */
const COMPACTION_BATCH = 5_000;

/** Deltas folded between two vacuums of the table. */
const VACUUM_AFTER = 20_000;

/**
 * Folds the payment totals' deltas into their buckets (the payments.totals job): batch after
 * batch until fewer than a batch are left, then drops buckets back to nothing; vacuums the table
 * once VACUUM_AFTER deltas were folded since the last time (`state` carries the count between
 * ticks). Answers how many it folded.
 */
export async function compactPaymentTotals(
  db: Kysely<DatabaseSchema>,
  state: { foldedSinceVacuum: number } = { foldedSinceVacuum: 0 },
): Promise<number> {
  let folded = 0;
  for (;;) {
    const batch = await compactTotals(db, COMPACTION_BATCH);
    folded += batch;
    if (batch < COMPACTION_BATCH) break;
  }
  if (folded === 0) return 0;
  await dropEmptyBuckets(db);
  state.foldedSinceVacuum += folded;
  if (state.foldedSinceVacuum >= VACUUM_AFTER) {
    await vacuumTotals(db);
    state.foldedSinceVacuum = 0;
  }
  return folded;
}
