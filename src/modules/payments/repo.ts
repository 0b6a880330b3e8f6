import { type Kysely, type RawBuilder, sql } from "kysely";
import type { Environment } from "../../config.ts";
import type { PaymentStatus } from "../../domain/payment-state.ts";
import type { DatabaseSchema, PaymentRow } from "../../platform/db/schema.ts";

export interface NewPayment {
  /** Set when the caller chose the id before the row exists (the card rail names it to the provider). */
  id?: string;
  status: PaymentStatus;
  workspaceId: string;
  environment: Environment;
  paymentMethod: "crypto" | "card";
  paymentProvider: "onchain" | "card";
  tokenSymbol: string;
  gross: bigint;
  fee: bigint;
  net: bigint;
  merchantWallet: string | null;
  walletType: "eoa" | "smart_wallet";
  receivingAddress: string | null;
  description: string | null;
  metadata: Record<string, string>;
  returnUrl: string | null;
  cancelUrl: string | null;
  expiresAt: Date;
  createdAt: Date;
  cardCheckoutSessionId?: string | null;
  checkoutUrl?: string | null;
}

/**
 * The row a new payment will have, built here so that its API view (and the events carrying it)
 * can be written in the same single statement as the row itself.
 */
export function newPaymentRow(p: NewPayment & { id: string }): PaymentRow {
  return {
    id: p.id,
    workspace_id: p.workspaceId,
    environment: p.environment,
    status: p.status,
    payment_method: p.paymentMethod,
    payment_provider: p.paymentProvider,
    token_symbol: p.tokenSymbol,
    gross_amount: p.gross.toString(),
    fee_amount: p.fee.toString(),
    net_amount: p.net.toString(),
    merchant_wallet: p.merchantWallet,
    wallet_type: p.walletType,
    receiving_address: p.receivingAddress,
    description: p.description,
    metadata: p.metadata,
    return_url: p.returnUrl,
    cancel_url: p.cancelUrl,
    expires_at: p.expiresAt,
    card_checkout_session_id: p.cardCheckoutSessionId ?? null,
    checkout_url: p.checkoutUrl ?? null,
    last_payment_error: null,
    created_at: p.createdAt,
    updated_at: p.createdAt,
    detected_tx_hash: null,
    detected_log_index: null,
    detected_block: null,
    detected_block_hash: null,
    payer_address: null,
    detected_at: null,
    confirmed_at: null,
    settlement_net_tx_hash: null,
    settlement_fee_tx_hash: null,
    forwarded_at: null,
    failure_reason: null,
    settlement_user_op_hash: null,
    settlement_user_operation: null,
  };
}

/**
 * The INSERT of rows built by newPaymentRow (at least one), as a query to run or to embed in a
 * larger statement. Each column goes as ONE array parameter that unnest turns back into rows, so
 * the statement text is the same for any number of rows: prepared once per connection and
 * planned once, with 22 parameters to build and send instead of 22 per row (a VALUES list made a
 * new text, and a new plan, for every batch size). Columns not named keep their defaults.
 */
export function insertPaymentsQuery(rows: readonly PaymentRow[]): RawBuilder<unknown> {
  const column = <T>(pick: (r: PaymentRow) => T) => rows.map(pick);
  return sql`
    INSERT INTO payments (id, workspace_id, environment, status, payment_method, payment_provider,
                          token_symbol, gross_amount, fee_amount, net_amount, merchant_wallet,
                          wallet_type, receiving_address, description, metadata, return_url,
                          cancel_url, expires_at, card_checkout_session_id, checkout_url,
                          created_at, updated_at)
    SELECT * FROM unnest(
      ${column((r) => r.id)}::uuid[],
      ${column((r) => r.workspace_id)}::uuid[],
      ${column((r) => r.environment)}::text[],
      ${column((r) => r.status)}::text[],
      ${column((r) => r.payment_method)}::text[],
      ${column((r) => r.payment_provider)}::text[],
      ${column((r) => r.token_symbol)}::text[],
      ${column((r) => r.gross_amount)}::numeric[],
      ${column((r) => r.fee_amount)}::numeric[],
      ${column((r) => r.net_amount)}::numeric[],
      ${column((r) => r.merchant_wallet)}::text[],
      ${column((r) => r.wallet_type)}::text[],
      ${column((r) => r.receiving_address)}::text[],
      ${column((r) => r.description)}::text[],
      ${column((r) => JSON.stringify(r.metadata))}::jsonb[],
      ${column((r) => r.return_url)}::text[],
      ${column((r) => r.cancel_url)}::text[],
      ${column((r) => r.expires_at.toISOString())}::timestamptz[],
      ${column((r) => r.card_checkout_session_id)}::text[],
      ${column((r) => r.checkout_url)}::text[],
      ${column((r) => r.created_at.toISOString())}::timestamptz[],
      ${column((r) => r.updated_at.toISOString())}::timestamptz[]
    )`;
}

/** Reads a payment of the workspace and environment; `forUpdate` locks it for a transition. */
export async function findPayment(
  db: Kysely<DatabaseSchema>,
  scope: { workspaceId: string; environment: Environment },
  id: string,
  forUpdate = false,
): Promise<PaymentRow | undefined> {
  // By primary key only, then the tenant check: the plan stays a primary-key lookup even on a
  // table without statistics (PGlite never analyzes), where PostgreSQL would otherwise pick a
  // list index and scan the whole workspace.
  let query = db.selectFrom("payments").selectAll().where("id", "=", id);
  if (forUpdate) query = query.forUpdate();
  return visibleTo(await query.executeTakeFirst(), scope);
}

/** The payments with these ids, by id, of any tenant: pass each through `visibleTo`. */
export async function findPaymentsByIds(
  db: Kysely<DatabaseSchema>,
  ids: readonly string[],
): Promise<Map<string, PaymentRow>> {
  const rows = await db
    .selectFrom("payments")
    .selectAll()
    .where(sql<boolean>`id = any(${[...ids]}::uuid[])`)
    .execute();
  return new Map(rows.map((row) => [row.id, row]));
}

/** The row if it belongs to the caller's workspace and environment (tenant isolation). */
export function visibleTo(
  row: PaymentRow | undefined,
  scope: { workspaceId: string; environment: Environment },
): PaymentRow | undefined {
  return row && row.workspace_id === scope.workspaceId && row.environment === scope.environment
    ? row
    : undefined;
}

export interface PaymentListFilter {
  workspaceId: string;
  environment: Environment;
  status?: PaymentStatus | undefined;
  limit: number;
  offset: number;
}

export async function listPayments(
  db: Kysely<DatabaseSchema>,
  filter: PaymentListFilter,
): Promise<{ rows: PaymentRow[]; total: number }> {
  let base = db
    .selectFrom("payments")
    .where("workspace_id", "=", filter.workspaceId)
    .where("environment", "=", filter.environment);
  if (filter.status) base = base.where("status", "=", filter.status);
  const [rows, count] = await Promise.all([
    base
      .selectAll()
      .orderBy("created_at", "desc")
      .orderBy("id", "desc")
      .limit(filter.limit)
      .offset(filter.offset)
      .execute(),
    base.select((eb) => eb.fn.countAll().as("total")).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.total) };
}
