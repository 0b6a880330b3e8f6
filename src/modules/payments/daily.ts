import type { Kysely } from "kysely";
import { formatAmount, TOKEN_DECIMALS, type TokenSymbol } from "../../domain/money.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import { dailyTotals } from "./totals-repo.ts";

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
