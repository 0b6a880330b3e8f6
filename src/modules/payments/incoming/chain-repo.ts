import { type Kysely, sql } from "kysely";
import type { BlockRef, IncomingTransfer, OnNetwork } from "../../../chain/network.ts";
import * as sent from "../../../chain/sent-transactions.ts";
import { UNSETTLED_STATUSES } from "../../../domain/payment-state.ts";
import { firstClaim } from "../../../domain/transfer-claim.ts";
import type { UnsettledPayment } from "../../../domain/unsettled-payments.ts";
import { columnList } from "../../../platform/db/columns.ts";
import type { DatabaseSchema, PaymentRow } from "../../../platform/db/schema.ts";
import { PAYMENT_COLUMNS } from "../columns.ts";
import { type OfWallet, type WalletOn, walletIndex, walletsTable } from "../held-wallets.ts";
import { payableOn } from "../repo.ts";
import type { BatchTransition } from "../transitions.ts";

// SQL of the live crypto method: the watcher's cursor, matching transfers to payments, unmatched
// transfers, and the payments in flight between detection and settlement. The watcher's writes
// are set-based (a statement per block range, not per transfer): a backlog of thousands of
// transfers costs a few statements, not a few round trips each.

type Db = Kysely<DatabaseSchema>;

/** What the watcher claims a transfer as, beside an on-ramp session's (domain/transfer-claim.ts). */
const INBOX = firstClaim({ named: false, paired: false });
const PAYMENT = firstClaim({ named: false, paired: true });

export async function readCursor(db: Db, on: OnNetwork): Promise<{ block: bigint; hash: string } | null> {
  const row = await db
    .selectFrom("chain_cursors")
    .select(["block_number", "block_hash"])
    .where("environment", "=", on.environment)
    .where("network", "=", on.id)
    .executeTakeFirst();
  return row ? { block: BigInt(String(row.block_number)), hash: row.block_hash } : null;
}

export async function writeCursor(db: Db, on: OnNetwork, block: bigint, hash: string): Promise<void> {
  await db
    .insertInto("chain_cursors")
    .values({ environment: on.environment, network: on.id, block_number: block.toString(), block_hash: hash })
    .onConflict((oc) =>
      oc
        .columns(["environment", "network"])
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
 * Accounts for the transfers of a block range in ONE statement (D5), each once (one claim per
 * transfer, domain/transfer-claim.ts):
 * 1. `fresh` takes the transfers no claim in observed_transfers names (a rescan, or a reorg that
 *    re-included a transaction at another log index, finds them claimed) and that no on-ramp
 *    session names, and numbers those of each (address, token, amount) group in chain order;
 *    `candidates` takes, per group, as many of its oldest open payments as it has transfers
 *    (pending, not overdue, FOR UPDATE SKIP LOCKED: a payment another transaction holds is left
 *    to that transaction) and numbers them oldest first: the network's own, and those payable on
 *    several networks that list it (whichever network's watcher locks one first detects it; the
 *    others' transfers then go to their inbox); `paired` pairs the n-th transfer with the
 *    n-th payment, so each payment is matched at most once and each transfer to at most one.
 *    An x402 payment is not matched by amount: `expected` pairs it with the transfer of the
 *    transaction its facilitator signed for it (payments.x402.txHash), left out of `ranked`.
 * 2. `claimed` inserts every transfer's claim, with what it counts as (an on-ramp session's, a
 *    payment's, or the inbox's), ON CONFLICT DO NOTHING. Only the transfers this statement claimed
 *    go on: an instance racing on the same transfer waits for the other's commit and then skips it
 *    (its pairing, made on a snapshot without the other's claim, is dropped with it).
 * 3. `detected` moves the payments paired with the transfers claimed as theirs (compare-and-set
 *    on the rule's `from`, the rows being locked), on this network from then on; `unmatched` records every transfer claimed as
 *    the inbox's, with its reason (a held transfer's own, else `unmatchedReason`).
 * The result has a row per transfer claimed for a payment or the inbox, in input order; the
 * caller writes the events. `transfers` must be in chain order, without repeats.
 */
export async function matchTransfers(
  trx: Db,
  on: OnNetwork,
  transfers: readonly ObservedTransfer[],
  rule: BatchTransition,
  now: Date,
  unmatchedReason: string,
): Promise<MatchResult[]> {
  // In chunks, one after another in the caller's transaction: a later chunk sees the payments and
  // claims of the earlier ones, so the pairing is the one a single statement would make. The
  // statement's CTEs join one another, and the planner (which cannot count an unnest's rows)
  // joins them pairwise: its cost grows with the square of a chunk (1,000 transfers: ~0.3 s).
  const results: MatchResult[] = [];
  for (let start = 0; start < transfers.length; start += MATCH_CHUNK) {
    const chunk = transfers.slice(start, start + MATCH_CHUNK);
    for (const found of await matchChunk(trx, on, chunk, rule, now, unmatchedReason))
      results.push({ ...found, index: found.index + start });
  }
  return results;
}

/** Transfers matched together by one statement, at most. */
const MATCH_CHUNK = 200;

async function matchChunk(
  trx: Db,
  on: OnNetwork,
  transfers: readonly ObservedTransfer[],
  rule: BatchTransition,
  now: Date,
  unmatchedReason: string,
): Promise<MatchResult[]> {
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
        ${column((t) => firstClaim({ named: t.onramp === true, paired: false }))}::text[]
      ) WITH ORDINALITY AS o(tx_hash, log_index, block_number, block_hash, token_symbol, amount,
                             from_address, to_address, workspace_id, ordinal, matchable, reason,
                             claim, position)
    ),
    fresh AS (
      SELECT o.tx_hash, o.log_index, o.block_number, o.block_hash, o.token_symbol, o.amount,
             o.from_address, o.to_address, o.workspace_id, o.ordinal, o.matchable, o.reason, o.claim,
             o.position, lower(o.to_address) AS address
      FROM observed o
      -- One primary-key probe per transfer. As NOT EXISTS, the planner (which takes the unnest
      -- for a few rows and a young table for an empty one) could scan all of the network's
      -- claims for each transfer: a 1,000-block backlog slowed down as it went.
      LEFT JOIN LATERAL (
        SELECT 1 AS seen FROM observed_transfers c
        WHERE c.environment = ${on.environment} AND c.network = ${on.id} AND c.tx_hash = o.tx_hash
          AND c.token_symbol = o.token_symbol AND c.to_address = lower(o.to_address)
          AND c.ordinal = o.ordinal
        LIMIT 1
      ) claimed_before ON true
      WHERE o.claim = ${sql.lit(INBOX)} AND claimed_before.seen IS NULL
    ),
    expected AS (
      -- An x402 payment is paid by the transaction its facilitator signed for it, named on the
      -- payment before it was broadcast (D23), never by its amount.
      SELECT f.position, p.id AS payment_id
      FROM fresh f
      JOIN payments p ON p.x402->>'txHash' = f.tx_hash AND p.x402 IS NOT NULL
      WHERE f.matchable AND p.environment = ${on.environment} AND p.network = ${on.id}
        AND p.status = ${sql.lit(rule.from)} AND lower(p.receiving_address) = f.address
        AND p.token_symbol = f.token_symbol AND p.gross_amount = f.amount
      FOR UPDATE OF p SKIP LOCKED
    ),
    ranked AS (
      SELECT f.position, f.address, f.token_symbol, f.amount, f.matchable,
             row_number() OVER (PARTITION BY f.address, f.token_symbol, f.amount, f.matchable
                                ORDER BY f.position) AS rank
      FROM fresh f
      WHERE NOT EXISTS (SELECT 1 FROM expected e WHERE e.position = f.position)
    ),
    wanted AS (
      SELECT address, token_symbol, amount, count(*) AS n FROM ranked WHERE matchable
      GROUP BY address, token_symbol, amount
    ),
    candidates AS (
      SELECT w.address, w.token_symbol, w.amount, p.id,
             row_number() OVER (PARTITION BY w.address, w.token_symbol, w.amount
                                ORDER BY p.created_at, p.id) AS rank
      FROM wanted w
      CROSS JOIN LATERAL (
        SELECT id, created_at FROM payments
        WHERE environment = ${on.environment}
          AND ${payableOn(on.id)}
          AND status = ${sql.lit(rule.from)}
          AND payment_method = 'crypto'
          AND lower(receiving_address) = w.address
          AND token_symbol = w.token_symbol
          AND gross_amount = w.amount
          AND x402 IS NULL
          AND expires_at > ${now}
        ORDER BY created_at, id
        LIMIT w.n
        FOR UPDATE SKIP LOCKED
      ) p
    ),
    paired AS (
      SELECT f.position, c.id AS payment_id
      FROM ranked f JOIN candidates c USING (address, token_symbol, amount, rank)
      WHERE f.matchable
      UNION ALL
      SELECT position, payment_id FROM expected
    ),
    claimed AS (
      INSERT INTO observed_transfers (environment, network, tx_hash, token_symbol, to_address, ordinal,
                                      log_index, block_number, claim)
      SELECT ${on.environment}, ${on.id}, o.tx_hash, o.token_symbol, lower(o.to_address), o.ordinal, o.log_index,
             o.block_number,
             CASE WHEN pr.payment_id IS NOT NULL THEN ${sql.lit(PAYMENT)} ELSE o.claim END
      FROM observed o LEFT JOIN paired pr USING (position)
      ORDER BY o.position
      ON CONFLICT DO NOTHING
      RETURNING tx_hash, log_index, claim
    ),
    mine AS (
      SELECT f.position, f.tx_hash, f.log_index, f.block_number, f.block_hash, f.token_symbol, f.amount,
             f.from_address, f.to_address, f.workspace_id, f.reason, c.claim AS claimed_as, pr.payment_id
      FROM fresh f
      JOIN claimed c USING (tx_hash, log_index)
      LEFT JOIN paired pr USING (position)
    ),
    detected AS (
      UPDATE payments p
      SET status = ${sql.lit(rule.to)},
          network = ${on.id},
          detected_tx_hash = m.tx_hash,
          detected_log_index = m.log_index,
          detected_block = m.block_number,
          detected_block_hash = m.block_hash,
          payer_address = m.from_address,
          detected_at = ${now},
          updated_at = ${now}
      FROM mine m
      WHERE p.id = m.payment_id AND m.claimed_as = ${sql.lit(PAYMENT)} AND p.status = ${sql.lit(rule.from)}
      RETURNING ${columnList(PAYMENT_COLUMNS, "p")}
    ),
    unmatched AS (
      INSERT INTO unmatched_transfers (workspace_id, environment, network, token_symbol, amount, from_address,
                                       to_address, tx_hash, log_index, block_number, reason)
      SELECT m.workspace_id, ${on.environment}, ${on.id}, m.token_symbol, m.amount, m.from_address,
             m.to_address, m.tx_hash, m.log_index, m.block_number, m.reason
      FROM mine m
      WHERE m.claimed_as = ${sql.lit(INBOX)}
    )
    SELECT (m.position - 1)::int AS transfer_index, d.id IS NOT NULL AS matched,
           ${columnList(PAYMENT_COLUMNS, "d")}
    FROM mine m
    LEFT JOIN detected d ON d.detected_tx_hash = m.tx_hash AND d.detected_log_index = m.log_index
    ORDER BY m.position
  `.execute(trx);
  return result.rows.map(({ transfer_index, matched, ...payment }) => ({
    index: transfer_index,
    payment: matched ? payment : null,
  }));
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
    RETURNING ${columnList(PAYMENT_COLUMNS, "p")}
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

/** The payments of network `on` in `status`, oldest first. */
export async function paymentsInStatus(
  db: Db,
  on: OnNetwork,
  status: string,
  limit: number,
): Promise<PaymentRow[]> {
  return db
    .selectFrom("payments")
    .select(PAYMENT_COLUMNS)
    .where("environment", "=", on.environment)
    .where("network", "=", on.id)
    .where("status", "=", status)
    .orderBy("created_at", "asc")
    .limit(limit)
    .execute();
}

/**
 * The payments received on each of `wallets` and not settled yet (UNSETTLED_STATUSES), each with
 * whether its settlement transfers are recorded, in ONE statement.
 */
export async function unsettledOf(
  db: Db,
  wallets: readonly WalletOn[],
): Promise<OfWallet<UnsettledPayment>[]> {
  const { rows } = await sql<{
    i: string;
    id: string;
    token_symbol: string;
    gross_amount: string;
    splits: number;
    recorded: boolean;
  }>`
    SELECT w.i, p.id, p.token_symbol,
      -- What the wallet received for it: an attached transfer's amount (D19), else the gross.
      coalesce(p.amount_received, p.gross_amount) AS gross_amount,
      coalesce(jsonb_array_length(p.split_snapshot), 0)::int AS splits,
      -- Its settlement's transfer is recorded (migration 030), or its legs were (before it).
      (p.settlement_transfer_id IS NOT NULL OR ${sent.recordedForPayment(sql`p.id`)}) AS recorded
    FROM ${walletsTable(wallets)}
    JOIN payments p
      ON p.environment = w.environment AND p.network = w.network AND lower(p.receiving_address) = w.address
    WHERE p.status IN (${sql.join(UNSETTLED_STATUSES)})`.execute(db);
  return rows.map((row) => ({
    wallet: walletIndex(row.i),
    item: {
      id: row.id,
      token: row.token_symbol,
      gross: BigInt(row.gross_amount),
      splits: Number(row.splits),
      settlementRecorded: row.recorded,
    },
  }));
}
