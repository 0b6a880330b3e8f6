import type { Readable } from "node:stream";
import type { Kysely } from "kysely";
import { badRequest } from "../../domain/errors.ts";
import { CARD_CURRENCY, CRYPTO_TOKENS } from "../../domain/money.ts";
import { PAYMENT_STATUSES, type PaymentStatus } from "../../domain/payment-state.ts";
import { isUuid, MAX_DESCRIPTION } from "../../domain/validation.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import { type CsvRecord, csvStream, inBatches, mapRows } from "../../platform/http/csv.ts";
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

const INSTANT =
  /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?(Z|[+-]\d{2}:\d{2})?)?$/;

const within = (n: number, low: number, high: number) => n >= low && n <= high;

/**
 * A date (midnight UTC) or date-time (UTC unless it names an offset), checked field by field:
 * Date.parse would roll 2025-02-30 over into March, and read a zone-less time as local time.
 */
export function parseInstant(value: string): Date | null {
  const m = INSTANT.exec(value);
  if (!m) return null;
  const field = (i: number) => Number(m[i] ?? 0);
  const [year, month, day, hour, minute, second] = [
    field(1),
    field(2),
    field(3),
    field(4),
    field(5),
    field(6),
  ];
  const millis = Number((m[7] ?? "").padEnd(3, "0").slice(0, 3));
  if (!within(year, 1000, 9999) || !within(month, 1, 12) || !within(hour, 0, 23)) return null;
  if (!within(minute, 0, 59) || !within(second, 0, 59)) return null;
  // Day 31 of a 30-day month would come back as the 1st of the next.
  if (!within(day, 1, 31) || new Date(Date.UTC(year, month - 1, day)).getUTCDate() !== day) return null;
  const zone = m[8] ?? "Z";
  let offsetMinutes = 0;
  if (zone !== "Z") {
    const [hours, minutes] = [Number(zone.slice(1, 3)), Number(zone.slice(4, 6))];
    if (!within(hours, 0, 23) || !within(minutes, 0, 59)) return null;
    offsetMinutes = (zone.startsWith("-") ? -1 : 1) * (hours * 60 + minutes);
  }
  return new Date(Date.UTC(year, month - 1, day, hour, minute, second, millis) - offsetMinutes * 60_000);
}

// The cursor: base64url of "<created_at ISO, microseconds>|<id>", opaque to clients. Microseconds
// because PostgreSQL keeps them: a key rounded to the millisecond would skip or repeat rows.

const CURSOR_TEXT = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z)\|([0-9a-f-]{36})$/;

export function encodeCursor(key: PaymentKey): string {
  return Buffer.from(`${key.createdAt}|${key.id}`, "utf8").toString("base64url");
}

/** The key a cursor names; 400 naming `cursor` for anything `encodeCursor` did not make. */
export function decodeCursor(cursor: string): PaymentKey {
  const malformed = () => badRequest("cursor is malformed: pass the `next` value of the previous page");
  if (cursor.length > 200) throw malformed();
  const decoded = Buffer.from(cursor, "base64url").toString("utf8");
  const match = CURSOR_TEXT.exec(decoded);
  // Node's decoder skips characters outside the alphabet: only the exact encoding is accepted.
  if (!match?.[1] || !match[2] || encodeCursor({ createdAt: match[1], id: match[2] }) !== cursor) {
    throw malformed();
  }
  if (!isUuid(match[2]) || !parseInstant(match[1])) throw malformed();
  return { createdAt: match[1], id: match[2] };
}

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
  const shown = rows.slice(0, page.limit);
  const last = shown.at(-1);
  return {
    payments: shown.map(toPaymentView),
    next: rows.length > page.limit && last ? encodeCursor(keyOf(last)) : null,
  };
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
