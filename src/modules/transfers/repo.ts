import { type Kysely, type Selectable, sql } from "kysely";
import type { OnNetwork } from "../../chain/network.ts";
import * as sent from "../../chain/sent-transactions.ts";
import type { Environment } from "../../config.ts";
import type { BreakerState } from "../../domain/circuit-breaker.ts";
import {
  COMPLETED_PAYOUT,
  OPEN_PAYOUT,
  type PayoutStatus,
  type TransferKindName,
} from "../../domain/payout-state.ts";
import { columnList, columnsOf } from "../../platform/db/columns.ts";
import type { Fence } from "../../platform/db/fences.ts";
import { oldestFirst } from "../../platform/db/page.ts";
import type { DatabaseSchema, PayoutsTable } from "../../platform/db/schema.ts";
import { idInScope } from "../../platform/db/scope.ts";
import type { Leg } from "../../rails/rail.ts";
import { outboxCtesFrom } from "../webhooks/outbox.ts";
import { type BreakerColumns, breakerFromColumns, toBreakerState } from "./breaker-repo.ts";

export type TransferRow = Selectable<PayoutsTable>;

/** A transfer's whole row (payouts, every kind), named column by column (platform/db/columns.ts). */
export const TRANSFER_COLUMNS = columnsOf<PayoutsTable>({
  id: true,
  workspace_id: true,
  environment: true,
  idempotency_key: true,
  status: true,
  token_symbol: true,
  amount: true,
  destination_address: true,
  from_address: true,
  wallet_type: true,
  description: true,
  metadata: true,
  tx_hash: true,
  user_op_hash: true,
  error: true,
  created_at: true,
  completed_at: true,
  user_operation: true,
  lease_expires_at: true,
  send_claimed_at: true,
  kind: true,
  payment_id: true,
  unmatched_transfer_id: true,
  reason: true,
  gas_limit: true,
  network: true,
});

type Db = Kysely<DatabaseSchema>;
export type Scope = { workspaceId: string; environment: Environment };

/** The scope of payouts' idempotencyKeys in the platform's idempotency records (keys.ts). */
export const PAYOUT_KEY_SCOPE = "payouts";

export interface NewTransfer {
  /** Chosen before it is recorded: the move's records (and a ledger transfer's hash) name it. */
  id: string;
  scope: Scope;
  /** The network it moves on (D22): its rail's. */
  network: string;
  idempotencyKey: string | null;
  tokenSymbol: string;
  amount: bigint;
  destinationAddress: string;
  fromAddress: string;
  walletType: string;
  description: string | null;
  metadata: Record<string, string>;
  createdAt: Date;
  kind: TransferKindName;
  /** What a refund refunds, or a return returns (kinds.ts). */
  paymentId: string | null;
  unmatchedTransferId: string | null;
  reason: string | null;
  /** The orderer's fences, run first in the transaction that records the transfer (order.ts). */
  fences?: readonly Fence[];
  /**
   * The move's legs, where it is not one transfer of `amount` to `destinationAddress` (a swap's
   * approval and router call, built for `fromAddress`). Not stored: the rail records what it sends.
   */
  legs?: Leg[];
}

/** The columns a new payout's row takes from the request (status, hashes and times aside). */
export function requestedColumns(payout: NewTransfer) {
  return {
    id: payout.id,
    workspace_id: payout.scope.workspaceId,
    environment: payout.scope.environment,
    network: payout.network,
    idempotency_key: payout.idempotencyKey,
    token_symbol: payout.tokenSymbol,
    amount: payout.amount.toString(),
    destination_address: payout.destinationAddress,
    from_address: payout.fromAddress,
    wallet_type: payout.walletType,
    description: payout.description,
    kind: payout.kind,
    payment_id: payout.paymentId,
    unmatched_transfer_id: payout.unmatchedTransferId,
    reason: payout.reason,
  };
}

export async function findById(db: Db, id: string): Promise<TransferRow | undefined> {
  return db.selectFrom("payouts").select(TRANSFER_COLUMNS).where("id", "=", id).executeTakeFirst();
}

/** A transfer of the scope by id, any kind. */
export async function findInScope(db: Db, scope: Scope, id: string): Promise<TransferRow | undefined> {
  return db.selectFrom("payouts").select(TRANSFER_COLUMNS).where(idInScope(scope, id)).executeTakeFirst();
}

/** Transfers of the scope among `ids`, any kind. */
export async function findAllInScope(db: Db, scope: Scope, ids: readonly string[]): Promise<TransferRow[]> {
  if (ids.length === 0) return [];
  return db
    .selectFrom("payouts")
    .select(TRANSFER_COLUMNS)
    .where("id", "in", ids)
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .execute();
}

/** The transfers of `kind` ordered for a payment (its refunds), oldest first. */
export async function transfersFor(
  db: Db,
  scope: Scope,
  paymentId: string,
  kind: TransferKindName,
  page: { limit: number; offset: number },
): Promise<{ rows: TransferRow[]; total: number }> {
  const base = db
    .selectFrom("payouts")
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .where("payment_id", "=", paymentId)
    .where("kind", "=", kind);
  return oldestFirst(
    base.select(TRANSFER_COLUMNS),
    base.select((eb) => eb.fn.countAll().as("total")),
    page,
  );
}

/**
 * Which of `txHashes` (an EOA's transactions, recorded before broadcast) and `userOpHashes` (a smart
 * wallet's operations, recorded before they were sent) carried transfers of `kind`.
 */
export async function recordedOfKind(
  db: Db,
  on: OnNetwork,
  kind: TransferKindName,
  hashes: { txHashes: readonly string[]; userOpHashes: readonly string[] },
): Promise<Set<string>> {
  const rows = await sql<{ hash: string }>`
    SELECT t.tx_hash AS hash FROM (${sent.recordedAmong(on, hashes.txHashes)}) t
    JOIN payouts p ON p.id = t.payout_id
    WHERE p.kind = ${kind}
    UNION
    SELECT user_op_hash AS hash FROM payouts
    WHERE environment = ${on.environment} AND network = ${on.id} AND kind = ${kind}
      AND user_op_hash = ANY(${[...hashes.userOpHashes]}::text[])
  `.execute(db);
  return new Set(rows.rows.map((r) => r.hash.toLowerCase()));
}

/** A payout by the idempotencyKey on its row (recorded by an instance older than migration 018). */
export async function findByIdempotencyKey(
  db: Db,
  scope: Scope,
  key: string,
): Promise<TransferRow | undefined> {
  return db
    .selectFrom("payouts")
    .select(TRANSFER_COLUMNS)
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .where("idempotency_key", "=", key)
    .executeTakeFirst();
}

export async function finishPayout(
  db: Db,
  id: string,
  outcome: { status: PayoutStatus; txHash: string | null; error: string | null; at: Date },
): Promise<TransferRow | undefined> {
  return db
    .updateTable("payouts")
    .set({ status: outcome.status, tx_hash: outcome.txHash, error: outcome.error, completed_at: outcome.at })
    .where("id", "=", id)
    .where("status", "=", OPEN_PAYOUT)
    .returning(TRANSFER_COLUMNS)
    .executeTakeFirst();
}

export interface PayoutCompletion {
  id: string;
  txHash: string;
  at: Date;
  /** The event of its kind (kinds.ts): payout.completed for a payout; null: none. */
  event: string | null;
  /** The event's data as the caller has it; txHash, status and userOpHash come from the row. */
  payload: Record<string, unknown>;
}

/**
 * Marks processing payouts completed and writes their `payout.completed` events, in one
 * statement. Answers each with its updated row (undefined, and no event, when the payout was no
 * longer processing) and its workspace's breaker as it stood.
 */
export async function completePayouts(
  db: Db,
  completions: readonly PayoutCompletion[],
): Promise<Array<{ row: TransferRow | undefined; breaker: BreakerState }>> {
  const event = sql`
    SELECT done.workspace_id, done.environment, done.event,
           done.payload
             || jsonb_build_object('txHash', done.tx_hash, 'status', done.status)
             || CASE WHEN done.user_op_hash IS NULL THEN '{}'::jsonb
                     ELSE jsonb_build_object('userOpHash', done.user_op_hash) END
    FROM done WHERE done.event IS NOT NULL`;
  // Kinds with no completed event (a settlement's is its payment's): no outbox in the statement.
  const outbox = completions.some((c) => c.event !== null) ? sql`, ${outboxCtesFrom(event)}` : sql``;
  const result = await sql<TransferRow & BreakerColumns & { payload: unknown; event: string | null }>`
    WITH req AS (
      SELECT * FROM unnest(
        ${completions.map((c) => c.id)}::uuid[], ${completions.map((c) => c.txHash)}::text[],
        ${completions.map((c) => c.at.toISOString())}::timestamptz[],
        ${completions.map((c) => JSON.stringify(c.payload))}::jsonb[],
        ${completions.map((c) => c.event)}::text[]
      ) AS r(id, tx_hash, completed_at, payload, event)
    ),
    done AS (
      UPDATE payouts p
      SET status = ${sql.lit(COMPLETED_PAYOUT)}, tx_hash = req.tx_hash, error = NULL, completed_at = req.completed_at
      FROM req
      WHERE p.id = req.id AND p.status = ${sql.lit(OPEN_PAYOUT)}
      RETURNING ${columnList(TRANSFER_COLUMNS, "p")}, req.payload, req.event
    )${outbox}
    SELECT ${columnList(TRANSFER_COLUMNS, "done")}, done.payload, done.event,
           b.status AS breaker_status, b.fail_streak AS breaker_fail_streak,
           b.paused_at AS breaker_paused_at, b.reason AS breaker_reason
    FROM done
    LEFT JOIN payout_breakers b ON b.workspace_id = done.workspace_id AND b.environment = done.environment`.execute(
    db,
  );
  const byId = new Map(result.rows.map((found) => [found.id, found]));
  return completions.map((completion) => {
    const found = byId.get(completion.id);
    if (!found) return { row: undefined, breaker: toBreakerState(undefined) };
    const {
      breaker_status,
      breaker_fail_streak,
      breaker_paused_at,
      breaker_reason,
      payload: _payload,
      event: _event,
      ...row
    } = found;
    const breaker = breakerFromColumns({
      breaker_status,
      breaker_fail_streak,
      breaker_paused_at,
      breaker_reason,
    });
    return { row, breaker };
  });
}
