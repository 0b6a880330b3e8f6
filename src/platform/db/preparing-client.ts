import { LRUCache } from "lru-cache";
import pg from "pg";

// A pg client that runs the statements the service repeats as named prepared statements, as
// postgres.js does by default. Kysely sends one SQL text per query shape with the values as
// parameters, so the same few hundred texts recur; unnamed, PostgreSQL parses, analyses and plans
// each one on every execution, which cost more server CPU than executing them (the payment
// create statement is five inserts in one CTE). Named, a connection parses it once and can keep
// its plan.
//
// Bounds: a text is prepared only from its second use (one-off texts, such as a VALUES list of an
// unusual length, never are), and a connection holds at most MAX_PREPARED_PER_CONNECTION of
// them; past that it runs texts unnamed.
//
// A prepared SELECT * fails with "cached plan must not change result type" once a migration of
// another instance changes the table. Outside a transaction the statement is prepared again under
// a new name and run once more; inside one the error reaches the caller, as any error there does.

export const MAX_PREPARED_PER_CONNECTION = 200;
const SEEN_TEXTS = 5_000;

/** Statement texts seen by this process, with their number (for names). */
const texts = new LRUCache<string, number>({ max: SEEN_TEXTS });
let nextId = 0;

/** The text's number from its second use on; undefined the first time it is seen. */
function statementId(text: string): number | undefined {
  const id = texts.get(text);
  if (id === undefined) texts.set(text, nextId++);
  return id;
}

function isChangedResultType(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | undefined;
  return e?.code === "0A000" && /cached plan must not change result type/.test(e.message ?? "");
}

type QueryResult = pg.QueryResult<pg.QueryResultRow>;

export class PreparingClient extends pg.Client {
  /** Statement ids this connection has prepared. */
  readonly #prepared = new Set<number>();
  /** Bumped when a prepared statement went stale: every name changes, so each is prepared anew. */
  #generation = 0;

  // Kysely calls query(text, values) and awaits the promise; every other form goes to pg as is.
  // biome-ignore lint/suspicious/noExplicitAny: pg's query has a dozen overloads; this one forwards them.
  override query(config: any, values?: any, callback?: any): any {
    if (typeof config !== "string" || !Array.isArray(values) || callback !== undefined) {
      return super.query(config, values, callback);
    }
    const id = statementId(config);
    const prepare =
      id !== undefined && (this.#prepared.has(id) || this.#prepared.size < MAX_PREPARED_PER_CONNECTION);
    if (!prepare) return this.#promised({ text: config, values });
    this.#prepared.add(id);
    const run = () => this.#promised({ name: `s${id}_${this.#generation}`, text: config, values });
    return run().catch((err: unknown) => {
      if (!isChangedResultType(err) || this.getTransactionStatus() !== "I") throw err;
      this.#generation++;
      return run();
    });
  }

  /**
   * pg's callback form in a promise of our own. Measured (bench/RESULTS.md, dashboard, 2026-11-26):
   * through pg's own promise form V8 promoted most rows of every result to the old generation
   * (60–100 MiB per 100,000 rows, then freed only by a full collection), through the callback
   * 1–6 MiB; a CSV export of 100,000 payments first grew the process by 122–128 MiB, now 25–26.
   */
  #promised(config: pg.QueryConfig): Promise<QueryResult> {
    return new Promise<QueryResult>((resolve, reject) => {
      super.query(config, (err: Error | null, result: QueryResult) => (err ? reject(err) : resolve(result)));
    }).catch((err: unknown) => {
      // As pg's promise form does: the stack then names the caller that awaited the query
      // (async frames), not only the socket read that delivered the error.
      if (err instanceof Error) Error.captureStackTrace(err);
      throw err;
    });
  }
}
