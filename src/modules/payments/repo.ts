import { type Kysely, type RawBuilder, sql, type Updateable } from "kysely";
import { type LedgerCredit, SimulatedLedger } from "../../chain/simulated/ledger.ts";
import type { Environment } from "../../config.ts";
import type { PaymentStatus } from "../../domain/payment-state.ts";
import type { SettlementRecord, SplitShare } from "../../domain/splits.ts";
import { columnList } from "../../platform/db/columns.ts";
import { newestFirst } from "../../platform/db/page.ts";
import type { DatabaseSchema, PaymentRow, PaymentsTable } from "../../platform/db/schema.ts";
import type { X402Origin } from "../../platform/db/schema-x402.ts";
import { type OutboxEvent, outboxCtes } from "../webhooks/outbox.ts";
import { PAYMENT_COLUMNS } from "./columns.ts";

/**
 * A payment's rows on `network` (D22): those of that network, and those payable on several
 * networks that list it and are on none yet (migration 036). Shared by the watcher's match and
 * the list filter, so that both mean the same payments.
 */
export const payableOn = (network: string): RawBuilder<boolean> =>
  sql<boolean>`(network = ${network} OR (network IS NULL AND networks @> jsonb_build_array(${network}::text)))`;

export interface NewPayment {
  /** Set when the caller chose the id before the row exists (the card method names it to the provider). */
  id?: string;
  status: PaymentStatus;
  workspaceId: string;
  environment: Environment;
  /** The network it is paid on (D22); null for a card payment, and for one payable on several until detected. */
  network: string | null;
  /** The networks it may be paid on, when several (D22); else null. */
  networks?: string[] | null;
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
  /** The enabled splits in force at creation (D15); null or absent: splits were off. */
  splitSnapshot?: SplitShare[] | null;
  /** A payment settled as it is written (the sandbox's): its settlement's record. */
  settlement?: { id: string; at: Date; record: SettlementRecord } | null;
  /** Settled through the x402 facilitator (D23): its origin. */
  x402?: X402Origin | null;
  /** Paid as it is written (the sandbox's): when, the time its receipt shows (D25). */
  confirmedAt?: Date | null;
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
    network: p.network,
    networks: p.networks ?? null,
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
    confirmed_at: p.confirmedAt ?? null,
    settlement_net_tx_hash: null,
    settlement_fee_tx_hash: null,
    forwarded_at: null,
    failure_reason: null,
    settlement_user_op_hash: null,
    settlement_user_operation: null,
    split_snapshot: p.splitSnapshot ?? null,
    settlement_id: p.settlement?.id ?? null,
    settlement_transfer_id: null,
    settled_at: p.settlement?.at ?? null,
    settlement: p.settlement?.record ?? null,
    amount_received: null,
    refunded_amount: "0",
    x402: p.x402 ?? null,
  };
}

/**
 * The INSERT of rows built by newPaymentRow (at least one), as a query to run or to embed in a
 * larger statement. Each column goes as ONE array parameter that unnest turns back into rows, so
 * the statement text is the same for any number of rows: prepared once per connection and
 * planned once, with one parameter per column (30) to build and send instead of 30 per row (a VALUES list made a
 * new text, and a new plan, for every batch size). Columns not named keep their defaults.
 */
export function insertPaymentsQuery(rows: readonly PaymentRow[]): RawBuilder<unknown> {
  const column = <T>(pick: (r: PaymentRow) => T) => rows.map(pick);
  return sql`
    INSERT INTO payments (id, workspace_id, environment, status, payment_method, payment_provider,
                          token_symbol, gross_amount, fee_amount, net_amount, merchant_wallet,
                          wallet_type, receiving_address, description, metadata, return_url,
                          cancel_url, expires_at, card_checkout_session_id, checkout_url,
                          created_at, updated_at, split_snapshot, settlement_id, settled_at,
                          settlement, network, networks, x402, confirmed_at)
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
      ${column((r) => r.updated_at.toISOString())}::timestamptz[],
      ${column((r) => json(r.split_snapshot))}::jsonb[],
      ${column((r) => r.settlement_id)}::uuid[],
      ${column((r) => r.settled_at?.toISOString() ?? null)}::timestamptz[],
      ${column((r) => json(r.settlement))}::jsonb[],
      ${column((r) => r.network)}::text[],
      ${column((r) => (r.networks ? JSON.stringify(r.networks) : null))}::jsonb[],
      ${column((r) => json(r.x402))}::jsonb[],
      ${column((r) => r.confirmed_at?.toISOString() ?? null)}::timestamptz[]
    )`;
}

function json(value: object | null): string | null {
  return value === null ? null : JSON.stringify(value);
}

/** A new payment as written: its row, its events and (sandbox crypto) the ledger credits. */
export interface NewPaymentWrite {
  row: PaymentRow;
  events: OutboxEvent[];
  credits: LedgerCredit[];
}

/**
 * Writes new payments (at least one), each with its events, webhook deliveries and credit, in
 * ONE statement: rows of several payments go into the same INSERTs. Events keep their order.
 */
export async function writeNewPayments(
  db: Kysely<DatabaseSchema>,
  writes: readonly NewPaymentWrite[],
): Promise<void> {
  const credits = writes.flatMap((w) => w.credits);
  const ctes = [
    sql`payment_row AS (${insertPaymentsQuery(writes.map((w) => w.row))})`,
    outboxCtes(writes.flatMap((w) => w.events)),
    ...(credits.length > 0 ? [SimulatedLedger.creditsCtes(credits)] : []),
  ];
  await sql`WITH ${sql.join(ctes)} SELECT 1`.execute(db);
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
  let query = db.selectFrom("payments").select(PAYMENT_COLUMNS).where("id", "=", id);
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
    .select(PAYMENT_COLUMNS)
    .where(sql<boolean>`id = any(${[...ids]}::uuid[])`)
    .execute();
  return new Map(rows.map((row) => [row.id, row]));
}

/**
 * The tenant's x402 payments made for one authorization (network, payer, nonce), oldest first:
 * more than one when a stopped settle's was failed unsent and the authorization settled again.
 */
export async function x402PaymentsOf(
  db: Kysely<DatabaseSchema>,
  scope: { workspaceId: string; environment: Environment },
  authorization: { network: string; payer: string; nonce: string },
): Promise<{ id: string; status: PaymentStatus; txHash: string | null }[]> {
  const rows = await db
    .selectFrom("payments")
    .select(["id", "status", sql<string | null>`x402->>'txHash'`.as("tx_hash")])
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .where("network", "=", authorization.network)
    .where("x402", "is not", null)
    .where(sql<boolean>`lower(x402->>'payer') = ${authorization.payer.toLowerCase()}`)
    .where(sql<boolean>`lower(x402->>'nonce') = ${authorization.nonce.toLowerCase()}`)
    .orderBy("created_at")
    .execute();
  return rows.map((row) => ({ id: row.id, status: row.status as PaymentStatus, txHash: row.tx_hash }));
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
  return newestFirst(
    base.select(PAYMENT_COLUMNS),
    base.select((eb) => eb.fn.countAll().as("total")),
    filter,
  );
}

/** Columns a status change may set besides the status (which only the transition table decides). */
export type PaymentChanges = Omit<Updateable<PaymentsTable>, "status" | "id">;

/**
 * The row moves from `from` to `to` only if it is still in `from` (compare-and-set); undefined
 * when another transaction moved it first.
 */
export async function moveStatus(
  trx: Kysely<DatabaseSchema>,
  id: string,
  move: { from: PaymentStatus; to: PaymentStatus },
  at: Date,
  changes: PaymentChanges,
): Promise<PaymentRow | undefined> {
  return trx
    .updateTable("payments")
    .set({ ...changes, status: move.to, updated_at: at })
    .where("id", "=", id)
    .where("status", "=", move.from)
    .returning(PAYMENT_COLUMNS)
    .executeTakeFirst();
}

/**
 * Up to `limit` payments in `status` whose expiry has passed, oldest expiry first, locked; rows
 * other transactions hold are skipped. The status is a literal so that the partial index on
 * (expires_at) WHERE status = 'pending' serves the query.
 */
export async function lockExpired(
  trx: Kysely<DatabaseSchema>,
  status: PaymentStatus,
  now: Date,
  limit: number,
): Promise<PaymentRow[]> {
  const due = await sql<PaymentRow>`
    SELECT ${columnList(PAYMENT_COLUMNS)} FROM payments
    WHERE status = ${sql.lit(status)} AND expires_at <= ${now}
    ORDER BY expires_at
    LIMIT ${limit}
    FOR UPDATE SKIP LOCKED
  `.execute(trx);
  return due.rows;
}

/** How a card provider's event names its payment: by checkout session, or by our id. */
export type CardPaymentRef = { checkoutSessionId: string } | { paymentId: string };

/** The environment's card payment `ref` names, locked for the change its event brings. */
export async function lockCardPayment(
  trx: Kysely<DatabaseSchema>,
  environment: Environment,
  ref: CardPaymentRef,
): Promise<PaymentRow | undefined> {
  let query = trx
    .selectFrom("payments")
    .select(PAYMENT_COLUMNS)
    .where("environment", "=", environment)
    .where("payment_method", "=", "card");
  query =
    "checkoutSessionId" in ref
      ? query.where("card_checkout_session_id", "=", ref.checkoutSessionId)
      : query.where("id", "=", ref.paymentId);
  return query.forUpdate().executeTakeFirst();
}

/** Records the provider's last refusal (JSON text) on a payment that stays where it is. */
export async function recordLastPaymentError(
  trx: Kysely<DatabaseSchema>,
  id: string,
  error: string,
  at: Date,
): Promise<void> {
  await trx
    .updateTable("payments")
    .set({ last_payment_error: error, updated_at: at })
    .where("id", "=", id)
    .execute();
}
