import { type SelectQueryBuilder, sql } from "kysely";

// Every list of the API is a page of rows, newest first, with the total that matches its filter:
// two queries sent together, so a page does not wait for its count.

/**
 * The page of `rows` that `page` names, newest first (created_at, then id for ties), and the
 * total that `count` (the same filter, counted) finds.
 */
export async function newestFirst<DB, TB extends keyof DB, R>(
  rows: SelectQueryBuilder<DB, TB, R>,
  count: SelectQueryBuilder<DB, TB, { total: string | number | bigint }>,
  page: { limit: number; offset: number },
) {
  const [found, counted] = await Promise.all([
    rows
      .orderBy(sql.ref("created_at"), "desc")
      .orderBy(sql.ref("id"), "desc")
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
export function olderThan(key: { createdAt: string; id: string }) {
  return sql<boolean>`(created_at, id) < (${key.createdAt}::timestamptz, ${key.id}::uuid)`;
}
