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
import type { PlannedSwap, Scope, SwapAsk, SwapPlan, SwapVenue, VenueQuote } from "./venue.ts";
import { PoolMoved } from "./venue.ts";

// The sandbox's swaps (D16) against constant-product pools on the simulated ledger: one set of
// pools per workspace (no tenant sees another's trades in its prices), starting from the reserves
// in SANDBOX_POOLS (docs/api.md), fee 0.3%. What a swap sells goes to the pool's ledger address as
// a transfer of the payout operation; what it buys is credited to the wallet, and the reserves
// move, in the transaction that records that transfer, under the pool's row lock.

interface Reserves {
  baseReserve: bigint;
  quoteReserve: bigint;
}

export class SandboxVenue implements SwapVenue {
  readonly #db: Db;
  readonly #ledger: SimulatedLedger;

  constructor(db: Db, ledger: SimulatedLedger) {
    this.#db = db;
    this.#ledger = ledger;
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
    if (!fill) throw new PoolMoved("the pool can no longer fill the swap");
    const sold = fill.sellAmount;
    const bought = fill.buyAmount;
    return {
      amount: sold,
      destination: poolAddress(scope, found.pair),
      known: { sold, bought },
      guard: async (trx) => {
        // The trade is the one planned only if nobody traded against the pool meanwhile.
        const now = await this.#reserves(trx, scope, found.pair, { lock: true });
        if (now.baseReserve !== seen.baseReserve || now.quoteReserve !== seen.quoteReserve)
          throw new PoolMoved("the pool traded meanwhile");
        const [baseIn, quoteIn] = found.sellIsBase ? [sold, -bought] : [-bought, sold];
        await trx
          .updateTable("sandbox_swap_pools")
          .set({
            base_reserve: (now.baseReserve + baseIn).toString(),
            quote_reserve: (now.quoteReserve + quoteIn).toString(),
          })
          .where("workspace_id", "=", scope.workspaceId)
          .where("pair", "=", found.pair)
          .execute();
        await this.#ledger.credit(swap.wallet.from, swap.ask.buy, bought, `swap:${swap.id}:bought`, trx);
      },
    };
  }

  async amounts(): Promise<never> {
    throw new Error("a sandbox swap's amounts are known when it is recorded");
  }

  /** The pool's reserves, made from SANDBOX_POOLS at the workspace's first use of it. */
  async #reserves(
    db: Db,
    scope: Scope,
    pair: SandboxPair,
    options: { lock?: boolean } = {},
  ): Promise<Reserves> {
    const initial = SANDBOX_POOLS[pair];
    if (options.lock) {
      await db
        .insertInto("sandbox_swap_pools")
        .values({
          workspace_id: scope.workspaceId,
          pair,
          base_reserve: initial.baseReserve.toString(),
          quote_reserve: initial.quoteReserve.toString(),
        })
        .onConflict((oc) => oc.doNothing())
        .execute();
    }
    const row = await db
      .selectFrom("sandbox_swap_pools")
      .select(["base_reserve", "quote_reserve"])
      .where("workspace_id", "=", scope.workspaceId)
      .where("pair", "=", pair)
      .$if(options.lock === true, (q) => q.forUpdate())
      .executeTakeFirst();
    if (!row) return { baseReserve: initial.baseReserve, quoteReserve: initial.quoteReserve };
    return { baseReserve: BigInt(row.base_reserve), quoteReserve: BigInt(row.quote_reserve) };
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
