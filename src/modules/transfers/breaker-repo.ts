import { sql } from "kysely";
import { AUTO_RESUME_AFTER_MS, type BreakerState } from "../../domain/circuit-breaker.ts";
import { columnsOf } from "../../platform/db/columns.ts";
import type { Db } from "../../platform/db/database.ts";
import type { PayoutBreakersTable } from "../../platform/db/schema.ts";
import type { TenantScope as Scope } from "../../platform/db/scope.ts";

// The circuit breaker's row per workspace and environment (part 3): every kind of transfer out of
// a wallet counts toward it (domain/payout-state.ts says which failures count).

/** A breaker's whole row, named column by column (platform/db/columns.ts). */
export const BREAKER_ROW_COLUMNS = columnsOf<PayoutBreakersTable>({
  workspace_id: true,
  environment: true,
  status: true,
  fail_streak: true,
  paused_at: true,
  reason: true,
});

/** The breaker's columns as completePayouts' (and the sandbox statement's) LEFT JOIN returns them. */
export interface BreakerColumns {
  breaker_status: string | null;
  breaker_fail_streak: number | null;
  breaker_paused_at: Date | null;
  breaker_reason: string | null;
}

export function breakerFromColumns(columns: BreakerColumns): BreakerState {
  // No breaker row yet (LEFT JOIN): the columns are all null, and the breaker is the initial one.
  return toBreakerState(
    columns.breaker_status === null
      ? undefined
      : {
          status: columns.breaker_status,
          fail_streak: columns.breaker_fail_streak ?? 0,
          paused_at: columns.breaker_paused_at,
          reason: columns.breaker_reason,
        },
  );
}

export function toBreakerState(
  row: { status: string; fail_streak: number; paused_at: Date | null; reason: string | null } | undefined,
): BreakerState {
  if (!row) return { status: "active", failStreak: 0, pausedAt: null, reason: null };
  return {
    status: row.status === "paused" ? "paused" : "active",
    failStreak: row.fail_streak,
    pausedAt: row.paused_at,
    reason: row.reason,
  };
}

/** The breaker row, locked for the caller's transaction (created on first use). */
export async function lockBreaker(db: Db, scope: Scope): Promise<BreakerState> {
  await db
    .insertInto("payout_breakers")
    .values({ workspace_id: scope.workspaceId, environment: scope.environment })
    .onConflict((oc) => oc.columns(["workspace_id", "environment"]).doNothing())
    .execute();
  const row = await db
    .selectFrom("payout_breakers")
    .select(BREAKER_ROW_COLUMNS)
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .forUpdate()
    .executeTakeFirstOrThrow();
  return toBreakerState(row);
}

/** The breakers of these workspaces and environments (keys `workspaceId environment`), by key. */
export async function readBreakers(db: Db, keys: readonly string[]): Promise<Map<string, BreakerState>> {
  const scopes = keys.map((key) => key.split(" ") as [string, string]);
  const rows = await db
    .selectFrom("payout_breakers")
    .select(BREAKER_ROW_COLUMNS)
    .where(
      sql<boolean>`(workspace_id, environment) IN (SELECT * FROM unnest(${scopes.map((s) => s[0])}::uuid[], ${scopes.map((s) => s[1])}::text[]))`,
    )
    .execute();
  return new Map(rows.map((row) => [`${row.workspace_id} ${row.environment}`, toBreakerState(row)]));
}

/** The initial breaker of a workspace and environment that has none stored yet. */
export const INITIAL_BREAKER: BreakerState = toBreakerState(undefined);

export async function readBreaker(db: Db, scope: Scope): Promise<BreakerState> {
  const row = await db
    .selectFrom("payout_breakers")
    .select(BREAKER_ROW_COLUMNS)
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .executeTakeFirst();
  return toBreakerState(row);
}

export async function writeBreaker(db: Db, scope: Scope, state: BreakerState): Promise<void> {
  await db
    .updateTable("payout_breakers")
    .set({
      status: state.status,
      fail_streak: state.failStreak,
      paused_at: state.pausedAt,
      reason: state.reason,
    })
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .execute();
}

/** Workspaces per environment whose payouts are paused now (a pause lifts itself after 30 minutes). */
export async function pausedCounts(db: Db): Promise<Array<{ environment: string; count: number }>> {
  const rows = await db
    .selectFrom("payout_breakers")
    .select(["environment", (eb) => eb.fn.countAll<string>().as("count")])
    .where("status", "=", "paused")
    .where("paused_at", ">", sql<Date>`now() - make_interval(secs => ${AUTO_RESUME_AFTER_MS / 1000})`)
    .groupBy("environment")
    .execute();
  return rows.map((row) => ({ environment: row.environment, count: Number(row.count) }));
}
