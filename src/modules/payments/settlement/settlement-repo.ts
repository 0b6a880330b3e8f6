import { type CompiledQuery, sql } from "kysely";
import type { OnNetwork } from "../../../chain/network.ts";
import { recordedForPayment } from "../../../chain/sent-transactions.ts";
import type { Db } from "../../../platform/db/database.ts";
import type { Fence } from "../../../platform/db/fences.ts";
import { newestFirst } from "../../../platform/db/page.ts";
import type { PaymentRow } from "../../../platform/db/schema.ts";
import { PAYMENT_COLUMNS } from "../columns.ts";

// The SQL of settlement on the payment's row: the row under lock, and the fences of a settlement's
// record (the transfer that settles it names it in the transaction that records the transfer;
// legs recorded before migration 030 are the chain layer's, read in that same transaction).

/** The payment, locked for the caller's transaction. */
export async function lockPayment(trx: Db, paymentId: string): Promise<PaymentRow | undefined> {
  return trx
    .selectFrom("payments")
    .select(PAYMENT_COLUMNS)
    .where("id", "=", paymentId)
    .forUpdate()
    .executeTakeFirst();
}

/** A payment due for settlement; `legs_recorded`: transactions are recorded under it (before migration 030). */
export type DuePayment = PaymentRow & { legs_recorded: boolean };

/** Up to `limit` payments of `environment` in `status` (the one settlement starts from), oldest first. */
/** The network's payments in `status`, oldest first: a network's settlement settles its own only. */
export async function due(db: Db, on: OnNetwork, status: string, limit: number): Promise<DuePayment[]> {
  return db
    .selectFrom("payments")
    .select(PAYMENT_COLUMNS)
    .select(recordedForPayment(sql.ref("payments.id")).as("legs_recorded"))
    .where("environment", "=", on.environment)
    .where("network", "=", on.id)
    .where("status", "=", status)
    .orderBy("created_at", "asc")
    .limit(limit)
    .execute();
}

/** The names of the fences below, in a refusal. */
export const DUE_FENCE = "settlement-due";
export const CLAIM_FENCE = "settlement-claim";

/**
 * The fence of a failure written before anything was sent (platform/db/fences.ts): the payment,
 * locked, is still in `settlesFrom` with nothing recorded for its settlement (no transfer, no
 * transaction or user operation recorded before migration 030).
 */
export function dueFence(db: Db, paymentId: string, settlesFrom: string): Fence {
  const statement = db
    .selectFrom("payments")
    .select("id")
    .where("id", "=", paymentId)
    .where("status", "=", settlesFrom)
    .where("settlement_transfer_id", "is", null)
    .where("settlement_user_operation", "is", null)
    .where(sql<boolean>`NOT ${recordedForPayment(sql.ref("payments.id"))}`)
    .forUpdate()
    .compile();
  return { name: DUE_FENCE, statement, required: true };
}

/**
 * The fence of a settlement's transfer, run by the engine in the transaction that records it:
 * the payment, still in `settlesFrom` with nothing recorded for its settlement, names
 * `transferId` as the transfer that settles it (compare-and-set). So two workers can never both
 * record one, and from then on the payment's money is that transfer's (unsettledOn).
 */
export function claimFence(db: Db, paymentId: string, settlesFrom: string, transferId: string): Fence {
  const statement = db
    .updateTable("payments")
    .set({ settlement_transfer_id: transferId })
    .where("id", "=", paymentId)
    .where("status", "=", settlesFrom)
    .where("settlement_transfer_id", "is", null)
    .where("settlement_user_operation", "is", null)
    .where(sql<boolean>`NOT ${recordedForPayment(sql.ref("payments.id"))}`)
    .returning("id")
    .compile();
  return { name: CLAIM_FENCE, statement, required: true };
}

/**
 * Gives a payment back from settlement transfer `transferId`, which failed with nothing sent
 * (kind.ts): the payment names no transfer again, so the next tick orders its settlement anew
 * (the unique index allows one settlement transfer per payment that has not failed).
 * Compare-and-set on the payment still naming it: run in the transaction that fails the transfer.
 */
export function releaseClaim(db: Db, paymentId: string, transferId: string): CompiledQuery {
  return db
    .updateTable("payments")
    .set({ settlement_transfer_id: null })
    .where("id", "=", paymentId)
    .where("settlement_transfer_id", "=", transferId)
    .compile();
}

export interface SettlementFilter {
  workspaceId: string;
  environment: string;
  paymentId?: string | undefined;
  limit: number;
  offset: number;
}

/** Payments whose settlement is recorded, most recently settled first, with their count. */
export async function listSettled(
  db: Db,
  filter: SettlementFilter,
): Promise<{ rows: PaymentRow[]; total: number }> {
  let base = db
    .selectFrom("payments")
    .where("workspace_id", "=", filter.workspaceId)
    .where("environment", "=", filter.environment)
    .where("settlement_id", "is not", null);
  if (filter.paymentId) base = base.where("id", "=", filter.paymentId);
  return newestFirst(
    base.select(PAYMENT_COLUMNS),
    base.select((eb) => eb.fn.countAll<string>().as("total")),
    filter,
    "settled_at",
  );
}

/** The payment that carries settlement `settlementId`, of any tenant: the caller checks whose. */
export async function findSettled(db: Db, settlementId: string): Promise<PaymentRow | undefined> {
  return db
    .selectFrom("payments")
    .select(PAYMENT_COLUMNS)
    .where("settlement_id", "=", settlementId)
    .executeTakeFirst();
}
