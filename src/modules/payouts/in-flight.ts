import type { ChainToken } from "../../chain/network.ts";

// Payouts of this process that are broadcast and waiting for their receipts, per workspace and
// environment. While they are in flight their amounts (and their gas) are still on the wallet's
// balance as the chain reports it at the latest block, so the next payout's balance check
// subtracts them; and the circuit breaker waits for them to finish before it decides on a
// payout after a failure.

export interface InFlightPayout {
  /** Token amounts this payout will take from the wallet (its transfer, and ETH for its gas). */
  amounts: Partial<Record<ChainToken, bigint>>;
  /** Settles (either way) when the payout is finished. */
  done: Promise<unknown>;
}

export class InFlightPayouts {
  readonly #scopes = new Map<string, Set<InFlightPayout>>();

  /** Tracks `payout` until its `done` settles. */
  add(scope: string, payout: InFlightPayout): void {
    let set = this.#scopes.get(scope);
    if (!set) {
      set = new Set();
      this.#scopes.set(scope, set);
    }
    set.add(payout);
    const remove = () => {
      set.delete(payout);
      if (set.size === 0 && this.#scopes.get(scope) === set) this.#scopes.delete(scope);
    };
    payout.done.then(remove, remove);
  }

  size(scope: string): number {
    return this.#scopes.get(scope)?.size ?? 0;
  }

  reserved(scope: string, token: ChainToken): bigint {
    let total = 0n;
    for (const payout of this.#scopes.get(scope) ?? []) total += payout.amounts[token] ?? 0n;
    return total;
  }

  /** Resolves once fewer than `limit` payouts of `scope` are in flight. */
  async below(scope: string, limit: number): Promise<void> {
    for (let set = this.#scopes.get(scope); set && set.size >= limit; set = this.#scopes.get(scope)) {
      await Promise.race([...set].map((p) => p.done.then(noop, noop)));
    }
  }

  /** Resolves once every payout of `scope` in flight now has finished. */
  async drain(scope: string): Promise<void> {
    await Promise.all([...(this.#scopes.get(scope) ?? [])].map((p) => p.done.then(noop, noop)));
  }
}

function noop(): void {}
