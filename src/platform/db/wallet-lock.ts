import type { FastifyBaseLogger } from "fastify";
import type { Db } from "./database.ts";
import { sessionLockPool } from "./database.ts";

// A lock held across instances for as long as a task runs, including work outside any database
// transaction (broadcasting a transaction to a node after recording it). PostgreSQL: a
// session-level advisory lock on a connection of the lock pool, idle while the task runs its own
// queries on the main pool; a process that dies, or is stopped for longer than the sessions'
// idle limit, loses its session and so its lock. The embedded database is one process's alone:
// the callers' in-process queues already order its tasks.

export class SessionLocks {
  readonly #db: Db;
  readonly #log: FastifyBaseLogger;

  constructor(db: Db, log: FastifyBaseLogger) {
    this.#db = db;
    this.#log = log;
  }

  /** Runs `task` while holding the lock `name`. */
  async hold<T>(name: string, task: () => Promise<T>): Promise<T> {
    const pool = sessionLockPool(this.#db);
    if (!pool) return task();
    const client = await pool.connect();
    try {
      await client.query("SELECT pg_advisory_lock(hashtext($1))", [name]);
    } catch (err) {
      client.release(err instanceof Error ? err : true);
      throw err;
    }
    try {
      return await task();
    } finally {
      try {
        await client.query("SELECT pg_advisory_unlock(hashtext($1))", [name]);
        client.release();
      } catch (err) {
        // The task's work is done and stands; a session that cannot unlock is ended (released
        // with the error), which releases its lock.
        this.#log.error({ err, lock: name }, "releasing a session lock failed; its session is ended instead");
        client.release(err instanceof Error ? err : true);
      }
    }
  }
}
