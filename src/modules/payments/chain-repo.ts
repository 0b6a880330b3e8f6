import { type Kysely, sql } from "kysely";
import type { BlockRef, IncomingTransfer } from "../../chain/network.ts";
import * as sent from "../../chain/sent-transactions.ts";
import type { Environment } from "../../config.ts";
import { splitFee } from "../../domain/money.ts";
import { UNSETTLED_STATUSES } from "../../domain/payment-state.ts";
import { firstClaim } from "../../domain/transfer-claim.ts";
import type { UnsettledPayment } from "../../domain/unsettled-payments.ts";
import type { DatabaseSchema, PaymentRow } from "../../platform/db/schema.ts";
import * as claims from "./claims-repo.ts";
import type { BatchTransition } from "./transitions.ts";
import * as unmatchedRepo from "./unmatched-repo.ts";

type UnmatchedRow = unmatchedRepo.UnmatchedRow;

// SQL of the live crypto rail: the watcher's cursor, matching transfers to payments, unmatched
// transfers, and the payments in flight between detection and settlement. The watcher's writes
// are set-based (a statement per block range, not per transfer): a backlog of thousands of
// transfers costs a few statements, not a few round trips each.

type Db = Kysely<DatabaseSchema>;

/** The claim a transfer that goes on to a payment or the inbox starts with. */
const INBOX = firstClaim(false);

export async function readCursor(
  db: Db,
  environment: Environment,
): Promise<{ block: bigint; hash: string } | null> {
  const row = await db
    .selectFrom("chain_cursors")
    .selectAll()
    .where("environment", "=", environment)
    .executeTakeFirst();
  return row ? { block: BigInt(String(row.block_number)), hash: row.block_hash } : null;
}

export async function writeCursor(
  db: Db,
  environment: Environment,
  block: bigint,
  hash: string,
): Promise<void> {
  await db
    .insertInto("chain_cursors")
    .values({ environment, block_number: block.toString(), block_hash: hash })
    .onConflict((oc) =>
      oc
        .column("environment")
        .doUpdateSet({ block_number: block.toString(), block_hash: hash, updated_at: new Date() }),
    )
    .execute();
}

/** An incoming transfer with the workspace that owns its receiving address (null: none). */
export interface ObservedTransfer extends IncomingTransfer {
  workspaceId: string | null;
  /**
   * Set: it pays no payment, whatever payment it would match, and is recorded in the unmatched
   * inbox with this reason (sent from the workspace's own wallet; may be an on-ramp's delivery).
   */
  heldBecause?: string;
  /** An on-ramp session names its transaction: claimed as the session's, neither a payment nor an inbox item. */
  onramp?: boolean;
  /**
   * The n-th (from 0) transfer of its token to its recipient within its transaction. With the
   * transaction it identifies the transfer across reorgs, which can change the log index.
   */
  ordinal: number;
}

/** Per transfer of a matchTransfers call, in its order: the payment it detected, or null. */
export interface MatchResult {
  /** The transfer's index in the call's input. */
  index: number;
  payment: PaymentRow | null;
}

/**
 * Accounts for the transfers of a block range in ONE statement (D5), and a second one that marks
 * the claims of what it detected as payments':
 * 1. `claimed`: every transfer is inserted into observed_transfers, ON CONFLICT DO NOTHING, claimed
 *    as the inbox's (or as an on-ramp session's, when one names it: then it goes no further). Only
 *    the transfers this statement inserted go on, so one seen before (a rescan, or a reorg that
 *    re-included its transaction at another log index) is skipped, and an instance racing on the
 *    same transfer waits for the other's commit and then skips it.
 * 2. `fresh` numbers the claimed transfers of each (address, token, amount) group in chain order;
 *    `candidates` takes, per group, as many of its oldest open payments as it has transfers
 *    (pending, not overdue, FOR UPDATE SKIP LOCKED: a payment another transaction holds is left
 *    to that transaction) and numbers them oldest first. The n-th transfer pairs with the n-th
 *    payment, so each payment is matched at most once and each transfer to at most one payment.
 * 3. `detected` moves the paired payments (compare-and-set on the rule's `from`); `unmatched`
 *    records every claimed transfer that moved no payment, with its reason (a held transfer's own,
 *    else `unmatchedReason`).
 * The result has a row per transfer claimed for the inbox or a payment, in input order; the caller
 * writes the events. `transfers` must be in chain order, without repeats.
 */
export async function matchTransfers(
  trx: Db,
  environment: Environment,
  transfers: readonly ObservedTransfer[],
  rule: BatchTransition,
  now: Date,
  unmatchedReason: string,
): Promise<MatchResult[]> {
  if (transfers.length === 0) return [];
  const column = <T>(pick: (t: ObservedTransfer) => T) => transfers.map(pick);
  const result = await sql<PaymentRow & { transfer_index: number; matched: boolean }>`
    WITH observed AS (
      SELECT * FROM unnest(
        ${column((t) => t.txHash)}::text[],
        ${column((t) => t.logIndex)}::int[],
        ${column((t) => t.blockNumber.toString())}::bigint[],
        ${column((t) => t.blockHash)}::text[],
        ${column((t) => t.token)}::text[],
        ${column((t) => t.amount.toString())}::numeric[],
        ${column((t) => t.from)}::text[],
        ${column((t) => t.to)}::text[],
        ${column((t) => t.workspaceId)}::uuid[],
        ${column((t) => t.ordinal)}::int[],
        ${column((t) => t.heldBecause === undefined)}::bool[],
        ${column((t) => t.heldBecause ?? unmatchedReason)}::text[],
        ${column((t) => firstClaim(t.onramp === true))}::text[]
      ) WITH ORDINALITY AS o(tx_hash, log_index, block_number, block_hash, token_symbol, amount,
                             from_address, to_address, workspace_id, ordinal, matchable, reason,
                             claim, position)
    ),
    claimed AS (
      INSERT INTO observed_transfers (environment, tx_hash, token_symbol, to_address, ordinal,
                                      log_index, block_number, claim)
      SELECT ${environment}, tx_hash, token_symbol, lower(to_address), ordinal, log_index, block_number,
             claim
      FROM observed ORDER BY position
      ON CONFLICT DO NOTHING
      RETURNING tx_hash, log_index, claim
    ),
    fresh AS (
      SELECT o.*, lower(o.to_address) AS address,
             row_number() OVER (PARTITION BY lower(o.to_address), o.token_symbol, o.amount, o.matchable
                                ORDER BY o.position) AS rank
      FROM observed o JOIN claimed c USING (tx_hash, log_index)
      WHERE c.claim = ${sql.lit(INBOX)}
    ),
    wanted AS (
      SELECT address, token_symbol, amount, count(*) AS n FROM fresh WHERE matchable
      GROUP BY address, token_symbol, amount
    ),
    candidates AS (
      SELECT w.address, w.token_symbol, w.amount, p.id,
             row_number() OVER (PARTITION BY w.address, w.token_symbol, w.amount
                                ORDER BY p.created_at, p.id) AS rank
      FROM wanted w
      CROSS JOIN LATERAL (
        SELECT id, created_at FROM payments
        WHERE environment = ${environment}
          AND status = ${sql.lit(rule.from)}
          AND payment_method = 'crypto'
          AND lower(receiving_address) = w.address
          AND token_symbol = w.token_symbol
          AND gross_amount = w.amount
          AND expires_at > ${now}
        ORDER BY created_at, id
        LIMIT w.n
        FOR UPDATE SKIP LOCKED
      ) p
    ),
    detected AS (
      UPDATE payments p
      SET status = ${sql.lit(rule.to)},
          detected_tx_hash = f.tx_hash,
          detected_log_index = f.log_index,
          detected_block = f.block_number,
          detected_block_hash = f.block_hash,
          payer_address = f.from_address,
          detected_at = ${now},
          updated_at = ${now}
      FROM fresh f
      JOIN candidates c USING (address, token_symbol, amount, rank)
      WHERE p.id = c.id AND p.status = ${sql.lit(rule.from)} AND f.matchable
      RETURNING p.*
    ),
    unmatched AS (
      INSERT INTO unmatched_transfers (workspace_id, environment, token_symbol, amount, from_address,
                                       to_address, tx_hash, log_index, block_number, reason)
      SELECT f.workspace_id, ${environment}, f.token_symbol, f.amount, f.from_address,
             f.to_address, f.tx_hash, f.log_index, f.block_number, f.reason
      FROM fresh f
      WHERE NOT EXISTS (
        SELECT 1 FROM detected d WHERE d.detected_tx_hash = f.tx_hash AND d.detected_log_index = f.log_index
      )
    )
    SELECT (f.position - 1)::int AS transfer_index, d.id IS NOT NULL AS matched, d.*
    FROM fresh f
    LEFT JOIN detected d ON d.detected_tx_hash = f.tx_hash AND d.detected_log_index = f.log_index
    ORDER BY f.position
  `.execute(trx);
  const results = result.rows.map(({ transfer_index, matched, ...payment }) => ({
    index: transfer_index,
    payment: matched ? payment : null,
  }));
  const paid = results.flatMap((r) => (r.payment ? [transfers[r.index] as ObservedTransfer] : []));
  await claims.moveClaims(trx, environment, paid, "payment_detected");
  return results;
}

/** A detection as the watcher checked it against the chain: still included at `block`. */
export interface CheckedDetection {
  paymentId: string;
  txHash: string;
  logIndex: number;
  block: BlockRef;
}

const checkedColumns = (detections: readonly CheckedDetection[]) => sql`unnest(
  ${detections.map((d) => d.paymentId)}::uuid[],
  ${detections.map((d) => d.txHash)}::text[],
  ${detections.map((d) => d.logIndex)}::int[],
  ${detections.map((d) => d.block.number.toString())}::bigint[],
  ${detections.map((d) => d.block.hash)}::text[]
) AS c(payment_id, tx_hash, log_index, block_number, block_hash)`;

/**
 * Moves the payments of `detections` by `rule` (confirmations met) in one statement, recording the
 * block their transfer is in now. Compare-and-set on status and on the detecting transfer: a row
 * that changed since it was checked is left alone. Returns the rows moved, for their events.
 */
export async function confirmDetections(
  trx: Db,
  detections: readonly CheckedDetection[],
  rule: BatchTransition,
  at: Date,
): Promise<PaymentRow[]> {
  if (detections.length === 0) return [];
  const result = await sql<PaymentRow>`
    UPDATE payments p
    SET status = ${sql.lit(rule.to)},
        detected_block = c.block_number,
        detected_block_hash = c.block_hash,
        confirmed_at = ${at},
        updated_at = ${at}
    FROM ${checkedColumns(detections)}
    WHERE p.id = c.payment_id AND p.status = ${sql.lit(rule.from)}
      AND p.detected_tx_hash = c.tx_hash AND p.detected_log_index = c.log_index
    RETURNING p.*
  `.execute(trx);
  return result.rows;
}

/**
 * Records that the detecting transfers of still-unconfirmed payments (in `rule.from`, waiting for
 * their confirmations) now sit in other blocks.
 */
export async function moveDetections(
  trx: Db,
  detections: readonly CheckedDetection[],
  rule: BatchTransition,
): Promise<void> {
  if (detections.length === 0) return;
  await sql`
    UPDATE payments p
    SET detected_block = c.block_number, detected_block_hash = c.block_hash
    FROM ${checkedColumns(detections)}
    WHERE p.id = c.payment_id AND p.status = ${sql.lit(rule.from)}
      AND p.detected_tx_hash = c.tx_hash AND p.detected_log_index = c.log_index
  `.execute(trx);
}

/** A detection whose transfer left the chain, with the amount the payment asked for. */
export interface RevertedDetection {
  paymentId: string;
  txHash: string;
  logIndex: number;
  /** The payment's gross amount: its fee and net are computed on it again. */
  gross: bigint;
}

/**
 * The detecting transfers left the chain: moves the payments by `rule` (back to waiting) and
 * forgets the detections. A payment the merchant had attached an inbox transfer to (D19) also
 * forgets what that transfer carried (amountReceived; its fee and net are the gross's again), and
 * the transfer is open in the inbox again, still claimed as the inbox's, so that it is attached
 * again (once it is mined again) rather than recorded twice. The other transfers' claims are given
 * back, so that one mined again is matched again. Same compare-and-set as confirmDetections; in
 * this order: payments, inbox items, claims. Returns the payments moved and the reopened transfers.
 */
export async function revertDetections(
  trx: Db,
  environment: Environment,
  detections: readonly RevertedDetection[],
  rule: BatchTransition,
  at: Date,
): Promise<{ payments: PaymentRow[]; reopened: UnmatchedRow[] }> {
  if (detections.length === 0) return { payments: [], reopened: [] };
  const amounts = detections.map((d) => splitFee(d.gross));
  const result = await sql<PaymentRow & { released_tx_hash: string; released_log_index: number }>`
    UPDATE payments p
    SET status = ${sql.lit(rule.to)},
        detected_tx_hash = NULL,
        detected_log_index = NULL,
        detected_block = NULL,
        detected_block_hash = NULL,
        payer_address = NULL,
        detected_at = NULL,
        amount_received = NULL,
        fee_amount = r.fee,
        net_amount = r.net,
        updated_at = ${at}
    FROM unnest(
      ${detections.map((d) => d.paymentId)}::uuid[],
      ${detections.map((d) => d.txHash)}::text[],
      ${detections.map((d) => d.logIndex)}::int[],
      ${amounts.map((a) => a.fee.toString())}::numeric[],
      ${amounts.map((a) => a.net.toString())}::numeric[]
    ) AS r(payment_id, tx_hash, log_index, fee, net)
    WHERE p.id = r.payment_id AND p.status = ${sql.lit(rule.from)}
      AND p.detected_tx_hash = r.tx_hash AND p.detected_log_index = r.log_index
    RETURNING p.*, r.tx_hash AS released_tx_hash, r.log_index AS released_log_index
  `.execute(trx);
  const reverted = result.rows.map(({ released_tx_hash, released_log_index, ...payment }) => ({
    payment,
    place: { txHash: released_tx_hash, logIndex: released_log_index },
  }));
  const reopened = await unmatchedRepo.reopenAttached(
    trx,
    reverted.map((r) => r.payment.id),
  );
  // An attached payment's detection is its transfer's first-seen place.
  const placeOf = (p: { txHash: string; logIndex: number }) => `${p.txHash}|${p.logIndex}`;
  const attached = new Set(reopened.map((u) => placeOf({ txHash: u.tx_hash, logIndex: u.log_index })));
  const places = reverted.map((r) => r.place);
  await claims.moveClaimsAt(
    trx,
    environment,
    places.filter((p) => attached.has(placeOf(p))),
    "attachment_reverted",
  );
  await claims.releaseClaimsAt(
    trx,
    environment,
    places.filter((p) => !attached.has(placeOf(p))),
  );
  return { payments: reverted.map((r) => r.payment), reopened };
}

export async function paymentsInStatus(
  db: Db,
  environment: Environment,
  status: string,
  limit: number,
): Promise<PaymentRow[]> {
  return db
    .selectFrom("payments")
    .selectAll()
    .where("environment", "=", environment)
    .where("status", "=", status)
    .orderBy("created_at", "asc")
    .limit(limit)
    .execute();
}

/**
 * The payments received on `address` and not settled yet (UNSETTLED_STATUSES), each with whether
 * its settlement transfers are recorded.
 */
export async function unsettledOn(
  db: Db,
  environment: Environment,
  address: string,
): Promise<UnsettledPayment[]> {
  const rows = await db
    .selectFrom("payments as p")
    .select([
      "p.id",
      "p.token_symbol",
      // What the wallet received for it: an attached transfer's amount (D19), else the gross.
      sql<string>`coalesce(p.amount_received, p.gross_amount)`.as("gross_amount"),
      sql<number>`coalesce(jsonb_array_length(p.split_snapshot), 0)::int`.as("splits"),
      sent.recordedForPayment(sql`p.id`).as("recorded"),
    ])
    .where("p.environment", "=", environment)
    .where("p.status", "in", UNSETTLED_STATUSES)
    .where(sql<string>`lower(p.receiving_address)`, "=", address.toLowerCase())
    .execute();
  return rows.map((row) => ({
    id: row.id,
    token: row.token_symbol,
    gross: BigInt(row.gross_amount),
    splits: Number(row.splits),
    settlementRecorded: row.recorded,
  }));
}
