import type { FastifyBaseLogger } from "fastify";
import type { Kysely } from "kysely";
import type { DatabaseSchema } from "./schema.ts";

/** The database handle (database.ts's Db, named here so that database.ts may import this file). */
type Db = Kysely<DatabaseSchema>;

// Notices from the database (LISTEN/NOTIFY), for a request that must wait until something another
// instance does has committed (a payout its idempotency key repeats, ending): it is woken by the
// notice instead of polling a row. One listening session per channel and process, opened at the
// first wait and opened again after it is lost; a wait is always bounded, and its caller reads the
// row once more when it ends, so a notice lost with a session costs time, never a wrong answer.

/** Listens on `channel`; resolves to the way to stop once listening. */
export type Subscribe = (
  channel: string,
  onNotice: (payload: string) => void,
  onLost: () => void,
) => Promise<() => Promise<void>>;

const subscribers = new WeakMap<Db, Subscribe>();

/** How a database made by openDatabase listens (its own session on a server, in process on PGlite). */
export function registerSubscribe(db: Db, subscribe: Subscribe): void {
  subscribers.set(db, subscribe);
}

export class Notices {
  readonly #db: Db;
  readonly #channel: string;
  readonly #log: FastifyBaseLogger;
  readonly #waiters = new Map<string, Set<() => void>>();
  #listening: Promise<() => Promise<void>> | undefined;

  constructor(db: Db, channel: string, log: FastifyBaseLogger) {
    this.#db = db;
    this.#channel = channel;
    this.#log = log;
  }

  /**
   * Resolves once `key` is noticed on the channel or `happened` says it has already (asked after
   * listening begins, so nothing committed in between is missed), or after `timeoutMs`.
   */
  async waitFor(key: string, timeoutMs: number, happened: () => Promise<boolean>): Promise<void> {
    let wake!: () => void;
    const noticed = new Promise<void>((resolve) => {
      wake = resolve;
    });
    let waiters = this.#waiters.get(key);
    if (!waiters) {
      waiters = new Set();
      this.#waiters.set(key, waiters);
    }
    waiters.add(wake);
    let timer: NodeJS.Timeout | undefined;
    try {
      await this.#listen();
      if (await happened()) return;
      await Promise.race([
        noticed,
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, timeoutMs);
        }),
      ]);
    } finally {
      clearTimeout(timer);
      waiters.delete(wake);
      if (waiters.size === 0) this.#waiters.delete(key);
    }
  }

  async close(): Promise<void> {
    const listening = this.#listening;
    this.#listening = undefined;
    if (!listening) return;
    try {
      await (await listening)();
    } catch (err) {
      this.#log.warn({ err, channel: this.#channel }, "stopping to listen for notices failed");
    }
  }

  /** Listening, or a logged failure to (the waits then last their whole bound). */
  async #listen(): Promise<void> {
    const subscribe = subscribers.get(this.#db);
    if (!subscribe) throw new Error("this database cannot listen for notices (not made by openDatabase)");
    this.#listening ??= subscribe(
      this.#channel,
      (key) => {
        for (const wake of this.#waiters.get(key) ?? []) wake();
      },
      () => {
        this.#log.warn(
          { channel: this.#channel },
          "the session listening for notices was lost; listening again",
        );
        this.#listening = undefined;
      },
    );
    try {
      await this.#listening;
    } catch (err) {
      this.#listening = undefined;
      this.#log.error({ err, channel: this.#channel }, "listening for notices failed; waiting out the bound");
    }
  }
}

/**
 * One long-lived listening session on `channel` per process, fanned out to the handlers of each
 * key (the hosted page's event streams, by payment). Lost sessions are opened again at the next
 * `on`; its users re-read on a bound of their own, so a lost notice costs seconds.
 */
export class NoticeFanOut {
  readonly #db: Db;
  readonly #channel: string;
  readonly #log: FastifyBaseLogger;
  readonly #handlers = new Map<string, Set<() => void>>();
  #listening: Promise<() => Promise<void>> | undefined;

  constructor(db: Db, channel: string, log: FastifyBaseLogger) {
    this.#db = db;
    this.#channel = channel;
    this.#log = log;
  }

  /**
   * Calls `handler` on each notice of `key`. `listening` resolves once the session listens (or
   * failed to): a change committed before then notified no one, so the caller reads once more.
   */
  on(key: string, handler: () => void): { stop: () => void; listening: Promise<void> } {
    let set = this.#handlers.get(key);
    if (!set) {
      set = new Set();
      this.#handlers.set(key, set);
    }
    set.add(handler);
    return {
      stop: () => {
        set.delete(handler);
        if (set.size === 0) this.#handlers.delete(key);
      },
      listening: this.#listen(),
    };
  }

  async close(): Promise<void> {
    const listening = this.#listening;
    this.#listening = undefined;
    this.#handlers.clear();
    if (!listening) return;
    try {
      await (await listening)();
    } catch (err) {
      this.#log.warn({ err, channel: this.#channel }, "stopping to listen for notices failed");
    }
  }

  /** Never rejects: a failure is logged, and the users' own re-reads cover it. */
  async #listen(): Promise<void> {
    const subscribe = subscribers.get(this.#db);
    if (!subscribe) return;
    if (!this.#listening) {
      const listening = subscribe(
        this.#channel,
        (key) => {
          for (const handler of this.#handlers.get(key) ?? []) handler();
        },
        () => {
          this.#log.warn({ channel: this.#channel }, "the session listening for notices was lost");
          this.#listening = undefined;
        },
      );
      this.#listening = listening;
      listening.catch((err: unknown) => {
        if (this.#listening === listening) this.#listening = undefined;
        this.#log.error(
          { err, channel: this.#channel },
          "listening for notices failed; re-reading on a bound",
        );
      });
    }
    await this.#listening.catch(() => {});
  }
}
