import { type ChainToken, TOKEN_DECIMALS } from "./money.ts";

// Swap arithmetic (D16), pure and in bigint smallest units: constant-product pools as Uniswap v2
// prices them, slippage bounds, price impact and the displayed price. Rounding always favours the
// pool (outputs down, inputs up), so a quote never promises more than the pool can pay.

const BPS = 10_000n;

/** Reserves seen from one trade's direction: what the trader pays in, what the pool pays out. */
export interface ConstantProductPool {
  reserveIn: bigint;
  reserveOut: bigint;
}

/** The sandbox pools' fee: 0.3%, as Uniswap v2. */
export const SANDBOX_FEE_BPS = 30;

/** A fee of 100% or more would divide by zero: a programming error, not user input. */
function feeFactor(feeBps: number): bigint {
  if (!Number.isInteger(feeBps) || feeBps < 0 || feeBps >= 10_000) {
    throw new RangeError(`feeBps must be an integer from 0 to 9999, got ${feeBps}`);
  }
  return BPS - BigInt(feeBps);
}

const hasLiquidity = (pool: ConstantProductPool) => pool.reserveIn > 0n && pool.reserveOut > 0n;

/**
 * Output for an exact input (Uniswap v2 getAmountOut), rounded down. 0n, not an error, for a
 * non-positive input or an empty pool: callers read 0n as "no liquidity".
 */
export function amountOutGivenIn(
  pool: ConstantProductPool,
  amountIn: bigint,
  feeBps: number = SANDBOX_FEE_BPS,
): bigint {
  const factor = feeFactor(feeBps);
  if (amountIn <= 0n || !hasLiquidity(pool)) return 0n;
  const inWithFee = amountIn * factor;
  return (inWithFee * pool.reserveOut) / (pool.reserveIn * BPS + inWithFee);
}

/**
 * Input for an exact output (Uniswap v2 getAmountIn): floor(…) + 1, so the pool is never short,
 * at the cost of one extra unit when the division is exact. null when the output is not positive,
 * the pool is empty, or the output would drain the pool (amountOut >= reserveOut).
 */
export function amountInGivenOut(
  pool: ConstantProductPool,
  amountOut: bigint,
  feeBps: number = SANDBOX_FEE_BPS,
): bigint | null {
  const factor = feeFactor(feeBps);
  if (amountOut <= 0n || !hasLiquidity(pool) || amountOut >= pool.reserveOut) return null;
  return (pool.reserveIn * amountOut * BPS) / ((pool.reserveOut - amountOut) * factor) + 1n;
}

// Sandbox pools: every pair is USDC against one token (single hop, no routing), so USDC is the
// base of each. Initial reserves, in smallest units; the simulated ledger moves them as it trades.

export type SandboxPair = "USDC/ETH" | "USDC/DAI" | "USDC/ADAO";

export interface SandboxPool {
  base: ChainToken;
  quote: ChainToken;
  baseReserve: bigint;
  quoteReserve: bigint;
}

const usdc = (whole: bigint) => whole * 10n ** BigInt(TOKEN_DECIMALS.USDC);
const eighteen = (whole: bigint) => whole * 10n ** 18n;

export const SANDBOX_POOLS: Readonly<Record<SandboxPair, Readonly<SandboxPool>>> = {
  /** 1,500,000 USDC + 500 ETH: 1 ETH = 3000 USDC. */
  "USDC/ETH": { base: "USDC", quote: "ETH", baseReserve: usdc(1_500_000n), quoteReserve: eighteen(500n) },
  /** 2,000,000 USDC + 2,000,000 DAI: 1 DAI = 1 USDC. */
  "USDC/DAI": {
    base: "USDC",
    quote: "DAI",
    baseReserve: usdc(2_000_000n),
    quoteReserve: eighteen(2_000_000n),
  },
  /** 1,000,000 USDC + 2,000,000 ADAO: 1 ADAO = 0.5 USDC. */
  "USDC/ADAO": {
    base: "USDC",
    quote: "ADAO",
    baseReserve: usdc(1_000_000n),
    quoteReserve: eighteen(2_000_000n),
  },
};

/** The sandbox pool holding both tokens, and whether the seller pays the base; null: no liquidity. */
export function sandboxPair(
  sell: ChainToken,
  buy: ChainToken,
): { pair: SandboxPair; sellIsBase: boolean } | null {
  for (const [pair, pool] of Object.entries(SANDBOX_POOLS) as [SandboxPair, SandboxPool][]) {
    if (pool.base === sell && pool.quote === buy) return { pair, sellIsBase: true };
    if (pool.quote === sell && pool.base === buy) return { pair, sellIsBase: false };
  }
  return null;
}

/** A pool's reserves in the direction of a trade. */
export function orientPool(
  reserves: { baseReserve: bigint; quoteReserve: bigint },
  sellIsBase: boolean,
): ConstantProductPool {
  return sellIsBase
    ? { reserveIn: reserves.baseReserve, reserveOut: reserves.quoteReserve }
    : { reserveIn: reserves.quoteReserve, reserveOut: reserves.baseReserve };
}

// Slippage bounds: the least output (exact in) or the most input (exact out) the trader accepts.

function slippageFactor(slippageBps: number): bigint {
  if (!Number.isInteger(slippageBps) || slippageBps < 0 || slippageBps > 10_000) {
    throw new RangeError(`slippageBps must be an integer from 0 to 10000, got ${slippageBps}`);
  }
  return BigInt(slippageBps);
}

/** floor(amountOut × (10000 − bps) / 10000): rounded down, never promising more. */
export function minimumOut(amountOut: bigint, slippageBps: number): bigint {
  const bps = slippageFactor(slippageBps);
  if (amountOut < 0n) throw new RangeError("amountOut must not be negative");
  return (amountOut * (BPS - bps)) / BPS;
}

/** ceil(amountIn × (10000 + bps) / 10000): rounded up, never allowing less than the quote. */
export function maximumIn(amountIn: bigint, slippageBps: number): bigint {
  const bps = slippageFactor(slippageBps);
  if (amountIn < 0n) throw new RangeError("amountIn must not be negative");
  return (amountIn * (BPS + bps) + BPS - 1n) / BPS;
}

// Price impact: the relative move of the spot price, in whole bps rounded half up, capped at
// 10000 (a move past 100% reads as 100%: the number is a warning, not an accounting figure).

function ratioBps(numerator: bigint, denominator: bigint): number {
  const abs = numerator < 0n ? -numerator : numerator;
  const rounded = (2n * abs * BPS + denominator) / (2n * denominator);
  return rounded > BPS ? 10_000 : Number(rounded);
}

/**
 * |after − before| / before of the spot price reserveOut / reserveIn, cross-multiplied so no
 * division happens before the last one. Throws for an empty pool before the trade (no price).
 */
export function poolPriceImpactBps(before: ConstantProductPool, after: ConstantProductPool): number {
  if (!hasLiquidity(before) || after.reserveIn <= 0n || after.reserveOut < 0n) {
    throw new RangeError("price impact needs positive reserves");
  }
  const numerator = after.reserveOut * before.reserveIn - before.reserveOut * after.reserveIn;
  return ratioBps(numerator, after.reserveIn * before.reserveOut);
}

/**
 * Uniswap v3: the price is sqrtPriceX96² (token1 per token0, the 2^192 scale cancels), so the
 * impact is |after² − before²| / before². It is the move of token1/token0: when that price rises
 * (buying token0) it reads higher than the move of the inverse price would.
 */
export function sqrtPriceImpactBps(before: bigint, after: bigint): number {
  if (before <= 0n || after < 0n) throw new RangeError("sqrtPriceX96 must be positive");
  return ratioBps(after * after - before * before, before * before);
}

/**
 * The buy token per 1 sell token, as a decimal string with the buy token's decimals (its smallest
 * unit is the finest step a price in it can mean), truncated, without trailing zeros or exponent:
 * "3000", "0.000333333333333333".
 */
export function executionPrice(
  sellAmount: bigint,
  sellDecimals: number,
  buyAmount: bigint,
  buyDecimals: number,
): string {
  for (const decimals of [sellDecimals, buyDecimals]) {
    if (!Number.isInteger(decimals) || decimals < 0) throw new RangeError("decimals must be a whole number");
  }
  if (sellAmount <= 0n) throw new RangeError("sellAmount must be positive");
  if (buyAmount < 0n) throw new RangeError("buyAmount must not be negative");
  // buy units per 1 whole sell token: buyAmount × 10^sellDecimals / sellAmount.
  const units = (buyAmount * 10n ** BigInt(sellDecimals)) / sellAmount;
  const scale = 10n ** BigInt(buyDecimals);
  const whole = units / scale;
  const fraction =
    buyDecimals > 0 ? (units % scale).toString().padStart(buyDecimals, "0").replace(/0+$/, "") : "";
  return fraction === "" ? whole.toString() : `${whole}.${fraction}`;
}
