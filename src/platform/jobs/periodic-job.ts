import { randomUUID } from "node:crypto";
import type { FastifyBaseLogger } from "fastify";
import { sql } from "kysely";
import type { Db } from "../db/database.ts";

// A periodic job that runs on one instance at a time. Leadership is a lease row renewed on every
// tick; an instance that dies stops renewing and another takes over when the lease runs out.

export interface PeriodicJobOptions {
  name: string;
  intervalMs: number;
  /** How long a lease lasts without renewal; longer than one tick may take. */
  leaseMs?: number;
  tick: () => Promise<void>;
}

export class PeriodicJob {
  readonly #db: Db;
  readonly #log: FastifyBaseLogger;
  readonly #opts: Required<PeriodicJobOptions>;
  readonly #holder = randomUUID();
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #stopped = true;

  constructor(db: Db, log: FastifyBaseLogger, options: PeriodicJobOptions) {
    this.#db = db;
    this.#log = log;
    this.#opts = { leaseMs: Math.max(30_000, options.intervalMs * 5), ...options };
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#schedule(0);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
    await this.#db
      .deleteFrom("job_leases")
      .where("name", "=", this.#opts.name)
      .where("holder", "=", this.#holder)
      .execute();
  }

  /** Runs one tick now if this instance holds (or takes) the lease; returns whether it ran. */
  async runOnce(): Promise<boolean> {
    if (!(await this.#acquire())) return false;
    await this.#opts.tick();
    return true;
  }

  #schedule(delay: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      const started = Date.now();
      this.#running = this.runOnce()
        .then(() => undefined)
        .catch((err: unknown) => this.#log.error({ err, job: this.#opts.name }, "periodic job failed"))
        // The interval runs from tick start to tick start (a tick's own time is not added on top),
        // so the chain watcher looks at a new block within one polling interval.
        .finally(() => this.#schedule(Math.max(0, this.#opts.intervalMs - (Date.now() - started))));
    }, delay);
  }

  async #acquire(): Promise<boolean> {
    const result = await sql<{ holder: string }>`
      INSERT INTO job_leases (name, holder, expires_at)
      VALUES (${this.#opts.name}, ${this.#holder}, now() + make_interval(secs => ${this.#opts.leaseMs / 1000}))
      ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
      WHERE job_leases.holder = excluded.holder OR job_leases.expires_at < now()
      RETURNING holder
    `.execute(this.#db);
    return result.rows.length > 0;
  }
}
