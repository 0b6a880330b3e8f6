import { type Kysely, sql } from "kysely";
import type { Environment } from "../../config.ts";
import type { PaymentStatus } from "../../domain/payment-state.ts";
import { type KeysetKey, keysetKey, olderThan } from "../../platform/db/page.ts";
import type { DatabaseSchema, PaymentRow } from "../../platform/db/schema.ts";
import { PAYMENT_COLUMNS } from "./columns.ts";
import { payableOn } from "./repo.ts";

// The SQL of the payments browser and export (browse.ts): keyset pages, newest first.

/** Where a page starts: after the payment with this created_at (ISO, microseconds) and id. */
export type PaymentKey = KeysetKey;

/** The filter as SQL sees it: `search` already split into an id or a description pattern. */
export interface PaymentQuery {
  status?: PaymentStatus | undefined;
  tokenSymbol?: string | undefined;
  paymentMethod?: "crypto" | "card" | undefined;
  network?: string | undefined;
  createdFrom?: Date | undefined;
  createdTo?: Date | undefined;
  id?: string | undefined;
  /** An ILIKE pattern whose wildcards are escaped with a backslash. */
  descriptionLike?: string | undefined;
}

/** A row with its exact key: created_at to the microsecond, which a JS Date would round to ms. */
export type KeyedPaymentRow = PaymentRow & { key_at: string };

/**
 * Up to `limit` payments of the scope matching `query`, newest first (created_at, then id), after
 * `after`. The row comparison `(created_at, id) < (…)` is an index condition of payments_list
 * (and payments_list_status with a status), so a page deep in 100,000 payments starts at its
 * place in the index instead of counting its way there as OFFSET would.
 */
export async function paymentsAfter(
  db: Kysely<DatabaseSchema>,
  scope: { workspaceId: string; environment: Environment },
  query: PaymentQuery,
  after: PaymentKey | null,
  limit: number,
): Promise<KeyedPaymentRow[]> {
  return paymentsAfterQuery(db, scope, query, after, limit).execute();
}

/** The statement of paymentsAfter, unexecuted (its plan is checked by a test). */
export function paymentsAfterQuery(
  db: Kysely<DatabaseSchema>,
  scope: { workspaceId: string; environment: Environment },
  query: PaymentQuery,
  after: PaymentKey | null,
  limit: number,
) {
  let select = db
    .selectFrom("payments")
    .select(PAYMENT_COLUMNS)
    .select(keysetKey.as("key_at"))
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment);
  if (query.status) select = select.where("status", "=", query.status);
  if (query.tokenSymbol) select = select.where("token_symbol", "=", query.tokenSymbol);
  if (query.paymentMethod) select = select.where("payment_method", "=", query.paymentMethod);
  // A payment payable on several networks and not yet paid is listed under each of them.
  if (query.network) select = select.where(payableOn(query.network));
  if (query.createdFrom) select = select.where("created_at", ">=", query.createdFrom);
  if (query.createdTo) select = select.where("created_at", "<", query.createdTo);
  if (query.id) select = select.where("id", "=", query.id);
  if (query.descriptionLike !== undefined) {
    select = select.where(sql<boolean>`description ILIKE ${query.descriptionLike} ESCAPE '\\'`);
  }
  if (after) {
    select = select.where(olderThan(after));
  }
  return select.orderBy("created_at", "desc").orderBy("id", "desc").limit(limit);
}
