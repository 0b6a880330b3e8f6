import { pipeline, Readable } from "node:stream";
import { stringify } from "csv-stringify";
import type { FastifyReply } from "fastify";

// CSV downloads (D18): RFC 4180 text streamed from rows read in batches, so an export of any size
// holds one batch and the stream's buffers in memory. Quoting is csv-stringify's, never ours.

/** One CSV record: column name → cell. null and undefined are empty cells. */
export type CsvRecord = Readonly<Record<string, string | null | undefined>>;

/**
 * The CSV text of `rows` under a header row of `columns`, pulled from `rows` only as fast as the
 * reader takes it (backpressure through pipeline). A failure of `rows` destroys the stream, so a
 * download cut short never ends like a complete file.
 */
export function csvStream(
  columns: readonly string[],
  rows: AsyncIterable<CsvRecord> | Iterable<CsvRecord>,
): Readable {
  const stringifier = stringify({
    header: true,
    columns: [...columns],
    record_delimiter: "\r\n",
    // Set explicitly: with a record_delimiter given, csv-stringify stops quoting a lone "\n" or
    // "\r" inside a cell unless told to, and such a cell would then split the record.
    quote_record_delimiter: true,
    // Prefixes ' to cells beginning with = + - @ (and tab, CR and their full-width forms), so a
    // spreadsheet never runs a description as a formula (D18).
    escape_formulas: true,
  });
  // Errors reach the stringifier (destroyed with them); the callback is only pipeline's contract.
  return pipeline(Readable.from(rows), stringifier, () => {});
}

/** The OpenAPI answer of a CSV download route (the body is a stream: no serializer runs on it). */
export const CsvDownload = {
  description: "CSV (RFC 4180, UTF-8) with a header row, sent as an attachment",
  content: { "text/csv": { schema: { type: "string" } } },
} as const;

/** Sends `body` as a UTF-8 CSV attachment named `filename` (letters, digits, . _ - only). */
export function sendCsv(reply: FastifyReply, filename: string, body: Readable): FastifyReply {
  const safe = filename.replace(/[^A-Za-z0-9._-]/g, "_");
  return reply
    .header("content-disposition", `attachment; filename="${safe}"`)
    .header("cache-control", "no-store")
    .type("text/csv; charset=utf-8")
    .send(body);
}

/**
 * Every row `next` gives, batch after batch, until a batch is shorter than `size`: `next` reads
 * the batch after the last row of the previous one (keyset paging), so each batch costs the same
 * however deep the export has gone, and each row comes once.
 */
export async function* inBatches<T>(
  size: number,
  next: (last: T | undefined, size: number) => Promise<readonly T[]>,
): AsyncGenerator<T> {
  let last: T | undefined;
  for (;;) {
    const batch = await next(last, size);
    yield* batch;
    if (batch.length < size) return;
    last = batch.at(-1);
  }
}

/** `rows` through `map`, one at a time as they are pulled (e.g. views into CSV records). */
export async function* mapRows<T, R>(
  rows: AsyncIterable<T> | Iterable<T>,
  map: (row: T) => R,
): AsyncGenerator<R> {
  for await (const row of rows) yield map(row);
}
