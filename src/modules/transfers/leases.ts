import type { FastifyBaseLogger } from "fastify";
import type { Db } from "../../platform/db/database.ts";
import { renewLeases } from "./sending-repo.ts";

// The payouts this process is sending, and the renewal of their leases while they are: a payout
// whose lease runs out is the reconciler's (sending-repo.ts). A timer runs only while there is
// something to renew, and does not keep the process alive.

export class TransferLeases {
  readonly #db: Db;
  readonly #log: FastifyBaseLogger;
  /** TRANSFER_LEASE_SECONDS: what each renewal gives, renewed four times within it. */
  readonly seconds: number;
  readonly #held = new Set<string>();
  #timer: NodeJS.Timeout | undefined;

  constructor(db: Db, log: FastifyBaseLogger, seconds: number) {
    this.#db = db;
    this.#log = log;
    this.seconds = seconds;
  }

  has(id: string): boolean {
    return this.#held.has(id);
  }

  hold(id: string): void {
    this.#held.add(id);
    if (!this.#timer) {
      this.#timer = setInterval(() => void this.#renew(), (this.seconds * 1000) / 4);
      this.#timer.unref();
    }
  }

  release(id: string): void {
    this.#held.delete(id);
    if (this.#held.size === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  async #renew(): Promise<void> {
    try {
      await renewLeases(this.#db, [...this.#held], this.seconds);
    } catch (err) {
      // Loud, and retried at the next renewal; a lease that runs out meanwhile only lets the
      // reconciler look at the payout, which the fences keep from sending or failing it wrongly.
      this.#log.error({ err }, "renewing the leases of payouts in flight failed");
    }
  }
}
