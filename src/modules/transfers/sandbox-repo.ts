import { type Kysely, type RawBuilder, sql } from "kysely";
import { type LedgerTransfer, SimulatedLedger, type TransferOutcome } from "../../chain/simulated/ledger.ts";
import type { BreakerState } from "../../domain/circuit-breaker.ts";
import { COMPLETED_PAYOUT, OPEN_PAYOUT } from "../../domain/payout-state.ts";
import { columnList } from "../../platform/db/columns.ts";
import { claimCtes } from "../../platform/db/idempotency.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";
import type { HeldOf } from "../payments/service.ts";
import { outboxCtesFrom } from "../webhooks/outbox.ts";
import { type BreakerColumns, breakerFromColumns } from "./breaker-repo.ts";
import { type NewTransfer, PAYOUT_KEY_SCOPE, TRANSFER_COLUMNS, type TransferRow } from "./repo.ts";

// SQL of sandbox payouts (D3): recorded, paid from the simulated ledger and completed, with the
// claim of their idempotencyKeys and their events, in one statement (sandbox-payouts.ts).

type Db = Kysely<DatabaseSchema>;

/** The payments module's SQL of the money open inbox transfers hold on a wallet (PaymentsService.openInboxHeld). */
export type HeldInbox = (of: HeldOf) => RawBuilder<unknown>;

/** A sandbox payout to record, pay from the simulated ledger and complete in one statement. */
export interface SandboxPayout extends NewTransfer {
  transfer: LedgerTransfer;
  /** The sandbox twin of a smart wallet payout's user operation hash. */
  userOpHash: string | null;
  completedAt: Date;
  /** The request hash recorded with its idempotencyKey's claim (keys.ts). */
  requestHash: string;
  /** The completed event of its kind (`payout.completed`; null: none) and its data, should the transfer succeed. */
  event: string | null;
  payload: Record<string, unknown>;
}

export type SandboxPayoutResult =
  /** Recorded; completed with its event, or left processing for the caller to fail (reverted). */
  | { outcome: "success" | "failure_address"; row: TransferRow; breaker: BreakerState }
  /** Not recorded: the wallet's balance (read under its debit lock) is short. */
  | { outcome: "insufficient"; balance: bigint }
  /** Not recorded: its idempotencyKey was claimed before (the caller reads that payout). */
  | { outcome: "duplicate" };

/**
 * Sandbox payouts (instant and final) in ONE statement, its own transaction: each payout's transfer is decided against its wallet's balance; a payout that can be
 * paid is recorded completed with its ledger transfer and its `payout.completed` event; one to
 * the failure address is recorded processing with its reverted transfer (the caller fails it,
 * which counts toward the breaker); one that the balance cannot cover, or whose idempotencyKey
 * was claimed before (keys.ts), writes nothing. Each wallet and token debits at most once per call.
 * The balance a payout may spend is its wallet's less what the wallet's open inbox transfers hold
 * (`held`), read by this statement: one that arrives after the statement began is not held from it.
 */
export async function recordSandboxPayouts(
  db: Db,
  payouts: readonly SandboxPayout[],
  held: HeldInbox,
): Promise<SandboxPayoutResult[]> {
  const column = <T>(pick: (p: SandboxPayout) => T) => payouts.map(pick);
  const result = await sql<
    Partial<TransferRow> &
      BreakerColumns & { request_pos: string; transfer_outcome: TransferOutcome; transfer_balance: string }
  >`
    WITH payout_req AS (
      SELECT * FROM unnest(
        ${column((p) => p.id)}::uuid[], ${column((p) => p.scope.workspaceId)}::uuid[],
        ${column((p) => p.scope.environment)}::text[], ${column((p) => p.idempotencyKey)}::text[],
        ${column((p) => p.tokenSymbol)}::text[], ${column((p) => p.amount.toString())}::numeric[],
        ${column((p) => p.destinationAddress)}::text[], ${column((p) => p.fromAddress)}::text[],
        ${column((p) => p.walletType)}::text[], ${column((p) => p.description)}::text[],
        ${column((p) => JSON.stringify(p.metadata))}::jsonb[], ${column((p) => p.createdAt.toISOString())}::timestamptz[],
        ${column((p) => p.userOpHash)}::text[], ${column((p) => p.completedAt.toISOString())}::timestamptz[],
        ${column((p) => JSON.stringify(p.payload))}::jsonb[], ${column((p) => p.requestHash)}::text[],
        ${column((p) => p.event)}::text[], ${column((p) => p.kind)}::text[],
        ${column((p) => p.paymentId)}::uuid[], ${column((p) => p.unmatchedTransferId)}::uuid[],
        ${column((p) => p.reason)}::text[], ${column((p) => p.network)}::text[]
      ) WITH ORDINALITY AS r(id, workspace_id, environment, idempotency_key, token_symbol, amount,
                             destination_address, from_address, wallet_type, description, metadata,
                             created_at, user_op_hash, completed_at, payload, request_hash, event,
                             kind, payment_id, unmatched_transfer_id, reason, network, pos)
    ),
    ${SimulatedLedger.decisionCtes(
      payouts.map((p) => p.transfer),
      // What the wallet keeps: its open inbox transfers of the token, but for the one a return sends back.
      sql`(SELECT ${held({
        environment: sql.ref("p.environment"),
        network: sql.ref("r.network"),
        address: sql.ref("r.from_address"),
        token: sql.ref("r.token_symbol"),
        except: sql.ref("p.unmatched_transfer_id"),
      })} FROM payout_req p WHERE p.pos = r.pos)`,
    )},
    ${claimCtes(
      "claimed",
      PAYOUT_KEY_SCOPE,
      sql`SELECT p.workspace_id, p.environment, p.idempotency_key AS key, p.request_hash,
                 p.id AS resource_id, p.created_at
          FROM payout_req p JOIN transfer_decided d ON d.pos = p.pos
          WHERE d.outcome <> 'insufficient' AND p.idempotency_key IS NOT NULL`,
    )},
    inserted AS (
      INSERT INTO payouts (id, workspace_id, environment, idempotency_key, status, token_symbol, amount,
                           destination_address, from_address, wallet_type, description, metadata,
                           tx_hash, user_op_hash, user_operation, created_at, completed_at,
                           kind, payment_id, unmatched_transfer_id, reason, network)
      SELECT p.id, p.workspace_id, p.environment, p.idempotency_key,
             CASE WHEN d.outcome = 'success' THEN ${sql.lit(COMPLETED_PAYOUT)} ELSE ${sql.lit(OPEN_PAYOUT)} END,
             p.token_symbol, p.amount, p.destination_address, p.from_address, p.wallet_type,
             p.description, p.metadata,
             CASE WHEN d.outcome = 'success' THEN d.tx_hash END,
             p.user_op_hash, CASE WHEN p.user_op_hash IS NOT NULL THEN '' END,
             p.created_at, CASE WHEN d.outcome = 'success' THEN p.completed_at END,
             p.kind, p.payment_id, p.unmatched_transfer_id, p.reason, p.network
      FROM payout_req p JOIN transfer_decided d ON d.pos = p.pos
      WHERE d.outcome <> 'insufficient'
        AND (p.idempotency_key IS NULL OR p.id IN (SELECT resource_id FROM claimed))
      RETURNING ${columnList(TRANSFER_COLUMNS)}
    ),
    applied AS (
      SELECT ${columnList(SimulatedLedger.DECIDED_COLUMNS, "d")} FROM transfer_decided d
      JOIN payout_req p ON p.pos = d.pos
      JOIN inserted i ON i.id = p.id
    ),
    ${SimulatedLedger.writeCtes("applied")},
    ${outboxCtesFrom(sql`
      SELECT i.workspace_id, i.environment, p.event, p.payload
      FROM inserted i JOIN payout_req p ON p.id = i.id
      WHERE i.status = ${sql.lit(COMPLETED_PAYOUT)} AND p.event IS NOT NULL`)}
    SELECT ${columnList(TRANSFER_COLUMNS, "i")},
           p.pos::text AS request_pos, d.outcome AS transfer_outcome, d.balance::text AS transfer_balance,
           b.status AS breaker_status, b.fail_streak AS breaker_fail_streak,
           b.paused_at AS breaker_paused_at, b.reason AS breaker_reason
    FROM payout_req p
    JOIN transfer_decided d ON d.pos = p.pos
    LEFT JOIN inserted i ON i.id = p.id
    LEFT JOIN payout_breakers b ON b.workspace_id = p.workspace_id AND b.environment = p.environment`.execute(
    db,
  );
  const byPos = new Map(result.rows.map((found) => [Number(found.request_pos), found]));
  return payouts.map((_payout, index): SandboxPayoutResult => {
    const found = byPos.get(index + 1);
    if (!found) throw new Error("a sandbox payout got no answer");
    if (found.transfer_outcome === "insufficient")
      return { outcome: "insufficient", balance: BigInt(found.transfer_balance) };
    if (!found.id) return { outcome: "duplicate" };
    const {
      breaker_status,
      breaker_fail_streak,
      breaker_paused_at,
      breaker_reason,
      request_pos: _pos,
      transfer_outcome,
      transfer_balance: _balance,
      ...row
    } = found;
    return {
      outcome: transfer_outcome,
      row: row as TransferRow,
      breaker: breakerFromColumns({ breaker_status, breaker_fail_streak, breaker_paused_at, breaker_reason }),
    };
  });
}
