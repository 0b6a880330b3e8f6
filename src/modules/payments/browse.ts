import type { Readable } from "node:stream";
import type { Kysely } from "kysely";
import { badRequest } from "../../domain/errors.ts";
import { CARD_CURRENCY, CRYPTO_TOKENS } from "../../domain/money.ts";
import { PAYMENT_STATUSES, type PaymentStatus } from "../../domain/payment-state.ts";
import { isUuid, MAX_DESCRIPTION, parseInstant } from "../../domain/validation.ts";
import { decodeCursor, keysetPage } from "../../platform/db/page.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import { type CsvRecord, csvStream, inBatches, mapRows } from "../../platform/http/csv.ts";
import { networkFilter } from "../networks/directory.ts";
import { type KeyedPaymentRow, type PaymentKey, type PaymentQuery, paymentsAfter } from "./browse-repo.ts";
import { type PaymentView, toPaymentView } from "./view.ts";

// Browsing a workspace's payments with filters, in keyset pages newest first (the dashboard's
// list), and the same rows for the CSV export (D18), read in keyset batches.

export const PAYMENT_TOKENS = [...CRYPTO_TOKENS, CARD_CURRENCY] as const;
export type PaymentToken = (typeof PAYMENT_TOKENS)[number];
export const PAYMENT_METHODS = ["crypto", "card"] as const;

export interface PaymentFilter {
  status?: PaymentStatus;
  tokenSymbol?: PaymentToken;
  paymentMethod?: (typeof PAYMENT_METHODS)[number];
  /** The network it is on (D22); card payments are on none. */
  network?: string;
  createdFrom?: Date;
  /** Exclusive. */
  createdTo?: Date;
  /** A full payment UUID matches its id; other text, case-insensitively, part of the description. */
  search?: string;
}

/** The largest page `browse` serves, as the v1 lists. */
export const MAX_BROWSE_LIMIT = 100;
/** Rows per query of an export: enough to amortize the round trip, small enough to hold. */
export const EXPORT_BATCH = 1000;

/**
 * The filter named by query-string parameters (the dashboard's form, the export's URL). An empty
 * parameter is an unset one (an HTML form sends its blank fields); anything else that is not
 * understood is a 400 naming the parameter, never ignored.
 */
export function parsePaymentFilter(query: Readonly<Record<string, unknown>>): PaymentFilter {
  const filter: PaymentFilter = {};
  const status = oneOf(query, "status", PAYMENT_STATUSES);
  if (status) filter.status = status;
  const token = oneOf(query, "tokenSymbol", PAYMENT_TOKENS);
  if (token) filter.tokenSymbol = token;
  const method = oneOf(query, "paymentMethod", PAYMENT_METHODS);
  if (method) filter.paymentMethod = method;
  const network = networkFilter(query.network);
  if (network) filter.network = network;
  const from = instantParam(query, "createdFrom");
  if (from) filter.createdFrom = from;
  const to = instantParam(query, "createdTo");
  if (to) filter.createdTo = to;
  if (from && to && from.getTime() >= to.getTime()) {
    throw badRequest("createdTo must be later than createdFrom");
  }
  const search = text(query, "search");
  if (search !== undefined) {
    if (search.length > MAX_DESCRIPTION)
      throw badRequest(`search must be at most ${MAX_DESCRIPTION} characters`);
    filter.search = search;
  }
  return filter;
}

function text(query: Readonly<Record<string, unknown>>, name: string): string | undefined {
  const value = query[name];
  if (value === undefined || value === "") return undefined;
  if (typeof value !== "string") throw badRequest(`${name} must be given once, as text`);
  return value;
}

function oneOf<T extends string>(
  query: Readonly<Record<string, unknown>>,
  name: string,
  allowed: readonly T[],
): T | undefined {
  const value = text(query, name);
  if (value === undefined) return undefined;
  const found = allowed.find((item) => item === value);
  if (!found) throw badRequest(`${name} must be one of: ${allowed.join(", ")}`);
  return found;
}

function instantParam(query: Readonly<Record<string, unknown>>, name: string): Date | undefined {
  const value = text(query, name);
  if (value === undefined) return undefined;
  const instant = parseInstant(value);
  if (!instant) {
    throw badRequest(
      `${name} must be a date (YYYY-MM-DD, UTC) or an ISO 8601 date-time (e.g. 2025-01-31T12:00:00Z)`,
    );
  }
  return instant;
}

const within = (n: number, low: number, high: number) => n >= low && n <= high;

function toQuery(filter: PaymentFilter): PaymentQuery {
  const { search, ...rest } = filter;
  if (search === undefined) return rest;
  // Backslash is the ESCAPE character of the query: the user's text matches itself, % and _ too.
  const descriptionLike = `%${search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  return isUuid(search) ? { ...rest, id: search.toLowerCase() } : { ...rest, descriptionLike };
}

const keyOf = (row: KeyedPaymentRow): PaymentKey => ({ createdAt: row.key_at, id: row.id });

/** One page of the tenant's payments matching `filter`, and the cursor of the next (null at the end). */
export async function browsePayments(
  db: Kysely<DatabaseSchema>,
  tenant: Tenant,
  filter: PaymentFilter,
  page: { after?: string | undefined; limit: number },
): Promise<{ payments: PaymentView[]; next: string | null }> {
  if (!Number.isInteger(page.limit) || !within(page.limit, 1, MAX_BROWSE_LIMIT)) {
    throw badRequest(`limit must be an integer from 1 to ${MAX_BROWSE_LIMIT}`);
  }
  const after = page.after ? decodeCursor(page.after) : null;
  // One row more than the page says whether another page follows.
  const rows = await paymentsAfter(db, tenant, toQuery(filter), after, page.limit + 1);
  const { shown, next } = keysetPage(rows, page.limit, keyOf);
  return { payments: shown.map(toPaymentView), next };
}

/**
 * Every payment of the tenant matching `filter`, newest first, read EXPORT_BATCH rows per query
 * and only as fast as the consumer takes them. Each batch is its own statement: no transaction is
 * held open for the length of a download, so rows changed meanwhile show as they are when read.
 */
export async function* paymentsForExport(
  db: Kysely<DatabaseSchema>,
  tenant: Tenant,
  filter: PaymentFilter,
  batchSize = EXPORT_BATCH,
): AsyncGenerator<PaymentView> {
  const query = toQuery(filter);
  const rows = inBatches<KeyedPaymentRow>(batchSize, (last, size) =>
    paymentsAfter(db, tenant, query, last ? keyOf(last) : null, size),
  );
  for await (const row of rows) yield toPaymentView(row);
}

/** The export's columns: the public fields of the payment (view.ts), amounts as the API shows them. */
export const PAYMENT_CSV_COLUMNS = [
  "id",
  "status",
  "environment",
  "network",
  "paymentMethod",
  "paymentProvider",
  "tokenSymbol",
  "grossAmount",
  "feeAmount",
  "netAmount",
  "description",
  "metadata",
  "merchantWallet",
  "walletType",
  "receivingAddress",
  "payerAddress",
  "txHash",
  "settlementNetTxHash",
  "settlementFeeTxHash",
  "failureReason",
  "expiresAt",
  "createdAt",
  "updatedAt",
] as const;

export function paymentCsvRecord(p: PaymentView): CsvRecord {
  return {
    id: p.id,
    status: p.status,
    environment: p.environment,
    network: p.network,
    paymentMethod: p.paymentMethod,
    paymentProvider: p.paymentProvider,
    tokenSymbol: p.tokenSymbol,
    grossAmount: p.grossAmount,
    feeAmount: p.feeAmount,
    netAmount: p.netAmount,
    description: p.description,
    metadata: JSON.stringify(p.metadata),
    merchantWallet: p.merchantWallet,
    walletType: p.walletType,
    receivingAddress: p.receivingAddress,
    payerAddress: p.payerAddress,
    txHash: p.txHash,
    settlementNetTxHash: p.settlementTxHashes?.net,
    settlementFeeTxHash: p.settlementTxHashes?.fee,
    failureReason: p.failureReason,
    expiresAt: p.expiresAt,
    createdAt: p.createdAt,
    updatedAt: p.updatedAt,
  } satisfies Record<(typeof PAYMENT_CSV_COLUMNS)[number], string | null | undefined>;
}

/** The CSV download of `payments` (an export, or none at all: the header row alone). */
export function paymentsCsv(payments: AsyncIterable<PaymentView> | Iterable<PaymentView>): Readable {
  return csvStream(PAYMENT_CSV_COLUMNS, mapRows(payments, paymentCsvRecord));
}
