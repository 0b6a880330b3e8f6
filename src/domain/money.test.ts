import { describe, expect, it } from "vitest";
import {
  CHAIN_TOKENS,
  CRYPTO_TOKENS,
  computeFee,
  formatAmount,
  isCryptoToken,
  isWalletCurrency,
  parseAmount,
  parsePositiveAmount,
  splitFee,
  TOKEN_DECIMALS,
  WALLET_CURRENCIES,
} from "./money.ts";

describe("parseAmount", () => {
  it.each([
    ["100", 6, 100_000_000n],
    ["100.5", 6, 100_500_000n],
    ["0.000001", 6, 1n],
    ["1.000000", 6, 1_000_000n],
    ["0", 6, 0n],
    ["007.10", 2, 710n],
    ["1", 18, 10n ** 18n],
    ["0.000000000000000001", 18, 1n],
    ["123456789012345678901234567890.5", 18, 123456789012345678901234567890500000000000000000n],
    ["0.50", 2, 50n],
  ])("parses %s with %i decimals", (input, decimals, expected) => {
    expect(parseAmount(input, decimals)).toBe(expected);
  });

  it.each(["1e3", "0x10", " 1", "1 ", "-1", "+1", "", ".5", "5.", "1,5", "1.2.3", "NaN", "Infinity", "１"])(
    "rejects %j",
    (input) => {
      expect(parseAmount(input, 18)).toBeNull();
    },
  );

  it("rejects non-strings", () => {
    for (const value of [100, 1.5, null, undefined, true, {}, [], 10n]) {
      expect(parseAmount(value, 6)).toBeNull();
    }
  });

  it("rejects more decimals than the token has, for every token", () => {
    for (const [symbol, decimals] of Object.entries(TOKEN_DECIMALS)) {
      const ok = `1.${"1".repeat(decimals)}`;
      const tooMany = `1.${"1".repeat(decimals + 1)}`;
      expect(parseAmount(ok, decimals), symbol).not.toBeNull();
      expect(parseAmount(tooMany, decimals), symbol).toBeNull();
    }
  });
});

describe("parsePositiveAmount", () => {
  it("treats zero as not positive", () => {
    expect(parsePositiveAmount("0", 6)).toBeNull();
    expect(parsePositiveAmount("0.000000", 6)).toBeNull();
    expect(parsePositiveAmount("0.000001", 6)).toBe(1n);
  });
});

describe("formatAmount", () => {
  it.each([
    [100_000_000n, 6, "100.00"],
    [1_500_000n, 6, "1.50"],
    [15n, 6, "0.000015"],
    [0n, 6, "0.00"],
    [1n, 18, "0.000000000000000001"],
    [10n ** 18n, 18, "1.00"],
    [12_345n, 2, "123.45"],
    [50n, 2, "0.50"],
    [123_456_789n, 6, "123.456789"],
    [120_000n, 6, "0.12"],
    [5n, 0, "5.00"],
  ])("formats %s with %i decimals as %s", (units, decimals, expected) => {
    expect(formatAmount(units, decimals)).toBe(expected);
  });

  it("round-trips parse and format for every token", () => {
    for (const decimals of Object.values(TOKEN_DECIMALS)) {
      for (const text of ["1.00", "98.50", "0.01", "123456.78"]) {
        const units = parseAmount(text, decimals);
        expect(units).not.toBeNull();
        expect(formatAmount(units as bigint, decimals)).toBe(text);
      }
    }
  });
});

describe("fee", () => {
  it("takes 1.5% of the gross: 100.00 → fee 1.50, net 98.50", () => {
    const gross = parseAmount("100", 6) as bigint;
    const { fee, net } = splitFee(gross);
    expect(formatAmount(fee, 6)).toBe("1.50");
    expect(formatAmount(net, 6)).toBe("98.50");
  });

  it("is the same for USD (2 decimals)", () => {
    const { fee, net } = splitFee(10_000n);
    expect(fee).toBe(150n);
    expect(net).toBe(9_850n);
  });

  it("rounds half up in smallest units", () => {
    // 1 unit × 1.5% = 0.015 → 0; 33 units → 0.495 → 0; 34 → 0.51 → 1; 100 → 1.5 → 2 (half up)
    expect(computeFee(1n)).toBe(0n);
    expect(computeFee(33n)).toBe(0n);
    expect(computeFee(34n)).toBe(1n);
    expect(computeFee(100n)).toBe(2n);
    expect(computeFee(300n)).toBe(5n); // 4.5 → 5
    expect(computeFee(299n)).toBe(4n); // 4.485 → 4
    expect(computeFee(50n)).toBe(1n); // 0.75 → 1 (USD 0.50 minimum charge)
  });

  it("keeps net + fee equal to gross exactly, also for huge amounts", () => {
    for (const gross of [1n, 7n, 999_999n, 10n ** 30n + 12345n, 2n ** 200n]) {
      const { fee, net } = splitFee(gross);
      expect(fee + net).toBe(gross);
      expect(fee >= 0n && net >= 0n).toBe(true);
    }
  });

  it("refuses negative amounts", () => {
    expect(() => computeFee(-1n)).toThrow(RangeError);
  });
});

describe("token catalogue", () => {
  it("moves every crypto payment token and wallet currency on chain", () => {
    for (const token of [...CRYPTO_TOKENS, ...WALLET_CURRENCIES]) expect(CHAIN_TOKENS).toContain(token);
  });

  it("answers membership by the lists", () => {
    expect(CRYPTO_TOKENS.filter(isCryptoToken)).toEqual(CRYPTO_TOKENS);
    expect(["DAI", "USD", "usdc", 1].filter(isCryptoToken)).toEqual([]);
    expect(WALLET_CURRENCIES.filter(isWalletCurrency)).toEqual(WALLET_CURRENCIES);
    expect(["ADAO", "USD", "eth", null].filter(isWalletCurrency)).toEqual([]);
  });
});
