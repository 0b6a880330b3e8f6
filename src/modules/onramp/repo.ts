import { type Selectable, sql } from "kysely";
import type { OnNetwork } from "../../chain/network.ts";
import type { Environment } from "../../config.ts";
import {
  FULFILLED,
  type OnrampStatus,
  onrampStatusesBefore,
  UNENDED_ONRAMP_STATUSES,
} from "../../domain/onramp-state.ts";
import type { Db } from "../../platform/db/database.ts";
import { newestFirst } from "../../platform/db/page.ts";
import type { OnrampSessionsTable } from "../../platform/db/schema-exchange.ts";
import { idInScope } from "../../platform/db/scope.ts";
import { ONRAMP_COLUMNS } from "./columns.ts";

// The SQL of on-ramp sessions (D17, migrations 024 and 025). Status changes are compare-and-sets
// whose `from` the transition table gives (domain/onramp-state.ts).

export type OnrampRow = Selectable<OnrampSessionsTable>;

export type Scope = { workspaceId: string; environment: Environment };

export interface NewOnrampSession {
  id: string;
  scope: Scope;
  /** The network it delivers on (D22). */
  network: string;
  provider: "card" | "sandbox";
  providerSessionId: string;
  status: OnrampStatus;
  walletType: string;
  walletAddress: string;
  destinationCurrency: string;
  destinationNetwork: string;
  sourceAmount: string | null;
  destinationAmount: string | null;
  /** Encrypted already. */
  clientSecret: string | null;
  redirectUrl: string | null;
  transactionId: string | null;
  credited: { amount: bigint; at: Date } | null;
  createdAt: Date;
}

export async function insertSession(db: Db, session: NewOnrampSession): Promise<OnrampRow> {
  return db
    .insertInto("onramp_sessions")
    .values({
      id: session.id,
      workspace_id: session.scope.workspaceId,
      environment: session.scope.environment,
      network: session.network,
      provider: session.provider,
      provider_session_id: session.providerSessionId,
      status: session.status,
      wallet_type: session.walletType,
      wallet_address: session.walletAddress,
      destination_currency: session.destinationCurrency,
      destination_network: session.destinationNetwork,
      source_amount: session.sourceAmount,
      destination_amount: session.destinationAmount,
      client_secret: session.clientSecret,
      redirect_url: session.redirectUrl,
      transaction_id: session.transactionId,
      credited_amount: session.credited?.amount ?? null,
      completed_at: session.credited?.at ?? null,
      created_at: session.createdAt,
      updated_at: session.createdAt,
    })
    .returning(ONRAMP_COLUMNS)
    .executeTakeFirstOrThrow();
}

export async function findInScope(db: Db, scope: Scope, id: string): Promise<OnrampRow | undefined> {
  return db
    .selectFrom("onramp_sessions")
    .select(ONRAMP_COLUMNS)
    .where(idInScope(scope, id))
    .executeTakeFirst();
}

/** The session the provider names, locked for the event that changes it. */
export async function lockByProviderId(
  trx: Db,
  environment: Environment,
  providerSessionId: string,
): Promise<OnrampRow | undefined> {
  return trx
    .selectFrom("onramp_sessions")
    .select(ONRAMP_COLUMNS)
    .where("environment", "=", environment)
    .where("provider_session_id", "=", providerSessionId)
    .forUpdate()
    .executeTakeFirst();
}

/** A page of the scope's sessions, newest first, with the total. */
export function listSessions(db: Db, scope: Scope, page: { limit: number; offset: number }) {
  const base = db
    .selectFrom("onramp_sessions")
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment);
  return newestFirst(
    base.select(ONRAMP_COLUMNS),
    base.select((eb) => eb.fn.countAll<string>().as("total")),
    page,
  );
}

/** Moves the session to `to` with what the provider now says, if the table lets it; the new row. */
export async function moveStatus(
  trx: Db,
  id: string,
  to: OnrampStatus,
  facts: {
    sourceAmount: string | null;
    destinationAmount: string | null;
    transactionId: string | null;
    at: Date;
  },
): Promise<OnrampRow | undefined> {
  const from = onrampStatusesBefore(to);
  if (from.length === 0) return undefined;
  return trx
    .updateTable("onramp_sessions")
    .set((eb) => ({
      status: to,
      source_amount: eb.fn.coalesce(eb.val(facts.sourceAmount), eb.ref("source_amount")),
      destination_amount: eb.fn.coalesce(eb.val(facts.destinationAmount), eb.ref("destination_amount")),
      transaction_id: eb.fn.coalesce(eb.val(facts.transactionId), eb.ref("transaction_id")),
      updated_at: facts.at,
    }))
    .where("id", "=", id)
    .where("status", "in", from)
    .returning(ONRAMP_COLUMNS)
    .executeTakeFirst();
}

/**
 * Fulfilled sessions not credited yet and not given up, least recently looked at first (what the
 * confirmation job takes): each at most once per a tenth of the time since it last changed
 * (fulfilled, or its transaction named), and at least once per `maxSpacingMs`.
 */
export async function toConfirm(
  db: Db,
  on: OnNetwork,
  now: Date,
  maxSpacingMs: number,
  limit: number,
): Promise<OnrampRow[]> {
  return db
    .selectFrom("onramp_sessions")
    .select(ONRAMP_COLUMNS)
    .where("environment", "=", on.environment)
    .where("network", "=", on.id)
    .where("status", "=", sql.lit(FULFILLED))
    .where("completed_at", "is", null)
    .where("confirm_given_up_at", "is", null)
    .where("transaction_id", "is not", null)
    .where((eb) =>
      eb.or([
        eb("confirm_checked_at", "is", null),
        eb(
          "confirm_checked_at",
          "<",
          sql<Date>`${now}::timestamptz - least(${`${maxSpacingMs} milliseconds`}::interval, (${now}::timestamptz - updated_at) / 10)`,
        ),
      ]),
    )
    .orderBy("confirm_checked_at", (ob) => ob.asc().nullsFirst())
    .limit(limit)
    .execute();
}

/** Notes that the confirmation job looked at the session (it takes the least recently looked at first). */
export async function markChecked(db: Db, id: string, at: Date): Promise<void> {
  await db.updateTable("onramp_sessions").set({ confirm_checked_at: at }).where("id", "=", id).execute();
}

/** The confirmation job stops looking for the session's transaction. */
export async function giveUpConfirming(db: Db, id: string, at: Date): Promise<void> {
  await db
    .updateTable("onramp_sessions")
    .set({ confirm_given_up_at: at, confirm_checked_at: at })
    .where("id", "=", id)
    .execute();
}

/** Locks the session for its credit; undefined when it is no longer fulfilled and uncredited. */
export async function lockUncredited(trx: Db, id: string): Promise<OnrampRow | undefined> {
  return trx
    .selectFrom("onramp_sessions")
    .select(ONRAMP_COLUMNS)
    .where("id", "=", id)
    .where("status", "=", FULFILLED)
    .where("completed_at", "is", null)
    .forUpdate()
    .executeTakeFirst();
}

/**
 * Card sessions the provider may have moved without us hearing (reconcile.ts): not ended, or
 * fulfilled without their transaction named; unchanged since `quietSince`; made at or after
 * `madeSince`; not asked about within a tenth of their age (at least since `quietSince`), so an
 * abandoned session is asked less and less often. The least recently asked first (never asked:
 * first of all). The provider and statuses are literals, so that every plan of the query (a
 * prepared statement's generic one too) matches the partial index of migration 025.
 */
export async function toReconcile(
  db: Db,
  environments: readonly Environment[],
  window: { now: Date; quietSince: Date; madeSince: Date },
  limit: number,
): Promise<OnrampRow[]> {
  if (environments.length === 0) return [];
  return db
    .selectFrom("onramp_sessions")
    .select(ONRAMP_COLUMNS)
    .where("environment", "in", [...environments])
    .where("provider", "=", sql.lit("card"))
    .where((eb) =>
      eb.or([
        eb(
          "status",
          "in",
          UNENDED_ONRAMP_STATUSES.map((status) => sql.lit(status)),
        ),
        eb.and([eb("status", "=", sql.lit(FULFILLED)), eb("transaction_id", "is", null)]),
      ]),
    )
    .where("created_at", ">=", window.madeSince)
    .where("updated_at", "<", window.quietSince)
    .where((eb) =>
      eb.or([
        eb("reconciled_at", "is", null),
        eb(
          "reconciled_at",
          "<",
          sql<Date>`least(${window.quietSince}::timestamptz, ${window.now}::timestamptz - (${window.now}::timestamptz - created_at) / 10)`,
        ),
      ]),
    )
    .orderBy("reconciled_at", (ob) => ob.asc().nullsFirst())
    .orderBy("updated_at", "asc")
    .limit(limit)
    .execute();
}

/** Notes that the reconciler asked the provider about the session (before it asks). */
export async function markReconciled(db: Db, id: string, at: Date): Promise<void> {
  await db.updateTable("onramp_sessions").set({ reconciled_at: at }).where("id", "=", id).execute();
}

/** The session that names transaction `txHash` (lower-case), if any. */
/** The session whose delivery is transaction `txHash` of network `on` (one at most: a unique index). */
export async function sessionOfTransaction(trx: Db, on: OnNetwork, txHash: string) {
  return trx
    .selectFrom("onramp_sessions")
    .select("id")
    .where("environment", "=", on.environment)
    .where("network", "=", on.id)
    .where("transaction_id", "=", txHash)
    .executeTakeFirst();
}

/** Names the transaction of a fulfilled session that did not have one (a later event of the same status). */
export async function fillTransaction(
  trx: Db,
  id: string,
  txHash: string,
  at: Date,
): Promise<OnrampRow | undefined> {
  return trx
    .updateTable("onramp_sessions")
    .set({ transaction_id: txHash, updated_at: at })
    .where("id", "=", id)
    .where("status", "=", FULFILLED)
    .where("transaction_id", "is", null)
    .returning(ONRAMP_COLUMNS)
    .executeTakeFirst();
}

/** Credits a fulfilled session once: what the chain moved, when; undefined if it was credited already. */
export async function credit(trx: Db, id: string, amount: bigint, at: Date): Promise<OnrampRow | undefined> {
  return trx
    .updateTable("onramp_sessions")
    .set({ credited_amount: amount, completed_at: at, updated_at: at })
    .where("id", "=", id)
    .where("status", "=", FULFILLED)
    .where("completed_at", "is", null)
    .returning(ONRAMP_COLUMNS)
    .executeTakeFirst();
}

/**
 * Which of `txHashes` delivered on-ramp sessions in `environment`, as `txHash|wallet|currency`
 * (hash and wallet lower-case): the watcher claims those transfers for their sessions, and only
 * those (a transaction may pay other wallets, or other tokens, too).
 */
export async function onrampTransactions(
  db: Db,
  on: OnNetwork,
  txHashes: readonly string[],
): Promise<Set<string>> {
  if (txHashes.length === 0) return new Set();
  const rows = await db
    .selectFrom("onramp_sessions")
    .select(["transaction_id", "wallet_address", "destination_currency"])
    .where("environment", "=", on.environment)
    .where("network", "=", on.id)
    .where(
      "transaction_id",
      "in",
      txHashes.map((h) => h.toLowerCase()),
    )
    .execute();
  return new Set(
    rows.flatMap((r) =>
      r.transaction_id
        ? [`${r.transaction_id}|${r.wallet_address.toLowerCase()}|${r.destination_currency}`]
        : [],
    ),
  );
}

/**
 * Sessions to `addresses` (lower-case) that may deliver unannounced, and how much: not ended, or
 * fulfilled without a transaction named, changed since `since` (a hold is bounded in time), their
 * destination amount known (only a transfer of that amount can be their delivery).
 */
export async function awaitingDelivery(db: Db, on: OnNetwork, addresses: readonly string[], since: Date) {
  if (addresses.length === 0) return [];
  return db
    .selectFrom("onramp_sessions")
    .select(["id", "wallet_address", "destination_currency", "destination_amount"])
    .where("environment", "=", on.environment)
    .where("network", "=", on.id)
    .where((eb) => eb(eb.fn("lower", ["wallet_address"]), "in", addresses))
    .where("updated_at", ">=", since)
    .where("destination_amount", "is not", null)
    .where((eb) =>
      eb.or([
        eb("status", "in", UNENDED_ONRAMP_STATUSES),
        eb.and([eb("status", "=", FULFILLED), eb("transaction_id", "is", null)]),
      ]),
    )
    .execute();
}

/**
 * Sessions made since `madeSince` that the provider fulfilled and that will not credit by
 * themselves, counted by environment and why: `fulfilled_without_transaction` (no transaction
 * named since before `namedBy`), `confirmation_given_up` (confirm.ts stopped looking).
 */
export async function stuckCounts(
  db: Db,
  window: { madeSince: Date; namedBy: Date },
): Promise<Array<{ environment: string; reason: string; count: number }>> {
  const rows = await sql<{ environment: string; reason: string; count: string }>`
    SELECT environment,
           CASE WHEN transaction_id IS NULL THEN 'fulfilled_without_transaction'
                ELSE 'confirmation_given_up' END AS reason,
           count(*) AS count
    FROM onramp_sessions
    WHERE status = ${sql.lit(FULFILLED)} AND completed_at IS NULL AND created_at >= ${window.madeSince}
      AND ((transaction_id IS NULL AND updated_at < ${window.namedBy}) OR confirm_given_up_at IS NOT NULL)
    GROUP BY 1, 2
  `.execute(db);
  return rows.rows.map((r) => ({ environment: r.environment, reason: r.reason, count: Number(r.count) }));
}
