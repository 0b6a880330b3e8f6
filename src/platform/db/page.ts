import { type SelectQueryBuilder, sql } from "kysely";
import { badRequest } from "../../domain/errors.ts";
import { isUuid, parseInstant } from "../../domain/validation.ts";

// Every list of the API is a page of rows, newest first, with the total that matches its filter:
// two queries sent together, so a page does not wait for its count.

/**
 * The page of `rows` that `page` names, newest first (by `newest`, created_at unless named, then
 * id for ties), and the total that `count` (the same filter, counted) finds.
 */
export function newestFirst<DB, TB extends keyof DB, R>(
  rows: SelectQueryBuilder<DB, TB, R>,
  count: SelectQueryBuilder<DB, TB, { total: string | number | bigint }>,
  page: { limit: number; offset: number },
  newest = "created_at",
) {
  return inOrder(rows, count, page, newest, "desc");
}

/** As newestFirst, oldest first by created_at (a payment's refunds, in the order they were made). */
export function oldestFirst<DB, TB extends keyof DB, R>(
  rows: SelectQueryBuilder<DB, TB, R>,
  count: SelectQueryBuilder<DB, TB, { total: string | number | bigint }>,
  page: { limit: number; offset: number },
) {
  return inOrder(rows, count, page, "created_at", "asc");
}

async function inOrder<DB, TB extends keyof DB, R>(
  rows: SelectQueryBuilder<DB, TB, R>,
  count: SelectQueryBuilder<DB, TB, { total: string | number | bigint }>,
  page: { limit: number; offset: number },
  column: string,
  direction: "asc" | "desc",
) {
  const [found, counted] = await Promise.all([
    rows
      .orderBy(sql.ref(column), direction)
      .orderBy(sql.ref("id"), direction)
      .limit(page.limit)
      .offset(page.offset)
      .execute(),
    count.executeTakeFirstOrThrow(),
  ]);
  return { rows: found, total: Number(counted.total) };
}

// Keyset pages (the dashboard's lists, the CSV exports): newest first by (created_at, id), each
// page after the key of the last row of the one before, as cheap at any depth as the first.

/** A row's keyset key: its created_at to the microsecond as UTC text (a JS Date keeps only ms). */
export const keysetKey = sql<string>`to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/** Rows that come after `key` newest first: the row comparison (created_at, id) indexes serve. */
export function olderThan(key: KeysetKey) {
  return sql<boolean>`(created_at, id) < (${key.createdAt}::timestamptz, ${key.id}::uuid)`;
}

/** Where a keyset page starts: after the row with this created_at (ISO, microseconds) and id. */
export interface KeysetKey {
  createdAt: string;
  id: string;
}

// The cursor: base64url of "<created_at ISO, microseconds>|<id>", opaque to clients. Microseconds
// because PostgreSQL keeps them: a key rounded to the millisecond would skip or repeat rows.

const CURSOR_TEXT = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z)\|([0-9a-f-]{36})$/;

export function encodeCursor(key: KeysetKey): string {
  return Buffer.from(`${key.createdAt}|${key.id}`, "utf8").toString("base64url");
}

/** The key a cursor names; 400 naming `cursor` for anything `encodeCursor` did not make. */
export function decodeCursor(cursor: string): KeysetKey {
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

/**
 * A keyset page from rows read with one more than `limit`: the rows to show, and the cursor of
 * the next page (that extra row says one follows), null at the end.
 */
export function keysetPage<T>(
  rows: readonly T[],
  limit: number,
  keyOf: (row: T) => KeysetKey,
): { shown: T[]; next: string | null } {
  const shown = rows.slice(0, limit);
  const last = shown.at(-1);
  return { shown, next: rows.length > limit && last ? encodeCursor(keyOf(last)) : null };
}
