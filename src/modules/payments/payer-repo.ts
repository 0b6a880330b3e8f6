import type { AliasableExpression, Expression, Kysely, SelectType } from "kysely";
import type { DatabaseSchema, PaymentRow } from "../../platform/db/schema.ts";

// The payer's reads of a payment: the hosted page and its receipt, by the payment's id alone.

/** The only columns a payer's page reads: never metadata, keys or anything of the workspace. */
export const PAYER_COLUMNS = [
  "id",
  "status",
  "payment_method",
  "environment",
  "network",
  "networks",
  "token_symbol",
  "gross_amount",
  "description",
  "receiving_address",
  "checkout_url",
  "return_url",
  "expires_at",
  // What went back of what it received (D19): the page of a refunded payment says so.
  "refunded_amount",
  "amount_received",
  // The receipt (D25): the transaction that paid it, who paid, when; the workspace names the merchant.
  "detected_tx_hash",
  "payer_address",
  "detected_at",
  "confirmed_at",
  "workspace_id",
] as const satisfies readonly (keyof PaymentRow)[];

export type PayerRow = Pick<PaymentRow, (typeof PAYER_COLUMNS)[number]>;

/** A payment's payer-facing columns, by id alone (the page's link is its only credential). */
export async function findForPayer(db: Kysely<DatabaseSchema>, id: string): Promise<PayerRow | undefined> {
  return db.selectFrom("payments").select(PAYER_COLUMNS).where("id", "=", id).executeTakeFirst();
}

/**
 * The same row and, in the same statement, what `alongside` reads of the payment's workspace
 * (the hosted page: who the payer pays). Its SQL is the workspace module's, handed in.
 */
export async function findForPayerWith<T>(
  db: Kysely<DatabaseSchema>,
  id: string,
  alongside: (workspaceId: Expression<string>) => AliasableExpression<T>,
): Promise<(PayerRow & { alongside: SelectType<T> }) | undefined> {
  return db
    .selectFrom("payments")
    .select(PAYER_COLUMNS)
    .select((eb) => alongside(eb.ref("payments.workspace_id")).as("alongside"))
    .where("id", "=", id)
    .executeTakeFirst();
}
