import type { Kysely } from "kysely";
import { formatAmount, TOKEN_DECIMALS, type TokenSymbol } from "../../domain/money.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import { compactTotals, dailyTotals, dropEmptyBuckets, vacuumTotals } from "./totals-repo.ts";

/** A day's payments of one token: how many were created, and the gross of those paid. */
export interface DailyTotal {
  day: string;
  tokenSymbol: string;
  count: number;
  paidUnits: bigint;
  /** `paidUnits` in the token's D4 format. */
  paid: string;
}

export async function dailyPayments(
  db: Kysely<DatabaseSchema>,
  tenant: Tenant,
  since: Date,
): Promise<DailyTotal[]> {
  const rows = await dailyTotals(db, tenant, since);
  return rows.map((r) => {
    const paidUnits = BigInt(r.paid);
    return {
      day: r.day,
      tokenSymbol: r.token_symbol,
      count: Number(r.count),
      paidUnits,
      paid: formatAmount(paidUnits, TOKEN_DECIMALS[r.token_symbol as TokenSymbol]),
    };
  });
}

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
