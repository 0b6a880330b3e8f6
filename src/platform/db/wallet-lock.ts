import { sql } from "kysely";
import { type Db, isEmbedded } from "./database.ts";

// A lock held across instances for as long as a task runs, including work outside any database
// transaction (broadcasting a transaction to a node after recording it). PostgreSQL: a
// session-level advisory lock on one pooled connection, which the task uses for its own queries;
// a process that dies loses its session and so its lock. The embedded database is one process's
// alone: the callers' in-process queues already order its tasks, and holding its only
// connection across a network call would stop every other query meanwhile.

export class SessionLocks {
  readonly #db: Db;

  constructor(db: Db) {
    this.#db = db;
  }

  /** Runs `task` while holding the lock `name`; `task` gets the connection that holds it. */
  async hold<T>(name: string, task: (db: Db) => Promise<T>): Promise<T> {
    if (isEmbedded(this.#db)) return task(this.#db);
    return this.#db.connection().execute(async (connection) => {
      await sql`SELECT pg_advisory_lock(hashtext(${name}))`.execute(connection);
      try {
        return await task(connection);
      } finally {
        await sql`SELECT pg_advisory_unlock(hashtext(${name}))`.execute(connection);
      }
    });
  }
}
