import type { FastifyBaseLogger } from "fastify";
import type pg from "pg";
import { KeyedQueue } from "../concurrency/keyed-queue.ts";
import type { Db } from "./database.ts";
import { sessionLockPool } from "./database.ts";

// Turns per key (a wallet) that hold across instances, for tasks that include work outside any
// database transaction (broadcasting a transaction to a node after recording it). In this
// process the turns of a key are a queue; across instances, a session-level advisory lock on
// PostgreSQL, on a connection of the lock pool that is idle while the tasks run their queries on
// the main pool. A process that dies, or is stopped for longer than the sessions' idle limit,
// loses its session and so its lock.
//
// A burst of one key's turns takes the lock once: it is kept while turns are waiting, and for
// LINGER_MS after the last (the next payout of a wallet usually follows within that), up to
// MAX_TURNS_PER_LOCK turns and MAX_HOLD_MS, so that another instance's turns get it in between. A task is told
// whether the lock was taken for its turn: only then may state another instance could have
// changed (a wallet's last nonce) have changed since the previous turn.
// The embedded database is one process's alone: the queue is all the ordering it needs.

/** What runIfFree answers when another instance holds the lock. */
export const NOT_FREE: unique symbol = Symbol("not free");

const MAX_TURNS_PER_LOCK = 16;
const LINGER_MS = 25;
/**
 * A kept lock is given up after this long: its session is idle all along (the turns' queries run
 * on the main pool), and PostgreSQL ends sessions idle for 60 s, which would lose the lock unseen.
 */
const MAX_HOLD_MS = 20_000;

interface HeldLock {
  client: pg.PoolClient;
  turns: number;
  since: number;
  linger: NodeJS.Timeout | undefined;
}

export class SessionTurns {
  readonly #db: Db;
  readonly #log: FastifyBaseLogger;
  readonly #queue = new KeyedQueue();
  readonly #waiting = new Map<string, number>();
  readonly #held = new Map<string, HeldLock>();

  constructor(db: Db, log: FastifyBaseLogger) {
    this.#db = db;
    this.#log = log;
  }

  /**
   * Runs `task` in the next turn of `name`. `fresh`: the lock was taken for this turn (always,
   * on the embedded database, where there is no lock to keep).
   */
  run<T>(name: string, task: (fresh: boolean) => Promise<T>): Promise<T> {
    return this.#turn(name, "wait", task);
  }

  /**
   * Runs `task` in the next turn of `name` unless another instance holds its lock now: then
   * resolves to NOT_FREE at once. For work that the next attempt can do as well (a reconciler's
   * pass), which must not wait out a stopped instance's lock (up to the sessions' idle limit).
   */
  runIfFree<T>(name: string, task: (fresh: boolean) => Promise<T>): Promise<T | typeof NOT_FREE> {
    // A turn of this process already waiting for the lock (no lock kept) may be waiting for
    // another instance's: not behind it either.
    if (sessionLockPool(this.#db) && this.#queue.busy(name) && !this.#held.has(name)) {
      return Promise.resolve(NOT_FREE);
    }
    return this.#turn(name, "try", task);
  }

  #turn<T>(name: string, mode: "wait", task: (fresh: boolean) => Promise<T>): Promise<T>;
  #turn<T>(name: string, mode: "try", task: (fresh: boolean) => Promise<T>): Promise<T | typeof NOT_FREE>;
  #turn<T>(
    name: string,
    mode: "wait" | "try",
    task: (fresh: boolean) => Promise<T>,
  ): Promise<T | typeof NOT_FREE> {
    this.#waiting.set(name, (this.#waiting.get(name) ?? 0) + 1);
    return this.#queue.run(name, async () => {
      const waiting = (this.#waiting.get(name) ?? 1) - 1;
      if (waiting === 0) this.#waiting.delete(name);
      else this.#waiting.set(name, waiting);
      const lock = await this.#lock(name, mode);
      if (lock === NOT_FREE) return NOT_FREE;
      const { held, fresh } = lock;
      try {
        return await task(fresh);
      } finally {
        if (held) this.#afterTurn(name, held);
      }
    });
  }

  /**
   * The lock of `name`, kept from an earlier turn or taken now (waited for, or only if free);
   * none on the embedded database.
   */
  async #lock(
    name: string,
    mode: "wait" | "try",
  ): Promise<{ held: HeldLock | undefined; fresh: boolean } | typeof NOT_FREE> {
    const kept = this.#held.get(name);
    if (kept) {
      clearTimeout(kept.linger);
      kept.linger = undefined;
      kept.turns++;
      return { held: kept, fresh: false };
    }
    const pool = sessionLockPool(this.#db);
    if (!pool) return { held: undefined, fresh: true };
    const client = await pool.connect();
    try {
      if (mode === "wait") await client.query("SELECT pg_advisory_lock(hashtext($1))", [name]);
      else {
        const taken = await client.query<{ ok: boolean }>("SELECT pg_try_advisory_lock(hashtext($1)) AS ok", [
          name,
        ]);
        if (!taken.rows[0]?.ok) {
          client.release();
          return NOT_FREE;
        }
      }
    } catch (err) {
      client.release(err instanceof Error ? err : true);
      throw err;
    }
    const held: HeldLock = { client, turns: 1, since: Date.now(), linger: undefined };
    this.#held.set(name, held);
    return { held, fresh: true };
  }

  #afterTurn(name: string, held: HeldLock): void {
    if (held.turns >= MAX_TURNS_PER_LOCK || Date.now() - held.since > MAX_HOLD_MS) {
      this.#release(name, held);
      return;
    }
    if (this.#waiting.has(name)) return; // the next turn is queued: it takes the lock as it is
    held.linger = setTimeout(() => this.#release(name, held), LINGER_MS);
    held.linger.unref();
  }

  #release(name: string, held: HeldLock): void {
    clearTimeout(held.linger);
    if (this.#held.get(name) === held) this.#held.delete(name);
    // Not awaited: a next holder's lock request waits in PostgreSQL for this unlock.
    void this.#unlock(name, held);
  }

  async #unlock(name: string, held: HeldLock): Promise<void> {
    try {
      await held.client.query("SELECT pg_advisory_unlock(hashtext($1))", [name]);
      held.client.release();
    } catch (err) {
      // The turns' work is done and stands; a session that cannot unlock is ended (released
      // with the error), which releases its lock.
      this.#log.error({ err, lock: name }, "releasing a session lock failed; its session is ended instead");
      held.client.release(err instanceof Error ? err : true);
    }
  }
}
