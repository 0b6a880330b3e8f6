import { randomUUID } from "node:crypto";
import type { FastifyBaseLogger } from "fastify";
import { sql } from "kysely";
import type { Db } from "../db/database.ts";
import { type Fence, FenceRefused, runFences } from "../db/fences.ts";

// A periodic job that runs on one instance at a time. Leadership is a lease row, taken or renewed
// at the start of every tick and renewed while a tick runs (a tick may wait on receipts for longer
// than the lease); an instance that dies, or is stopped, stops renewing and another takes over
// when the lease runs out. A lease can still be lost under a running tick (a process paused past
// it): what a tick must not do twice is fenced with `fence`, checked in the transaction that
// records it.

export interface PeriodicJobOptions {
  name: string;
  intervalMs: number;
  /** How long a lease lasts without renewal: unset, five intervals and at least `minLeaseMs`. */
  leaseMs?: number;
  /** JOB_LEASE_SECONDS: how soon another instance takes over after this one stops (10 s unset). */
  minLeaseMs?: number;
  tick: () => Promise<void>;
  /** Called when a tick is due and another instance holds the lease. */
  onNotLeading?: () => void;
}

/** The name of a job's lease fence (PeriodicJob.leaseFence) in a refusal. */
export const LEASE_FENCE = "job-lease";

/** The job's lease is held by another instance now: the caller's transaction must not commit. */
export class LeaseLost extends Error {
  override name = "LeaseLost";
  readonly code = "LEASE_LOST";
}

export class PeriodicJob {
  readonly #db: Db;
  readonly #log: FastifyBaseLogger;
  readonly #opts: Required<Omit<PeriodicJobOptions, "onNotLeading" | "minLeaseMs">> & PeriodicJobOptions;
  readonly #holder = randomUUID();
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #stopped = true;

  constructor(db: Db, log: FastifyBaseLogger, options: PeriodicJobOptions) {
    this.#db = db;
    this.#log = log;
    this.#opts = { leaseMs: Math.max(options.minLeaseMs ?? 10_000, options.intervalMs * 5), ...options };
  }

  get name(): string {
    return this.#opts.name;
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
    if (!(await this.#acquire())) {
      this.#opts.onNotLeading?.();
      return false;
    }
    const renewal = setInterval(() => void this.#renew(), this.#opts.leaseMs / 3);
    try {
      await this.#opts.tick();
    } finally {
      clearInterval(renewal);
    }
    return true;
  }

  /**
   * Throws LeaseLost unless this instance holds the lease; within the caller's transaction the
   * lease row is then shared-locked, so no other instance can take it over before that commits.
   */
  async fence(trx: Db): Promise<void> {
    try {
      await runFences(trx, [this.leaseFence()]);
    } catch (err) {
      if (!(err instanceof FenceRefused)) throw err;
      throw new LeaseLost(`${this.#opts.name}: this instance no longer holds the job's lease`);
    }
  }

  /**
   * The same check as a statement (platform/db/fences.ts), for a recorder that runs it in its own
   * transaction: it returns the lease row, shared-locked, while this instance holds it; a record
   * it fences is refused by the fence named LEASE_FENCE otherwise.
   */
  leaseFence(): Fence {
    const statement = sql`
      SELECT name FROM job_leases
      WHERE name = ${this.#opts.name} AND holder = ${this.#holder} AND expires_at > now()
      FOR SHARE`.compile(this.#db);
    return { name: LEASE_FENCE, statement, required: true };
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
    const expires = sql`now() + make_interval(secs => ${this.#opts.leaseMs / 1000})`;
    const inserted = await sql<{ holder: string }>`
      INSERT INTO job_leases (name, holder, expires_at) VALUES (${this.#opts.name}, ${this.#holder}, ${expires})
      ON CONFLICT (name) DO NOTHING
      RETURNING holder`.execute(this.#db);
    if (inserted.rows.length > 0) return true;
    // Renewed, or taken over once it ran out. A lease row that a holder's send has locked
    // (fence) is skipped, not waited for: that holder is still recording, so this is not a
    // tick for another instance to run.
    const taken = await sql<{ holder: string }>`
      UPDATE job_leases SET holder = ${this.#holder}, expires_at = ${expires}
      WHERE name = (
        SELECT name FROM job_leases
        WHERE name = ${this.#opts.name} AND (holder = ${this.#holder} OR expires_at < now())
        FOR UPDATE SKIP LOCKED)
      RETURNING holder`.execute(this.#db);
    return taken.rows.length > 0;
  }

  /** Extends a lease this instance still holds; one that ran out and was taken is not taken back. */
  async #renew(): Promise<void> {
    try {
      const renewed = await sql<{ holder: string }>`
        UPDATE job_leases SET expires_at = now() + make_interval(secs => ${this.#opts.leaseMs / 1000})
        WHERE name = ${this.#opts.name} AND holder = ${this.#holder}
        RETURNING holder`.execute(this.#db);
      if (renewed.rows.length === 0) {
        this.#log.warn({ job: this.#opts.name }, "the job's lease was taken over while a tick ran");
      }
    } catch (err) {
      this.#log.error({ err, job: this.#opts.name }, "renewing the job's lease failed");
    }
  }
}
