import type { ChainToken } from "../../chain/network.ts";

// Payouts of this process that are being sent or waiting for their receipts, per workspace and
// environment. Until its transaction is mined a payout's amount (and its gas) is still on the
// wallet's balance as the chain reports it, so the next payout's balance check subtracts it; and
// the circuit breaker waits for them to finish before it decides on a payout after a failure.
//
// "Until mined" is decided by nonce, not by this process having seen the receipt: a payout is
// finished here some time after its block, and a balance read in between already shows it spent.

export interface InFlightPayout {
  /** Token amounts this payout will take from the wallet (its transfer, and ETH for its gas). */
  amounts: Partial<Record<ChainToken, bigint>>;
  /** Its transaction's nonce, set once it is broadcast. */
  nonce?: number;
  /** Settles (either way) when the payout is finished. */
  done: Promise<unknown>;
}

/**
 * What `payouts` will still take of `token` from a balance read at a block where the wallet's
 * first `minedNonce` transactions are mined (null: not known, every payout still takes its
 * amount). A payout without a nonce yet is not broadcast, so it is in no block.
 */
export function stillToTake(
  payouts: readonly InFlightPayout[],
  token: ChainToken,
  minedNonce: number | null,
): bigint {
  let total = 0n;
  for (const payout of payouts) {
    const mined = minedNonce !== null && payout.nonce !== undefined && payout.nonce < minedNonce;
    if (!mined) total += payout.amounts[token] ?? 0n;
  }
  return total;
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

  /**
   * The payouts of `scope` in flight now. Taken before the wallet's balance is read, it holds every
   * payout that balance might not show yet: one that finishes after this still counts until its
   * nonce shows it mined at the block read.
   */
  snapshot(scope: string): InFlightPayout[] {
    return [...(this.#scopes.get(scope) ?? [])];
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
