import { type RawBuilder, sql } from "kysely";
import type { OnNetwork } from "../../chain/network.ts";
import * as sent from "../../chain/sent-transactions.ts";
import type { Committed } from "../../domain/payout-funds.ts";
import { OPEN_PAYOUT, PAYOUT_TRANSITIONS } from "../../domain/payout-state.ts";
import type { Db } from "../../platform/db/database.ts";
import { type NewTransfer, requestedColumns, TRANSFER_COLUMNS, type TransferRow } from "./repo.ts";

// The SQL of live payouts on their way out: the balance reservation every instance sees, the
// lease of the instance sending a payout, and what the reconciler may take over.

/**
 * How long a payout belongs to the instance sending it without a renewal (TRANSFER_LEASE_SECONDS,
 * 20 by default): the sender renews it well within that (leases.ts) and when it records the
 * payout's transaction; the reconciler touches only payouts whose lease ran out: their instance
 * stopped, or gave the payout up (202). It bounds how long a stopped instance's payouts wait.
 */
const lease = (seconds: number) => sql<Date>`now() + make_interval(secs => ${seconds})`;
/** Inlined, not a parameter: a partial index's predicate matches a literal only. */
const OPEN = sql.lit(OPEN_PAYOUT);

/**
 * What is on its way out of wallet `from`, per token, and not in a balance read at a block where
 * its first `minedNonce` transactions are mined: its recorded transactions from that nonce on
 * (payouts, settlement legs, cancellations; a reverted one took its gas only; the legs of the
 * payments in `settlingWhole` are in their gross already) and its payouts
 * recorded but not signed yet (a settlement of those payments too is in their gross). `minedNonce` null (a smart wallet, whose operations have no nonce
 * order): every payout still processing.
 */
export async function committedFrom(
  trx: Db,
  on: OnNetwork,
  from: string,
  minedNonce: number | null,
  /** Payments whose whole gross is counted already: their settlement transfers are not again. */
  settlingWhole: readonly string[] = [],
): Promise<Map<string, Committed>> {
  type Row = { token_symbol: string; amount: string; transactions: number; gas_units: string };
  // Each with its gas limit where one is recorded (migration 029); the others are counted.
  const totals = sql`sum(amount)::text AS amount,
    (count(*) FILTER (WHERE gas_limit IS NULL))::int AS transactions,
    coalesce(sum(gas_limit), 0)::text AS gas_units`;
  // A settlement recorded after its payment was read as unsettled is counted once: as the gross.
  const notCountedWhole = sql`NOT (p.kind = 'settlement' AND p.payment_id = ANY(${settlingWhole}::uuid[]))`;
  const rows =
    minedNonce === null
      ? await sql<Row>`
          SELECT token_symbol, ${totals}
          FROM payouts p
          WHERE p.environment = ${on.environment} AND p.network = ${on.id} AND p.status = ${OPEN}
            AND p.from_address = ${from}
            AND ${notCountedWhole}
          GROUP BY token_symbol`.execute(trx)
      : await sql<Row>`
          SELECT token_symbol, ${totals}
          FROM (
            ${sent.leavingFrom(on, from, minedNonce, settlingWhole)}
            UNION ALL
            SELECT p.token_symbol, p.amount, p.gas_limit
            FROM payouts p
            WHERE p.environment = ${on.environment} AND p.network = ${on.id} AND p.status = ${OPEN}
            AND p.from_address = ${from}
              AND NOT ${sent.recordedForPayout(sql`p.id`)} AND ${notCountedWhole}
          ) AS leaving
          GROUP BY token_symbol`.execute(trx);
  return new Map(
    rows.rows.map((row) => [
      row.token_symbol,
      { amount: BigInt(row.amount), transactions: row.transactions, gasUnits: BigInt(row.gas_units) },
    ]),
  );
}

/**
 * Records a live payout as processing, leased to the caller. Its idempotencyKey was claimed first
 * (funds.ts); the unique key on the payouts table stays as the schema's backstop. `gasUnits`: the
 * gas limits its transactions will be signed with (an EOA's), reserved until they are recorded.
 */
export async function insertPayout(
  trx: Db,
  payout: NewTransfer,
  leaseSeconds: number,
  gasUnits?: bigint,
): Promise<TransferRow> {
  return trx
    .insertInto("payouts")
    .values({
      ...requestedColumns(payout),
      gas_limit: gasUnits === undefined ? null : gasUnits.toString(),
      status: PAYOUT_TRANSITIONS.recorded.to,
      metadata: JSON.stringify(payout.metadata),
      created_at: payout.createdAt,
      lease_expires_at: lease(leaseSeconds),
    })
    .returning(TRANSFER_COLUMNS)
    .executeTakeFirstOrThrow();
}

/**
 * The fence before a payout's money is sent, as a statement for the sender to run with the
 * record of its transaction (TransactionSender's `claim`): it returns a row only if the payout is
 * still processing, and marks it claimed for sending (failNeverSent then leaves it alone,
 * whatever its lease says) with its lease renewed. No row: the reconciler has failed it meanwhile
 * (its instance was stopped past the lease), and nothing may be sent.
 */
export function claimForSending(id: string, leaseSeconds: number): RawBuilder<unknown> {
  return sql`
    UPDATE payouts SET lease_expires_at = ${lease(leaseSeconds)}, send_claimed_at = now()
    WHERE id = ${id} AND status = ${OPEN}
    RETURNING id`;
}

/**
 * The signed user operation of a smart wallet payout, recorded before it is sent, under the same
 * fence as claimForSending: false (nothing recorded, nothing to send) once it is not processing.
 */
export async function recordUserOperation(
  db: Db,
  id: string,
  userOpHash: string,
  operation: string,
  leaseSeconds: number,
): Promise<boolean> {
  const row = await db
    .updateTable("payouts")
    .set({
      user_op_hash: userOpHash,
      user_operation: operation,
      lease_expires_at: lease(leaseSeconds),
      send_claimed_at: sql<Date>`coalesce(send_claimed_at, now())`,
    })
    .where("id", "=", id)
    .where("status", "=", OPEN_PAYOUT)
    .returning("id")
    .executeTakeFirst();
  return row !== undefined;
}

export async function renewLeases(db: Db, ids: readonly string[], leaseSeconds: number): Promise<void> {
  if (ids.length === 0) return;
  await db
    .updateTable("payouts")
    .set({ lease_expires_at: lease(leaseSeconds) })
    .where("id", "=", sql<string>`any(${ids}::uuid[])`)
    .where("status", "=", OPEN_PAYOUT)
    .execute();
}

/** The sender gives a payout up to the reconciler (its outcome is not known yet). */
export async function releaseLease(db: Db, id: string): Promise<void> {
  await db
    .updateTable("payouts")
    .set({ lease_expires_at: null })
    .where("id", "=", id)
    .where("status", "=", OPEN_PAYOUT)
    .execute();
}

/** Processing payouts of the environment that no live instance owns. */
export async function unownedProcessing(db: Db, on: OnNetwork): Promise<TransferRow[]> {
  return db
    .selectFrom("payouts")
    .select(TRANSFER_COLUMNS)
    .where("environment", "=", on.environment)
    .where("network", "=", on.id)
    .where("status", "=", OPEN_PAYOUT)
    .where((eb) => eb.or([eb("lease_expires_at", "is", null), eb("lease_expires_at", "<", sql<Date>`now()`)]))
    .execute();
}

/**
 * Fails a payout that was never sent: processing, unleased, never claimed for sending. The
 * claim is a column of the row itself, so a sender that claims it at the same moment
 * (claimForSending, recordUserOperation) makes this a no-op whichever commits first: a row
 * lock wait re-checks the row's own columns, not a subquery's snapshot.
 */
export async function failNeverSent(
  db: Db,
  id: string,
  error: string,
  at: Date,
): Promise<TransferRow | undefined> {
  return db
    .updateTable("payouts")
    .set({ status: PAYOUT_TRANSITIONS.never_sent.to, error, completed_at: at })
    .where("id", "=", id)
    .where("status", "=", OPEN_PAYOUT)
    .where("send_claimed_at", "is", null)
    .where("user_operation", "is", null)
    .where((eb) => eb.or([eb("lease_expires_at", "is", null), eb("lease_expires_at", "<", sql<Date>`now()`)]))
    .returning(TRANSFER_COLUMNS)
    .executeTakeFirst();
}
