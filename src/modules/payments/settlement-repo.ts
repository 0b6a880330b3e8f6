import type { Db } from "../../platform/db/database.ts";
import type { PaymentRow } from "../../platform/db/schema.ts";

// The SQL of settlement: the payment's row under lock, the transfers recorded for it (rows of
// the chain layer's chain_transactions, keyed by payment: read in the same transaction as the
// payment's lock, which is what makes "nothing recorded yet" hold until the record commits), and
// a smart wallet settlement's operation.

export interface SettlementTransferRow {
  purpose: string;
  tx_hash: string;
  status: string;
  error: string | null;
}

export async function settlementTransfers(db: Db, paymentId: string): Promise<SettlementTransferRow[]> {
  return db
    .selectFrom("chain_transactions")
    .select(["purpose", "tx_hash", "status", "error"])
    .where("payment_id", "=", paymentId)
    .execute();
}

/** The payment, locked for the caller's transaction. */
export async function lockPayment(trx: Db, paymentId: string): Promise<PaymentRow | undefined> {
  return trx.selectFrom("payments").selectAll().where("id", "=", paymentId).forUpdate().executeTakeFirst();
}

/** Whether any settlement transfer is recorded for the payment (refused before 016 aside). */
export async function settlementRecorded(trx: Db, paymentId: string): Promise<boolean> {
  const row = await trx
    .selectFrom("chain_transactions")
    .select("tx_hash")
    .where("payment_id", "=", paymentId)
    .where("status", "<>", "rejected")
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * Records a smart wallet settlement's signed operation, only if the payment is still confirmed
 * and has none yet (compare-and-set); false otherwise.
 */
export async function recordSettlementOperation(
  trx: Db,
  paymentId: string,
  userOpHash: string,
  operation: string,
): Promise<boolean> {
  const updated = await trx
    .updateTable("payments")
    .set({ settlement_user_op_hash: userOpHash, settlement_user_operation: operation })
    .where("id", "=", paymentId)
    .where("status", "=", "confirmed")
    .where("settlement_user_operation", "is", null)
    .executeTakeFirst();
  return updated.numUpdatedRows > 0n;
}
