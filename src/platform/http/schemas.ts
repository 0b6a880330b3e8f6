import { Type } from "typebox";

// Field schemas shared by every route that takes them (issue 20: one rule per kind of field).

/**
 * The largest list position a query may name: PostgreSQL's integer, beyond any real list. Larger
 * values (1e20, 1e309, 2^53 + 1) are refused with 400 naming the parameter, never clamped (D10),
 * and never reach an OFFSET the database cannot hold.
 */
export const MAX_LIST_POSITION = 2_147_483_647;

export const Offset = Type.Integer({ minimum: 0, maximum: MAX_LIST_POSITION, default: 0 });
export const PageNumber = Type.Integer({ minimum: 1, maximum: MAX_LIST_POSITION, default: 1 });
export const PageSize = (defaultSize: number) =>
  Type.Integer({ minimum: 1, maximum: 100, default: defaultSize });

/** `limit` (1 to 100, default 50) and `offset` of the v1 lists (part 8). */
export const OffsetPage = { limit: PageSize(50), offset: Offset };
/** `page` and `limit` (1 to 100, default 20) of the agents and wallets lists (part 8). */
export const NumberedPage = { page: PageNumber, limit: PageSize(20) };

/**
 * A nullable string as `type: ["string", "null"]` rather than anyOf: the response serializer
 * handles a type list directly, where anyOf makes it validate each branch on every response.
 */
export const NullableString = (options: { description?: string } = {}) =>
  Type.Unsafe<string | null>({ type: ["string", "null"], ...options });
