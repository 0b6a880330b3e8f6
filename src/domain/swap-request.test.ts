import { describe, expect, it } from "vitest";
import { CHAIN_TOKENS } from "./money.ts";
import {
  DEFAULT_SLIPPAGE_BPS,
  MAX_SLIPPAGE_BPS,
  type QuoteRequest,
  SWAP_MESSAGES,
  validateQuoteRequest,
  validateSwapRequest,
} from "./swap-request.ts";
import { MAX_AMOUNT_UNITS } from "./validation.ts";

// Swap validation (D16): every message, the defaults, and D4's amount rule per token.

const QUOTE_ID = "0b8f5a2e-4c1d-4e8a-9f3b-2a6c7d8e9f01";
const base = { sellToken: "USDC", buyToken: "ETH", sellAmount: "100" };

/** The quote, or the test fails with the refusal. */
function quoteOf(query: Record<string, unknown>): QuoteRequest {
  const checked = validateQuoteRequest(query);
  if (!checked.ok) throw new Error(checked.message);
  return checked.value;
}

/** The refusal's message; fails the test when accepted. */
function quoteRefusal(query: Record<string, unknown>): string {
  const checked = validateQuoteRequest(query);
  if (checked.ok) throw new Error(`accepted ${JSON.stringify(query)}`);
  return checked.message;
}

function swapRefusal(body: unknown): string {
  const checked = validateSwapRequest(body);
  if (checked.ok) throw new Error(`accepted ${JSON.stringify(body)}`);
  return checked.message;
}

describe("validateQuoteRequest: accepted", () => {
  it("reads an exact-input quote with the defaults", () => {
    expect(quoteOf(base)).toEqual({
      sellToken: "USDC",
      buyToken: "ETH",
      side: "exact_in",
      amount: 100_000_000n,
      walletType: null,
      slippageBps: DEFAULT_SLIPPAGE_BPS,
    });
    expect(DEFAULT_SLIPPAGE_BPS).toBe(50);
  });

  it("reads an exact-output quote in the buy token's decimals", () => {
    const quote = quoteOf({ sellToken: "USDC", buyToken: "ETH", buyAmount: "0.5" });
    expect(quote.side).toBe("exact_out");
    expect(quote.amount).toBe(5n * 10n ** 17n);
  });

  it("reads walletType and slippageBps, from 0 to 1000", () => {
    expect(quoteOf({ ...base, walletType: "smart_wallet", slippageBps: "0" })).toMatchObject({
      walletType: "smart_wallet",
      slippageBps: 0,
    });
    expect(quoteOf({ ...base, walletType: "eoa", slippageBps: "1000" })).toMatchObject({
      walletType: "eoa",
      slippageBps: MAX_SLIPPAGE_BPS,
    });
    expect(quoteOf({ ...base, slippageBps: "075" }).slippageBps).toBe(75);
    expect(quoteOf({ ...base, slippageBps: 120 }).slippageBps).toBe(120);
  });

  it("accepts every pair of different chain tokens (liquidity is the quoter's question)", () => {
    for (const sellToken of CHAIN_TOKENS) {
      for (const buyToken of CHAIN_TOKENS) {
        if (sellToken === buyToken) continue;
        expect(quoteOf({ sellToken, buyToken, sellAmount: "1" }).sellToken).toBe(sellToken);
      }
    }
  });

  it("accepts each token's full decimals, leading zeros, and the largest uint256 amount", () => {
    expect(quoteOf({ ...base, sellAmount: "0.000001" }).amount).toBe(1n);
    expect(quoteOf({ ...base, sellToken: "DAI", sellAmount: "0.000000000000000001" }).amount).toBe(1n);
    expect(quoteOf({ ...base, sellAmount: "0001.5" }).amount).toBe(1_500_000n);
    const max = MAX_AMOUNT_UNITS.toString();
    const maxUsdc = `${max.slice(0, -6)}.${max.slice(-6)}`;
    expect(quoteOf({ ...base, sellAmount: maxUsdc }).amount).toBe(MAX_AMOUNT_UNITS);
  });

  it("ignores parameters it does not know", () => {
    expect(quoteOf({ ...base, foo: ["a", "b"] }).amount).toBe(100_000_000n);
  });
});

describe("validateQuoteRequest: refused", () => {
  it("names the missing tokens", () => {
    expect(quoteRefusal({ sellAmount: "1" })).toBe("Missing required fields: sellToken, buyToken");
    expect(quoteRefusal({ sellToken: "USDC", sellAmount: "1" })).toBe("Missing required fields: buyToken");
    expect(quoteRefusal({ sellToken: "", buyToken: "ETH", sellAmount: "1" })).toBe(
      "Missing required fields: sellToken",
    );
  });

  it("refuses unknown tokens, naming the field", () => {
    expect(quoteRefusal({ ...base, sellToken: "BTC" })).toBe("Invalid sellToken: use ETH, USDC, ADAO or DAI");
    expect(quoteRefusal({ ...base, buyToken: "eth" })).toBe("Invalid buyToken: use ETH, USDC, ADAO or DAI");
    expect(quoteRefusal({ ...base, buyToken: "USD" })).toBe(SWAP_MESSAGES.invalidToken("buyToken"));
    for (const token of CHAIN_TOKENS) expect(SWAP_MESSAGES.invalidToken("sellToken")).toContain(token);
  });

  it("refuses selling a token for itself", () => {
    expect(quoteRefusal({ ...base, buyToken: "USDC" })).toBe("sellToken and buyToken must differ");
  });

  it("needs exactly one amount", () => {
    const message = "Give exactly one of sellAmount and buyAmount";
    expect(quoteRefusal({ sellToken: "USDC", buyToken: "ETH" })).toBe(message);
    expect(quoteRefusal({ ...base, buyAmount: "1" })).toBe(message);
    expect(quoteRefusal({ ...base, sellAmount: undefined, buyAmount: null })).toBe(message);
  });

  it("refuses malformed amounts with the token's decimals in the message", () => {
    const usdc = "sellAmount must be a positive number with at most 6 decimals for USDC";
    for (const sellAmount of ["", "0", "0.000000", "-1", "1e3", " 1", "0x10", "1.0000001", "abc"]) {
      expect(quoteRefusal({ ...base, sellAmount }), sellAmount).toBe(usdc);
    }
    expect(quoteRefusal({ sellToken: "USDC", buyToken: "ETH", buyAmount: `0.${"0".repeat(18)}1` })).toBe(
      "buyAmount must be a positive number with at most 18 decimals for ETH",
    );
    expect(quoteRefusal({ sellToken: "ADAO", buyToken: "USDC", buyAmount: "0.0000001" })).toBe(
      "buyAmount must be a positive number with at most 6 decimals for USDC",
    );
  });

  it("refuses an amount beyond uint256", () => {
    const over = (MAX_AMOUNT_UNITS + 1n).toString();
    expect(quoteRefusal({ ...base, sellAmount: `${over.slice(0, -6)}.${over.slice(-6)}` })).toBe(
      SWAP_MESSAGES.invalidAmount("sellAmount", "USDC"),
    );
    expect(quoteRefusal({ ...base, sellAmount: "9".repeat(1024 * 1024) })).toBe(
      SWAP_MESSAGES.invalidAmount("sellAmount", "USDC"),
    );
  });

  it("refuses slippage outside 0–1000 or not a whole number", () => {
    for (const slippageBps of ["1001", "-1", "1.5", "", "abc", "50 ", "00001", 1001, 2.5, -1, true]) {
      expect(quoteRefusal({ ...base, slippageBps }), String(slippageBps)).toBe(
        "slippageBps must be an integer from 0 to 1000",
      );
    }
  });

  it("refuses an unknown walletType", () => {
    for (const walletType of ["", "EOA", "safe", 1]) {
      expect(quoteRefusal({ ...base, walletType }), String(walletType)).toBe(
        "Invalid walletType: use eoa or smart_wallet",
      );
    }
  });

  it("refuses a repeated parameter rather than picking one", () => {
    expect(quoteRefusal({ ...base, sellAmount: ["1", "2"] })).toBe("sellAmount must be given once");
    expect(quoteRefusal({ ...base, buyToken: ["ETH", "DAI"] })).toBe("buyToken must be given once");
    expect(quoteRefusal({ ...base, slippageBps: ["50"] })).toBe(SWAP_MESSAGES.repeated("slippageBps"));
  });

  it("answers the first failing check (D13)", () => {
    expect(quoteRefusal({ sellToken: "BTC", buyToken: "BTC", sellAmount: "x", slippageBps: "x" })).toBe(
      SWAP_MESSAGES.invalidToken("sellToken"),
    );
    expect(quoteRefusal({ ...base, sellAmount: "x", slippageBps: "x", walletType: "x" })).toBe(
      SWAP_MESSAGES.invalidAmount("sellAmount", "USDC"),
    );
    expect(quoteRefusal({ ...base, slippageBps: "x", walletType: "x" })).toBe(SWAP_MESSAGES.invalidSlippage);
  });
});

describe("validateSwapRequest", () => {
  it("accepts a quoteId, with or without an idempotencyKey", () => {
    expect(validateSwapRequest({ quoteId: QUOTE_ID })).toEqual({
      ok: true,
      value: { quoteId: QUOTE_ID, idempotencyKey: null },
    });
    expect(validateSwapRequest({ quoteId: QUOTE_ID, idempotencyKey: "k-1" })).toEqual({
      ok: true,
      value: { quoteId: QUOTE_ID, idempotencyKey: "k-1" },
    });
  });

  it("accepts the quote's parameters with the quote endpoint's rules and defaults", () => {
    const body = { sellToken: "ETH", buyToken: "USDC", buyAmount: "3000", slippageBps: 100 };
    expect(validateSwapRequest({ ...body, idempotencyKey: "x".repeat(255) })).toEqual({
      ok: true,
      value: {
        quote: {
          sellToken: "ETH",
          buyToken: "USDC",
          side: "exact_out",
          amount: 3_000_000_000n,
          walletType: null,
          slippageBps: 100,
        },
        idempotencyKey: "x".repeat(255),
      },
    });
  });

  it("refuses a body that is not an object", () => {
    for (const body of [null, undefined, "x", 1, [], [{ quoteId: QUOTE_ID }]]) {
      expect(swapRefusal(body), String(body)).toBe("Request body must be a JSON object");
    }
  });

  it("refuses a malformed quoteId", () => {
    for (const quoteId of ["abc", "", 42, `${QUOTE_ID}x`, { id: QUOTE_ID }]) {
      expect(swapRefusal({ quoteId }), String(quoteId)).toBe("Invalid quoteId");
    }
  });

  it("refuses both a quoteId and parameters, and neither", () => {
    const both = "Give either quoteId or the quote's parameters, not both";
    expect(swapRefusal({ quoteId: QUOTE_ID, ...base })).toBe(both);
    expect(swapRefusal({ quoteId: QUOTE_ID, slippageBps: 10 })).toBe(both);
    expect(swapRefusal({})).toBe(SWAP_MESSAGES.missingQuote);
    expect(swapRefusal({ quoteId: null, idempotencyKey: "k" })).toBe(SWAP_MESSAGES.missingQuote);
  });

  it("applies the quote rules to parameters in a body", () => {
    expect(swapRefusal({ sellAmount: "1" })).toBe("Missing required fields: sellToken, buyToken");
    expect(swapRefusal({ ...base, buyToken: "USDC" })).toBe(SWAP_MESSAGES.sameToken);
    expect(swapRefusal({ ...base, buyToken: ["ETH"] })).toBe(SWAP_MESSAGES.invalidToken("buyToken"));
    expect(swapRefusal({ ...base, sellAmount: "1.0000001" })).toBe(
      SWAP_MESSAGES.invalidAmount("sellAmount", "USDC"),
    );
    expect(swapRefusal({ ...base, slippageBps: "1001" })).toBe(SWAP_MESSAGES.invalidSlippage);
    expect(swapRefusal({ ...base, walletType: "x" })).toBe(SWAP_MESSAGES.invalidWalletType);
  });

  it("takes amounts as decimal strings only, like every amount (D4)", () => {
    expect(swapRefusal({ ...base, sellAmount: 100 })).toBe(SWAP_MESSAGES.invalidAmount("sellAmount", "USDC"));
  });

  it("refuses an idempotencyKey that is not 1–255 characters", () => {
    for (const idempotencyKey of ["", "x".repeat(256), 5, ["k"]]) {
      expect(swapRefusal({ quoteId: QUOTE_ID, idempotencyKey }), String(idempotencyKey)).toBe(
        "idempotencyKey must be a string of 1 to 255 characters",
      );
    }
  });
});
