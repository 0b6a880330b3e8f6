// Live payouts of this process that are being sent or waiting for their receipts, per workspace
// and environment: how many a wallet has in flight (bounded), and, after a failure, a way for the
// circuit breaker to wait until they have all finished before it decides on the next payout.
// (What they take from the wallet's balance is reserved in the database, for every instance:
// domain/payout-funds.ts.)

export class InFlightTransfers {
  readonly #scopes = new Map<string, Set<Promise<unknown>>>();

  /** Tracks a payout until `done` settles (either way). */
  add(scope: string, done: Promise<unknown>): void {
    let set = this.#scopes.get(scope);
    if (!set) {
      set = new Set();
      this.#scopes.set(scope, set);
    }
    set.add(done);
    const remove = () => {
      set.delete(done);
      if (set.size === 0 && this.#scopes.get(scope) === set) this.#scopes.delete(scope);
    };
    done.then(remove, remove);
  }

  size(scope: string): number {
    return this.#scopes.get(scope)?.size ?? 0;
  }

  /** Resolves once fewer than `limit` payouts of `scope` are in flight. */
  async below(scope: string, limit: number): Promise<void> {
    for (let set = this.#scopes.get(scope); set && set.size >= limit; set = this.#scopes.get(scope)) {
      await Promise.race([...set].map((done) => done.then(noop, noop)));
    }
  }

  /** Resolves once every payout of `scope` in flight now has finished. */
  async drain(scope: string): Promise<void> {
    await Promise.all([...(this.#scopes.get(scope) ?? [])].map((done) => done.then(noop, noop)));
  }
}

function noop(): void {}
