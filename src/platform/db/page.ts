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
