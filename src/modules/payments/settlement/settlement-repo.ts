import { sql } from "kysely";
import { recordedForPayment } from "../../../chain/sent-transactions.ts";
import type { Db } from "../../../platform/db/database.ts";
import type { Fence } from "../../../platform/db/fences.ts";
import { newestFirst } from "../../../platform/db/page.ts";
import type { PaymentRow } from "../../../platform/db/schema.ts";

// The SQL of settlement on the payment's row: the row under lock, the fence of a settlement's record
// (the transfers recorded for it are the chain layer's, read in the same transaction, which is what
// makes "nothing recorded yet" hold until the record commits), and a smart wallet settlement's
// operation.

/** The payment, locked for the caller's transaction. */
export async function lockPayment(trx: Db, paymentId: string): Promise<PaymentRow | undefined> {
  return trx.selectFrom("payments").selectAll().where("id", "=", paymentId).forUpdate().executeTakeFirst();
}

/** The name of the fence dueFence builds, in a refusal. */
export const DUE_FENCE = "settlement-due";

/**
 * The fence of a settlement's record (platform/db/fences.ts): the payment, locked, is still in
 * `settlesFrom` with nothing recorded for its settlement (no transaction, no user operation).
 * Checked in the transaction that records it, so two workers can never both record one.
 */
export function dueFence(db: Db, paymentId: string, settlesFrom: string): Fence {
  const statement = db
    .selectFrom("payments")
    .select("id")
    .where("id", "=", paymentId)
    .where("status", "=", settlesFrom)
    .where("settlement_user_operation", "is", null)
    .where(sql<boolean>`NOT ${recordedForPayment(sql.ref("payments.id"))}`)
    .forUpdate()
    .compile();
  return { name: DUE_FENCE, statement, required: true };
}

/**
 * Records a smart wallet settlement's signed operation, only if the payment is still confirmed
 * and has none yet (compare-and-set); false otherwise.
 */
export async function recordSettlementOperation(
  trx: Db,
  paymentId: string,
  /** The status the payment settles from: it must still be in it. */
  settlesFrom: string,
  userOpHash: string,
  operation: string,
): Promise<boolean> {
  const updated = await trx
    .updateTable("payments")
    .set({ settlement_user_op_hash: userOpHash, settlement_user_operation: operation })
    .where("id", "=", paymentId)
    .where("status", "=", settlesFrom)
    .where("settlement_user_operation", "is", null)
    .executeTakeFirst();
  return updated.numUpdatedRows > 0n;
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
    base.selectAll(),
    base.select((eb) => eb.fn.countAll<string>().as("total")),
    filter,
    "settled_at",
  );
}

/** The payment that carries settlement `settlementId`, of any tenant: the caller checks whose. */
export async function findSettled(db: Db, settlementId: string): Promise<PaymentRow | undefined> {
  return db.selectFrom("payments").selectAll().where("settlement_id", "=", settlementId).executeTakeFirst();
}
