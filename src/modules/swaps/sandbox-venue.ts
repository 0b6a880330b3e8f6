import { createHash } from "node:crypto";
import type { Hex } from "../../chain/network.ts";
import type { SimulatedLedger } from "../../chain/simulated/ledger.ts";
import {
  amountInGivenOut,
  amountOutGivenIn,
  orientPool,
  poolPriceImpactBps,
  SANDBOX_FEE_BPS,
  SANDBOX_POOLS,
  type SandboxPair,
  sandboxPair,
} from "../../domain/swap-math.ts";
import type { Db } from "../../platform/db/database.ts";
import type { Reserves } from "./pools-repo.ts";
import * as pools from "./pools-repo.ts";
import type { PlannedSwap, Scope, SwapAsk, SwapPlan, SwapVenue, VenueQuote } from "./venue.ts";
import { PoolMoved } from "./venue.ts";

// The sandbox's swaps (D16) against constant-product pools on the simulated ledger: one set of
// pools per workspace and simulated network (D22) (no tenant sees another's trades in its prices), starting from the reserves
// in SANDBOX_POOLS (docs/api.md), fee 0.3%. What a swap sells goes to the pool's ledger address as
// a transfer of the payout operation; what it buys is credited to the wallet, and the reserves
// move, in the transaction that records that transfer, under the pool's row lock.

export class SandboxVenue implements SwapVenue {
  /** The ledger's network it trades on, as its rail's (rails/ledger-rail.ts). */
  readonly network: string;
  readonly #db: Db;
  readonly #ledger: SimulatedLedger;

  constructor(db: Db, ledger: SimulatedLedger, network: string) {
    this.#db = db;
    this.#ledger = ledger;
    this.network = network;
  }

  async quote(scope: Scope, ask: SwapAsk): Promise<VenueQuote | null> {
    const found = sandboxPair(ask.sell, ask.buy);
    if (!found) return null;
    const reserves = await this.#reserves(this.#db, scope, found.pair);
    const fill = fillOf(reserves, found.sellIsBase, ask);
    if (!fill) return null;
    return {
      ...fill,
      route: [
        {
          protocol: "sandbox-constant-product",
          pool: poolAddress(scope, found.pair),
          fee: SANDBOX_FEE_BPS * 100,
        },
      ],
      gasEstimate: 0n,
    };
  }

  async plan(swap: PlannedSwap): Promise<SwapPlan> {
    const found = sandboxPair(swap.ask.sell, swap.ask.buy);
    if (!found) throw new Error(`no sandbox pool for ${swap.ask.sell}/${swap.ask.buy}`);
    const { scope } = swap;
    const seen = await this.#reserves(this.#db, scope, found.pair);
    const fill = fillOf(seen, found.sellIsBase, swap.ask);
    // Traded past the quote's limits since it was quoted again: quoted once more, which answers it.
    if (!fill || fill.buyAmount < swap.minBuy || fill.sellAmount > swap.maxSell)
      throw new PoolMoved("the pool moved past the quote's limits");
    const sold = fill.sellAmount;
    const bought = fill.buyAmount;
    const [baseIn, quoteIn] = found.sellIsBase ? [sold, -bought] : [-bought, sold];
    return {
      amount: sold,
      destination: poolAddress(scope, found.pair),
      known: { sold, bought },
      // The trade is the one planned only if nobody traded against the pool meanwhile.
      fences: [
        ...pools.tradeFences(this.#db, scope, this.network, found.pair, {
          initial: SANDBOX_POOLS[found.pair],
          seen,
          delta: { baseReserve: baseIn, quoteReserve: quoteIn },
        }),
        {
          name: "bought",
          statement: this.#ledger.creditStatement({
            network: this.network,
            address: swap.wallet.from,
            token: swap.ask.buy,
            amount: bought,
            reference: `swap:${swap.id}:bought`,
          }),
          required: false,
        },
      ],
    };
  }

  amountsIn(): never {
    throw new Error("a sandbox swap's amounts are known when it is recorded");
  }

  /** The pool's reserves, SANDBOX_POOLS' before the workspace's first trade of the pair. */
  async #reserves(db: Db, scope: Scope, pair: SandboxPair): Promise<Reserves> {
    return (await pools.readReserves(db, scope, this.network, pair)) ?? SANDBOX_POOLS[pair];
  }
}

/** What the pool fills of `ask`, with the price impact; null past its reserves. */
function fillOf(
  reserves: Reserves,
  sellIsBase: boolean,
  ask: SwapAsk,
): Pick<VenueQuote, "sellAmount" | "buyAmount" | "priceImpactBps"> | null {
  const pool = orientPool(reserves, sellIsBase);
  const sellAmount =
    ask.side === "exact_in" ? ask.amount : amountInGivenOut(pool, ask.amount, SANDBOX_FEE_BPS);
  if (sellAmount === null) return null;
  const buyAmount =
    ask.side === "exact_in" ? amountOutGivenIn(pool, ask.amount, SANDBOX_FEE_BPS) : ask.amount;
  if (buyAmount <= 0n || buyAmount >= pool.reserveOut) return null;
  const after = { reserveIn: pool.reserveIn + sellAmount, reserveOut: pool.reserveOut - buyAmount };
  return { sellAmount, buyAmount, priceImpactBps: poolPriceImpactBps(pool, after) };
}

/** The ledger address of a workspace's pool: what swaps sell there accumulates at it. */
export function poolAddress(scope: Scope, pair: SandboxPair): Hex {
  const digest = createHash("sha256").update(`sandbox-swap-pool:${scope.workspaceId}:${pair}`).digest("hex");
  return `0x${digest.slice(0, 40)}`;
}
