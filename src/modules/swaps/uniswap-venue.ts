import type { UniswapV3 } from "../../chain/evm/uniswap.ts";
import type { ChainToken, EventLog, Hex } from "../../chain/network.ts";
import { Unavailable } from "../../domain/errors.ts";
import { sqrtPriceImpactBps } from "../../domain/swap-math.ts";
import type { PlannedSwap, SwapAsk, SwapPlan, SwapVenue, VenueQuote } from "./venue.ts";

// Swaps on a network's Uniswap v3 pools (D16): quoted by QuoterV2 across the fee tiers, executed
// through SwapRouter with the quote's limits and its expiry as the deadline, so that a price that
// moved past the slippage reverts on chain instead of costing the wallet.

export class UniswapVenue implements SwapVenue {
  readonly network: string;
  readonly #uniswap: UniswapV3;

  constructor(network: string, uniswap: UniswapV3) {
    this.network = network;
    this.#uniswap = uniswap;
  }

  async quote(_scope: unknown, ask: SwapAsk): Promise<VenueQuote | null> {
    let best: Awaited<ReturnType<UniswapV3["bestQuote"]>>;
    try {
      best = await this.#uniswap.bestQuote(ask.sell, ask.buy, ask.side, ask.amount);
    } catch (err) {
      // Not "no liquidity": nobody could tell.
      throw new Unavailable("The network's swap contracts did not answer; try again", {}, { cause: err });
    }
    if (!best) return null;
    return {
      sellAmount: best.sellAmount,
      buyAmount: best.buyAmount,
      priceImpactBps: sqrtPriceImpactBps(best.sqrtPriceBefore, best.sqrtPriceAfter),
      route: [{ protocol: "uniswap-v3", pool: best.pool, fee: best.fee }],
      gasEstimate: best.gasEstimate,
    };
  }

  async plan(swap: PlannedSwap): Promise<SwapPlan> {
    const hop = swap.quote.route[0];
    if (!hop) throw new Error("a quote without a route");
    const { from } = swap.wallet;
    // The EOA approves only when the router's allowance is short (D16); a smart wallet's approval
    // rides in its one sponsored operation, always, so no other operation can spend it first.
    const allowance =
      swap.ask.sell === "ETH" || swap.wallet.walletType === "smart_wallet"
        ? 0n
        : await this.#uniswap.allowance(from, swap.ask.sell);
    const calls = this.#uniswap.swapCalls(
      {
        sell: swap.ask.sell,
        buy: swap.ask.buy,
        side: swap.ask.side,
        fee: hop.fee,
        maxSell: swap.maxSell,
        minBuy: swap.minBuy,
        wallet: from,
        deadline: BigInt(Math.floor(swap.expiresAt.getTime() / 1000)),
        gasEstimate: swap.quote.gasEstimate,
      },
      allowance,
    );
    return {
      amount: swap.maxSell,
      destination: this.#uniswap.config.routerAddress as Hex,
      legs: calls.map((call) => ({ ...call })),
    };
  }

  /** The first pool's Swap event among a swap's own events (its transaction's, or its operation's). */
  amountsIn(
    logs: readonly EventLog[],
    swap: { sell: ChainToken; buy: ChainToken; pool: Hex | undefined },
  ): { sold: bigint; bought: bigint } {
    return this.#uniswap.swapAmounts(logs, swap.pool, swap.sell, swap.buy);
  }
}
