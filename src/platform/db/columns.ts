import { type RawBuilder, sql } from "kysely";

// Every query names its columns (issue 39, item 5). During a rolling upgrade the new release's
// migration may add a column while the old release still runs: a SELECT * (or RETURNING *) of
// the old instances then returns a row of another shape, and their prepared statements fail with
// "cached plan must not change result type" (preparing-client.ts). A query that names its columns
// returns the same row whatever a later migration adds.
//
// The repo that owns a table keeps one list of its columns, made by columnsOf from the table's
// type (schema.ts): the list must name every column of the type, each once, so a column added to
// the type and not to the list (or a name that is no column) does not compile. Selected whole,
// the list gives the row type selectAll gave (Selectable<Table>); the repos list the columns in
// the table's own order, so a row's keys come in the order SELECT * gave them. A query that needs
// fewer columns names just those.

/** Each column of table type T, as the keys of an object literal: `{ id: true, status: true, … }`. */
export type EveryColumn<T> = { readonly [K in keyof T & string]: true };

/** A table's column names, for Kysely's select/returning (`.select(COLUMNS)`) or columnList. */
export type Columns<T> = readonly (keyof T & string)[];

/**
 * The column names of table type T, in the order listed. Passing an object literal, a column of T
 * left out is a missing property and a name that is no column of T an excess one: both fail to
 * compile.
 */
export function columnsOf<T>(every: EveryColumn<T>): Columns<T> {
  return Object.freeze(Object.keys(every) as (keyof T & string)[]);
}

/**
 * The columns as the select list of a raw SQL statement (`SELECT ${columnList(C)} FROM …`,
 * `RETURNING ${columnList(C, "p")}`), each quoted, and qualified by `alias` when given.
 */
export function columnList(columns: readonly string[], alias?: string): RawBuilder<unknown> {
  return sql.join(columns.map((column) => sql.ref(alias === undefined ? column : `${alias}.${column}`)));
}
