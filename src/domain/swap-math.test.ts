import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CHAIN_TOKENS } from "./money.ts";
import {
  amountInGivenOut,
  amountOutGivenIn,
  type ConstantProductPool,
  executionPrice,
  maximumIn,
  minimumOut,
  orientPool,
  poolPriceImpactBps,
  SANDBOX_FEE_BPS,
  SANDBOX_POOLS,
  sandboxPair,
  sqrtPriceImpactBps,
} from "./swap-math.ts";

// Swap arithmetic (D16): hand-computed examples first, then the invariants a constant-product
// pool must keep whatever the numbers.

const USDC = 10n ** 6n;
const ETH = 10n ** 18n;
const pool = (reserveIn: bigint, reserveOut: bigint): ConstantProductPool => ({ reserveIn, reserveOut });

describe("amountOutGivenIn", () => {
  it("matches hand-computed Uniswap v2 outputs", () => {
    // 100·9970·1000 / (1000·10000 + 100·9970) = 997000000 / 10997000 = 90.66…
    expect(amountOutGivenIn(pool(1000n, 1000n), 100n)).toBe(90n);
    // No fee: 100·100 / (100 + 100) = 50.
    expect(amountOutGivenIn(pool(100n, 100n), 100n, 0)).toBe(50n);
    // 3000 USDC into the sandbox USDC/ETH pool: 2.991e13·5e20 / 1.502991e16 = 0.995015938… ETH.
    const usdcEth = orientPool(SANDBOX_POOLS["USDC/ETH"], true);
    expect(amountOutGivenIn(usdcEth, 3000n * USDC)).toBe(995_015_938_219_190_933n);
    expect(amountOutGivenIn(usdcEth, 3000n * USDC)).toBe(
      (3000n * USDC * 9970n * 500n * ETH) / (1_500_000n * USDC * 10_000n + 3000n * USDC * 9970n),
    );
    // 1 ETH the other way: 2985.047814 USDC (3000 less fee and impact).
    expect(amountOutGivenIn(orientPool(SANDBOX_POOLS["USDC/ETH"], false), ETH)).toBe(2_985_047_814n);
  });

  it("answers 0n for a non-positive input or an empty pool", () => {
    expect(amountOutGivenIn(pool(1000n, 1000n), 0n)).toBe(0n);
    expect(amountOutGivenIn(pool(1000n, 1000n), -5n)).toBe(0n);
    expect(amountOutGivenIn(pool(0n, 1000n), 10n)).toBe(0n);
    expect(amountOutGivenIn(pool(1000n, 0n), 10n)).toBe(0n);
  });

  it("rounds a dust trade down to nothing", () => {
    expect(amountOutGivenIn(pool(1_000_000n, 1_000n), 999n)).toBe(0n);
  });

  it("refuses a fee that is not an integer below 100%", () => {
    for (const fee of [-1, 10_000, 30.5, Number.NaN]) {
      expect(() => amountOutGivenIn(pool(1000n, 1000n), 10n, fee), String(fee)).toThrow(RangeError);
    }
  });
});

describe("amountInGivenOut", () => {
  it("matches hand-computed Uniswap v2 inputs", () => {
    // floor(1000·90·10000 / (910·9970)) + 1 = floor(99.19…) + 1.
    expect(amountInGivenOut(pool(1000n, 1000n), 90n)).toBe(100n);
    // 1 ETH out of the sandbox pool: floor(1.5e12·1e18·1e4 / (499e18·9970)) + 1 USDC units.
    const usdcEth = orientPool(SANDBOX_POOLS["USDC/ETH"], true);
    expect(amountInGivenOut(usdcEth, ETH)).toBe(3_015_057_196n);
  });

  it("adds the extra unit even when the division is exact (as getAmountIn does)", () => {
    // 100·50·10000 / (50·10000) = 100 exactly, + 1.
    expect(amountInGivenOut(pool(100n, 100n), 50n, 0)).toBe(101n);
    // Hence in(out(x)) can be x + 1: 1000 into 997/1000 gives exactly 500, which "costs" 1001.
    expect(amountOutGivenIn(pool(997n, 1000n), 1000n)).toBe(500n);
    expect(amountInGivenOut(pool(997n, 1000n), 500n)).toBe(1001n);
  });

  it("answers null when the output would drain the pool, is not positive, or the pool is empty", () => {
    expect(amountInGivenOut(pool(1000n, 1000n), 1000n)).toBeNull();
    expect(amountInGivenOut(pool(1000n, 1000n), 1001n)).toBeNull();
    expect(amountInGivenOut(pool(1000n, 1000n), 0n)).toBeNull();
    expect(amountInGivenOut(pool(1000n, 1000n), -1n)).toBeNull();
    expect(amountInGivenOut(pool(0n, 1000n), 1n)).toBeNull();
    expect(amountInGivenOut(pool(1000n, 0n), 1n)).toBeNull();
    // The last unit but one: floor(1000·999·10000 / (1·9970)) + 1 = floor(1002006.01…) + 1.
    expect(amountInGivenOut(pool(1000n, 1000n), 999n)).toBe(1_002_007n);
  });
});

describe("constant-product invariants", () => {
  const reserve = fc.bigInt({ min: 1n, max: 10n ** 30n });
  const amount = fc.bigInt({ min: 1n, max: 10n ** 30n });
  const fee = fc.integer({ min: 0, max: 1000 });

  it("never lets k = reserveIn·reserveOut fall, and never pays out the whole reserve", () => {
    fc.assert(
      fc.property(reserve, reserve, amount, fee, (rIn, rOut, x, f) => {
        const out = amountOutGivenIn(pool(rIn, rOut), x, f);
        expect(out).toBeLessThan(rOut);
        expect(out).toBeGreaterThanOrEqual(0n);
        expect((rIn + x) * (rOut - out)).toBeGreaterThanOrEqual(rIn * rOut);
      }),
      { numRuns: 1000 },
    );
  });

  it("keeps k for exact-output trades too", () => {
    fc.assert(
      fc.property(reserve, reserve, amount, fee, (rIn, rOut, y, f) => {
        fc.pre(y < rOut);
        const x = amountInGivenOut(pool(rIn, rOut), y, f);
        expect(x).not.toBeNull();
        expect((rIn + (x ?? 0n)) * (rOut - y)).toBeGreaterThanOrEqual(rIn * rOut);
      }),
      { numRuns: 1000 },
    );
  });

  it("out(in(y)) >= y: the input quoted for an output always buys it", () => {
    fc.assert(
      fc.property(reserve, reserve, amount, fee, (rIn, rOut, y, f) => {
        fc.pre(y < rOut);
        const x = amountInGivenOut(pool(rIn, rOut), y, f) ?? 0n;
        expect(amountOutGivenIn(pool(rIn, rOut), x, f)).toBeGreaterThanOrEqual(y);
      }),
      { numRuns: 1000 },
    );
  });

  it("in(out(x)) <= x + 1, and <= x unless the output's division was exact", () => {
    fc.assert(
      fc.property(reserve, reserve, amount, fee, (rIn, rOut, x, f) => {
        const out = amountOutGivenIn(pool(rIn, rOut), x, f);
        fc.pre(out > 0n);
        const back = amountInGivenOut(pool(rIn, rOut), out, f) ?? 0n;
        const withFee = x * BigInt(10_000 - f);
        const exact = (withFee * rOut) % (rIn * 10_000n + withFee) === 0n;
        expect(back).toBeLessThanOrEqual(exact ? x + 1n : x);
      }),
      { numRuns: 2000 },
    );
  });

  it("is monotonic: more in never gives less out, more out never costs less in", () => {
    fc.assert(
      fc.property(reserve, reserve, amount, amount, fee, (rIn, rOut, a, b, f) => {
        const [low, high] = a <= b ? [a, b] : [b, a];
        const p = pool(rIn, rOut);
        expect(amountOutGivenIn(p, low, f)).toBeLessThanOrEqual(amountOutGivenIn(p, high, f));
        if (high < rOut) {
          expect(amountInGivenOut(p, low, f) ?? 0n).toBeLessThanOrEqual(amountInGivenOut(p, high, f) ?? 0n);
        }
      }),
      { numRuns: 1000 },
    );
  });
});

describe("sandbox pools", () => {
  it("holds the documented reserves", () => {
    expect(SANDBOX_FEE_BPS).toBe(30);
    expect(SANDBOX_POOLS["USDC/ETH"]).toEqual({
      base: "USDC",
      quote: "ETH",
      baseReserve: 1_500_000n * USDC,
      quoteReserve: 500n * ETH,
    });
    expect(SANDBOX_POOLS["USDC/DAI"]).toEqual({
      base: "USDC",
      quote: "DAI",
      baseReserve: 2_000_000n * USDC,
      quoteReserve: 2_000_000n * ETH,
    });
    expect(SANDBOX_POOLS["USDC/ADAO"]).toEqual({
      base: "USDC",
      quote: "ADAO",
      baseReserve: 1_000_000n * USDC,
      quoteReserve: 2_000_000n * ETH,
    });
  });

  it("finds the pool of a pair in either direction", () => {
    expect(sandboxPair("USDC", "ETH")).toEqual({ pair: "USDC/ETH", sellIsBase: true });
    expect(sandboxPair("ETH", "USDC")).toEqual({ pair: "USDC/ETH", sellIsBase: false });
    expect(sandboxPair("DAI", "USDC")).toEqual({ pair: "USDC/DAI", sellIsBase: false });
    expect(sandboxPair("USDC", "ADAO")).toEqual({ pair: "USDC/ADAO", sellIsBase: true });
  });

  it("has no pool (no liquidity) for pairs without USDC or of one token", () => {
    for (const sell of CHAIN_TOKENS) {
      for (const buy of CHAIN_TOKENS) {
        const expectPool = sell !== buy && (sell === "USDC" || buy === "USDC");
        expect(sandboxPair(sell, buy) !== null, `${sell}/${buy}`).toBe(expectPool);
      }
    }
  });

  it("orients reserves by the seller's side", () => {
    const reserves = { baseReserve: 1n, quoteReserve: 2n };
    expect(orientPool(reserves, true)).toEqual({ reserveIn: 1n, reserveOut: 2n });
    expect(orientPool(reserves, false)).toEqual({ reserveIn: 2n, reserveOut: 1n });
  });
});

describe("slippage bounds", () => {
  it("rounds the minimum output down and the maximum input up", () => {
    expect(minimumOut(1000n, 50)).toBe(995n);
    expect(minimumOut(999n, 50)).toBe(994n); // 994.005
    expect(minimumOut(1000n, 0)).toBe(1000n);
    expect(minimumOut(1000n, 10_000)).toBe(0n);
    expect(maximumIn(1000n, 50)).toBe(1005n);
    expect(maximumIn(999n, 50)).toBe(1004n); // 1003.995
    expect(maximumIn(1000n, 0)).toBe(1000n);
    expect(maximumIn(0n, 50)).toBe(0n);
  });

  it("refuses a negative amount or slippage outside 0–10000", () => {
    expect(() => minimumOut(-1n, 50)).toThrow(RangeError);
    expect(() => maximumIn(-1n, 50)).toThrow(RangeError);
    for (const bps of [-1, 10_001, 0.5]) {
      expect(() => minimumOut(1n, bps), String(bps)).toThrow(RangeError);
      expect(() => maximumIn(1n, bps), String(bps)).toThrow(RangeError);
    }
  });

  it("brackets the amount", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 2n ** 256n }), fc.integer({ min: 0, max: 1000 }), (a, bps) => {
        expect(minimumOut(a, bps)).toBeLessThanOrEqual(a);
        expect(maximumIn(a, bps)).toBeGreaterThanOrEqual(a);
      }),
    );
  });
});

describe("poolPriceImpactBps", () => {
  it("measures the spot price move in bps, rounded half up", () => {
    expect(poolPriceImpactBps(pool(100n, 100n), pool(200n, 50n))).toBe(7500); // 1 → 0.25
    expect(poolPriceImpactBps(pool(100n, 100n), pool(100n, 100n))).toBe(0);
    expect(poolPriceImpactBps(pool(1n, 20_000n), pool(1n, 19_999n))).toBe(1); // 0.5 bps
    expect(poolPriceImpactBps(pool(1n, 20_001n), pool(1n, 20_000n))).toBe(0); // 0.49998 bps
    expect(poolPriceImpactBps(pool(100n, 100n), pool(50n, 200n))).toBe(10_000); // +300%, capped
  });

  it("reads about 40 bps for 3000 USDC into the sandbox USDC/ETH pool", () => {
    const before = orientPool(SANDBOX_POOLS["USDC/ETH"], true);
    const out = amountOutGivenIn(before, 3000n * USDC);
    const after = pool(before.reserveIn + 3000n * USDC, before.reserveOut - out);
    expect(poolPriceImpactBps(before, after)).toBe(40); // 39.8
  });

  it("refuses an empty pool", () => {
    expect(() => poolPriceImpactBps(pool(0n, 1n), pool(1n, 1n))).toThrow(RangeError);
    expect(() => poolPriceImpactBps(pool(1n, 1n), pool(0n, 1n))).toThrow(RangeError);
  });
});

describe("sqrtPriceImpactBps", () => {
  const Q96 = 2n ** 96n;

  it("squares the sqrt prices", () => {
    expect(sqrtPriceImpactBps(100n, 99n)).toBe(199); // 0.99² = 0.9801
    expect(sqrtPriceImpactBps(1000n, 1001n)).toBe(20); // 20.01
    expect(sqrtPriceImpactBps(200n, 199n)).toBe(100); // 99.75
    expect(sqrtPriceImpactBps(Q96, (Q96 * 99n) / 100n)).toBe(199);
    expect(sqrtPriceImpactBps(Q96, Q96)).toBe(0);
    expect(sqrtPriceImpactBps(Q96, 0n)).toBe(10_000);
    expect(sqrtPriceImpactBps(Q96, 2n * Q96)).toBe(10_000); // ×4, capped
  });

  it("agrees with the pool formula when reserves are perfect squares", () => {
    const root = fc.bigInt({ min: 1n, max: 10n ** 20n });
    fc.assert(
      fc.property(root, root, (b, a) => {
        expect(sqrtPriceImpactBps(b, a)).toBe(poolPriceImpactBps(pool(1n, b * b), pool(1n, a * a)));
      }),
    );
  });

  it("refuses a zero or negative price before", () => {
    expect(() => sqrtPriceImpactBps(0n, 1n)).toThrow(RangeError);
    expect(() => sqrtPriceImpactBps(1n, -1n)).toThrow(RangeError);
  });
});

describe("executionPrice", () => {
  it("gives buy per 1 sell with the buy token's decimals, truncated, without trailing zeros", () => {
    expect(executionPrice(ETH, 18, 3000n * USDC, 6)).toBe("3000");
    expect(executionPrice(USDC, 6, 333_333_333_333_333n, 18)).toBe("0.000333333333333333");
    expect(executionPrice(3000n * USDC, 6, ETH, 18)).toBe("0.000333333333333333"); // 1/3000, truncated
    expect(executionPrice(ETH, 18, 2_985_047_814n, 6)).toBe("2985.047814");
    expect(executionPrice(2n * ETH, 18, 3n * USDC, 6)).toBe("1.5");
    expect(executionPrice(ETH, 18, 0n, 6)).toBe("0");
    expect(executionPrice(1n, 18, 1n, 6)).toBe("1000000000000"); // 1 wei → 0.000001 USDC
    expect(executionPrice(7n, 0, 10n, 0)).toBe("1"); // 1.43 with no decimals
  });

  it("refuses a non-positive sell amount, a negative buy amount or bad decimals", () => {
    expect(() => executionPrice(0n, 18, 1n, 6)).toThrow(RangeError);
    expect(() => executionPrice(1n, 18, -1n, 6)).toThrow(RangeError);
    expect(() => executionPrice(1n, -1, 1n, 6)).toThrow(RangeError);
    expect(() => executionPrice(1n, 18, 1n, 1.5)).toThrow(RangeError);
  });

  it("never exceeds the true ratio by a unit of the buy token", () => {
    const amount = fc.bigInt({ min: 1n, max: 10n ** 40n });
    fc.assert(
      fc.property(amount, amount, (sell, buy) => {
        const [whole, fraction = ""] = executionPrice(sell, 18, buy, 6).split(".");
        const units = BigInt(`${whole}${fraction.padEnd(6, "0")}`);
        // units / 1e6 <= buy·1e18 / (sell·1e6) < (units + 1) / 1e6
        expect(units * sell).toBeLessThanOrEqual(buy * ETH);
        expect((units + 1n) * sell).toBeGreaterThan(buy * ETH);
      }),
    );
  });
});
