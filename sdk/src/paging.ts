// Async iteration over the API's paged lists, in both of its styles: `limit` + `offset` with the
// `total` (most lists), and `page` + `limit` (agents, wallets, agent payment authorizations). Each
// page is one call, made when the previous page is used up.

/** The largest page any list gives. */
export const MAX_PAGE = 100;

/** Every item of an offset-paged list. */
export async function* offsetItems<T>(
  fetchPage: (window: { limit: number; offset: number }) => Promise<{ items: readonly T[]; total: number }>,
  limit = MAX_PAGE,
): AsyncGenerator<T> {
  for (let offset = 0; ; ) {
    const { items, total } = await fetchPage({ limit, offset });
    yield* items;
    offset += items.length;
    if (items.length === 0 || offset >= total) return;
  }
}

/** Every item of a page-numbered list (pages count from 1). */
export async function* pageItems<T>(
  fetchPage: (window: { page: number; limit: number }) => Promise<{ items: readonly T[]; total?: number }>,
  limit = MAX_PAGE,
): AsyncGenerator<T> {
  let seen = 0;
  for (let page = 1; ; page++) {
    const { items, total } = await fetchPage({ page, limit });
    yield* items;
    seen += items.length;
    if (items.length < limit || (total !== undefined && seen >= total)) return;
  }
}
