import { type Selectable, sql } from "kysely";
import type { Environment } from "../../config.ts";
import { REFUND_TRANSITIONS, type RefundStatus } from "../../domain/refund-state.ts";
import { isUuid } from "../../domain/validation.ts";
import { columnsOf } from "../../platform/db/columns.ts";
import type { Db } from "../../platform/db/database.ts";
import { oldestFirst } from "../../platform/db/page.ts";
import type { CardRefundsTable } from "../../platform/db/schema.ts";
import { idInScope } from "../../platform/db/scope.ts";

// SQL of card_refunds: a card refund is recorded pending before the provider is asked; every
// change of status afterwards is a compare-and-set with the from/to of the refund's transition
// table (domain/refund-state.ts), so whoever ends a refund second (the request, an inbound
// event, the reconciler) changes nothing.

export type CardRefundRow = Selectable<CardRefundsTable>;

/** A card refund's whole row, named column by column (platform/db/columns.ts). */
export const CARD_REFUND_COLUMNS = columnsOf<CardRefundsTable>({
  id: true,
  workspace_id: true,
  environment: true,
  payment_id: true,
  token_symbol: true,
  amount: true,
  reason: true,
  status: true,
  checkout_session_id: true,
  provider_refund_id: true,
  error: true,
  created_at: true,
  completed_at: true,
  source: true,
});

type Scope = { workspaceId: string; environment: Environment };

export interface NewCardRefund {
  id: string;
  workspaceId: string;
  environment: Environment;
  paymentId: string;
  tokenSymbol: string;
  amount: bigint;
  reason: string | null;
  /** The checkout session whose payment intent it refunds (null: settled without the provider). */
  checkoutSessionId: string | null;
  createdAt: Date;
}

/** A new refund's row, pending (the provider's id and source aside). */
const pendingRow = (refund: NewCardRefund) => ({
  id: refund.id,
  workspace_id: refund.workspaceId,
  environment: refund.environment,
  payment_id: refund.paymentId,
  token_symbol: refund.tokenSymbol,
  amount: refund.amount,
  reason: refund.reason,
  checkout_session_id: refund.checkoutSessionId,
  status: REFUND_TRANSITIONS.recorded.to,
  created_at: refund.createdAt,
});

export function insertRefund(trx: Db, refund: NewCardRefund): Promise<CardRefundRow> {
  return trx
    .insertInto("card_refunds")
    .values(pendingRow(refund))
    .returning(CARD_REFUND_COLUMNS)
    .executeTakeFirstOrThrow();
}

/**
 * A refund made in the provider's dashboard (migration 038), pending until #move completes it;
 * undefined when a concurrent report recorded its provider id first (ON CONFLICT waits for it).
 */
export function insertExternalRefund(
  trx: Db,
  refund: NewCardRefund & { providerRefundId: string },
): Promise<CardRefundRow | undefined> {
  return trx
    .insertInto("card_refunds")
    .values({ ...pendingRow(refund), provider_refund_id: refund.providerRefundId, source: "provider" })
    .onConflict((oc) => oc.column("provider_refund_id").doNothing())
    .returning(CARD_REFUND_COLUMNS)
    .executeTakeFirst();
}

export interface RefundMove {
  from: readonly RefundStatus[];
  to: RefundStatus;
  /** Kept if the row has one already. */
  providerRefundId: string | null;
  error: string | null;
  at: Date;
}

/** Moves the refund from one of `from` to `to`; undefined when it was in none of them. */
export function moveRefund(trx: Db, id: string, move: RefundMove): Promise<CardRefundRow | undefined> {
  return trx
    .updateTable("card_refunds")
    .set({
      status: move.to,
      provider_refund_id: sql<string | null>`coalesce(provider_refund_id, ${move.providerRefundId})`,
      error: move.error,
      ...(move.to === "completed" ? { completed_at: move.at } : {}),
    })
    .where("id", "=", id)
    .where("status", "in", [...move.from])
    .returning(CARD_REFUND_COLUMNS)
    .executeTakeFirst();
}

/** Records the provider's id of a refund still pending there; the row as it stands. */
export async function recordProviderId(
  trx: Db,
  id: string,
  providerRefundId: string,
): Promise<CardRefundRow> {
  const updated = await trx
    .updateTable("card_refunds")
    .set({ provider_refund_id: providerRefundId })
    .where("id", "=", id)
    .where("provider_refund_id", "is", null)
    .returning(CARD_REFUND_COLUMNS)
    .executeTakeFirst();
  return (
    updated ??
    (await trx
      .selectFrom("card_refunds")
      .select(CARD_REFUND_COLUMNS)
      .where("id", "=", id)
      .executeTakeFirstOrThrow())
  );
}

export function lockRefund(trx: Db, id: string): Promise<CardRefundRow> {
  return trx
    .selectFrom("card_refunds")
    .select(CARD_REFUND_COLUMNS)
    .where("id", "=", id)
    .forUpdate()
    .executeTakeFirstOrThrow();
}

/** The refund an inbound provider event names (our id in its metadata, else the provider's id), locked. */
export async function lockReported(
  trx: Db,
  environment: Environment,
  ref: { refundId: string | null; providerRefundId: string },
): Promise<CardRefundRow | undefined> {
  const byOurs = isUuid(ref.refundId)
    ? await trx
        .selectFrom("card_refunds")
        .select(CARD_REFUND_COLUMNS)
        .where("id", "=", ref.refundId)
        .where("environment", "=", environment)
        .forUpdate()
        .executeTakeFirst()
    : undefined;
  return (
    byOurs ??
    trx
      .selectFrom("card_refunds")
      .select(CARD_REFUND_COLUMNS)
      .where("provider_refund_id", "=", ref.providerRefundId)
      .where("environment", "=", environment)
      .forUpdate()
      .executeTakeFirst()
  );
}

export function findRefund(db: Db, scope: Scope, id: string): Promise<CardRefundRow | undefined> {
  if (!isUuid(id)) return Promise.resolve(undefined);
  return db
    .selectFrom("card_refunds")
    .select(CARD_REFUND_COLUMNS)
    .where(idInScope(scope, id))
    .executeTakeFirst();
}

/** A payment's refunds, oldest first, and how many it has. */
export async function refundsOf(
  db: Db,
  scope: Scope,
  paymentId: string,
  page: { limit: number; offset: number },
): Promise<{ rows: CardRefundRow[]; total: number }> {
  const of = db
    .selectFrom("card_refunds")
    .where("payment_id", "=", paymentId)
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment);
  return oldestFirst(
    of.select(CARD_REFUND_COLUMNS),
    of.select((eb) => eb.fn.countAll<string>().as("total")),
    page,
  );
}

/** Pending refunds recorded before `before`, oldest first. */
export function pendingRefunds(
  db: Db,
  environments: readonly Environment[],
  before: Date,
  limit: number,
): Promise<CardRefundRow[]> {
  if (environments.length === 0) return Promise.resolve([]);
  return db
    .selectFrom("card_refunds")
    .select(CARD_REFUND_COLUMNS)
    .where("status", "=", "pending")
    .where("environment", "in", [...environments])
    .where("created_at", "<", before)
    .orderBy("created_at", "asc")
    .limit(limit)
    .execute();
}
