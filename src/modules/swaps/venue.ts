import type { ChainToken, EventLog, Hex } from "../../chain/network.ts";
import type { Environment } from "../../config.ts";
import type { Fence } from "../../platform/db/fences.ts";
import type { RouteHop } from "../../platform/db/schema-exchange.ts";
import type { Leg } from "../../rails/rail.ts";

// Where an environment's swaps trade (D16): Uniswap v3 on a network (uniswap-venue.ts), or the
// sandbox's constant-product pools on the simulated ledger (sandbox-venue.ts). The swap operation
// (service.ts) asks its venue the same three questions and never which venue it holds; the money
// itself leaves the wallet as a transfer of the payout operation, through the Rail port.

export type Scope = { workspaceId: string; environment: Environment };
export type SwapSide = "exact_in" | "exact_out";

export interface SwapAsk {
  sell: ChainToken;
  buy: ChainToken;
  side: SwapSide;
  /** Of `sell` for exact_in, of `buy` for exact_out. */
  amount: bigint;
}

/** What a venue would fill now. */
export interface VenueQuote {
  sellAmount: bigint;
  buyAmount: bigint;
  priceImpactBps: number;
  route: RouteHop[];
  /** Gas the swap itself takes (the quoter's figure; 0 on the ledger). */
  gasEstimate: bigint;
}

/** A quote, with its limits, about to be executed from `wallet`. */
export interface PlannedSwap {
  id: string;
  scope: Scope;
  ask: SwapAsk;
  quote: VenueQuote;
  minBuy: bigint;
  maxSell: bigint;
  wallet: { from: Hex; walletType: "eoa" | "smart_wallet" };
  expiresAt: Date;
}

/** How a venue executes a planned swap: the transfer the payout operation sends for it. */
export interface SwapPlan {
  /** The most the transfer takes of the sold token (what the wallet's checks reserve). */
  amount: bigint;
  /** Where that money goes: the router, or the sandbox pool. */
  destination: Hex;
  /** The calls of a swap on a chain; none for the ledger's plain transfer to its pool. */
  legs?: Leg[];
  /** The venue's part of the transaction that records the swap (the sandbox pool's trade). */
  fences?: Fence[];
  /** What it sells and buys, where the venue knows it before it runs (the ledger's pools). */
  known?: { sold: bigint; bought: bigint };
}

export interface SwapVenue {
  /** The network it trades on (D22): its quotes and swaps name it. */
  readonly network: string;
  /** The best fill of `ask` now, or null when no pool can fill it (400 No liquidity). */
  quote(scope: Scope, ask: SwapAsk): Promise<VenueQuote | null>;
  plan(swap: PlannedSwap): Promise<SwapPlan>;
  /**
   * What a completed swap sold and bought, read from the events its move emitted (the rail's
   * `logsOf`): `pool` is its route's first. Pure: nothing is read here.
   */
  amountsIn(
    logs: readonly EventLog[],
    swap: { sell: ChainToken; buy: ChainToken; pool: Hex | undefined },
  ): { sold: bigint; bought: bigint };
}

/** The planned swap changed under a concurrent one before it was recorded: plan it again. */
export class PoolMoved extends Error {
  override name = "PoolMoved";
}
