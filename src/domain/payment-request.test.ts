import { describe, expect, it } from "vitest";
import {
  CARD_MAXIMUM_CENTS,
  CARD_MINIMUM_CENTS,
  DEFAULT_EXPIRY_MINUTES,
  MAX_EXPIRY_MINUTES,
  MESSAGES,
  type PaymentRequest,
  type SettlementFallback,
  validatePaymentRequest,
} from "./payment-request.ts";

const WALLET = "0x1111111111111111111111111111111111111111";
const WORKSPACE_ADDRESS = "0x2222222222222222222222222222222222222222";
const ACCOUNT_ADDRESS = "0x3333333333333333333333333333333333333333";

const NO_FALLBACK: SettlementFallback = { workspaceSettlementAddress: null, accountSettlementAddress: null };
const BOTH_FALLBACKS: SettlementFallback = {
  workspaceSettlementAddress: WORKSPACE_ADDRESS,
  accountSettlementAddress: ACCOUNT_ADDRESS,
};

const crypto = (extra: Record<string, unknown> = {}) => ({
  tokenSymbol: "USDC",
  amount: "100",
  merchantWallet: WALLET,
  ...extra,
});

const card = (extra: Record<string, unknown> = {}) => ({
  paymentMethod: "card",
  tokenSymbol: "USD",
  amount: "10.00",
  ...extra,
});

function accept(body: unknown, fallback: SettlementFallback = NO_FALLBACK): PaymentRequest {
  const result = validatePaymentRequest(body, fallback);
  if (!result.ok) throw new Error(`expected the request to be accepted, got: ${result.message}`);
  return result.value;
}

function reject(body: unknown, fallback: SettlementFallback = NO_FALLBACK): string {
  const result = validatePaymentRequest(body, fallback);
  if (result.ok)
    throw new Error(
      `expected the request to be rejected, got: ${JSON.stringify(result.value, (_, v) => (typeof v === "bigint" ? `${v}n` : v))}`,
    );
  return result.message;
}

describe("MESSAGES", () => {
  it("uses the interface's part 7 messages word for word", () => {
    expect(MESSAGES.required).toBe("tokenSymbol, amount, and merchantWallet are required");
    expect(MESSAGES.invalidToken).toBe("Invalid token symbol");
    expect(MESSAGES.invalidAmount).toBe("Amount must be a positive number");
    expect(MESSAGES.invalidMerchantWallet).toBe("Invalid merchant wallet address");
    expect(MESSAGES.noSettlementAddress).toBe(
      "No merchantWallet provided and no settlement address configured",
    );
  });

  it("keeps the service's own messages stable", () => {
    expect(MESSAGES.cardMinimum).toBe("Amount must be at least 0.50 USD for card payments");
    expect(MESSAGES.invalidPaymentMethod).toBe("Invalid paymentMethod: use crypto or card");
    expect(MESSAGES.invalidWalletType).toBe("Invalid walletType: use eoa or smart_wallet");
    expect(MESSAGES.invalidExpiry).toBe("expiresInMinutes must be a whole number from 1 to 10080 (7 days)");
    expect(MESSAGES.notAnObject).toBe("Request body must be a JSON object");
  });

  it("exports the decided constants", () => {
    expect(CARD_MINIMUM_CENTS).toBe(50n);
    expect(DEFAULT_EXPIRY_MINUTES).toBe(60);
    expect(MAX_EXPIRY_MINUTES).toBe(10080);
  });
});

describe("body shape", () => {
  it.each([
    ["null", null],
    ["undefined", undefined],
    ["an array", [crypto()]],
    ["an empty array", []],
    ["a string", JSON.stringify(crypto())],
    ["a number", 42],
    ["a boolean", true],
  ])("rejects %s", (_label, body) => {
    expect(reject(body)).toBe(MESSAGES.notAnObject);
  });

  it("rejects an empty object as missing required fields", () => {
    expect(reject({})).toBe(MESSAGES.required);
  });
});

describe("a valid crypto payment", () => {
  it("returns the normalised request with defaults", () => {
    expect(accept(crypto())).toEqual({
      paymentMethod: "crypto",
      tokenSymbol: "USDC",
      gross: 100_000_000n,
      fee: 1_500_000n,
      net: 98_500_000n,
      merchantWallet: WALLET,
      walletType: null,
      expiresInMinutes: 60,
      returnUrl: null,
      cancelUrl: null,
      description: null,
      metadata: {},
    });
  });

  it("defaults paymentMethod to crypto when absent or null", () => {
    expect(accept(crypto()).paymentMethod).toBe("crypto");
    expect(accept(crypto({ paymentMethod: null })).paymentMethod).toBe("crypto");
    expect(accept(crypto({ paymentMethod: "crypto" })).paymentMethod).toBe("crypto");
  });

  it.each([
    ["USDC", "1.5", 1_500_000n],
    ["ETH", "0.000000000000000001", 1n],
    ["ETH", "2", 2n * 10n ** 18n],
    ["ADAO", "1.123456789012345678", 1_123_456_789_012_345_678n],
  ])("accepts %s %s", (tokenSymbol, amount, gross) => {
    const value = accept(crypto({ tokenSymbol, amount }));
    expect(value.tokenSymbol).toBe(tokenSymbol);
    expect(value.gross).toBe(gross);
    expect(value.fee + value.net).toBe(gross);
  });

  it("accepts an uppercase or mixed-case merchantWallet", () => {
    const upper = "0xABCDEF0123456789ABCDEF0123456789ABCDEF01";
    const mixed = "0xAbCdEf0123456789aBcDeF0123456789AbCdEf01";
    expect(accept(crypto({ merchantWallet: upper })).merchantWallet).toBe(upper);
    expect(accept(crypto({ merchantWallet: mixed })).merchantWallet).toBe(mixed);
  });
});

describe("fee and net (D4)", () => {
  it("takes 1.5% of 100 USDC: fee 1.5 USDC, net 98.5 USDC", () => {
    const value = accept(crypto({ amount: "100" }));
    expect(value.gross).toBe(100_000_000n);
    expect(value.fee).toBe(1_500_000n);
    expect(value.net).toBe(98_500_000n);
  });

  it("computes the card fee in cents: 100.00 USD → 1.50 fee, 98.50 net", () => {
    const value = accept(card({ amount: "100.00" }));
    expect(value.gross).toBe(10_000n);
    expect(value.fee).toBe(150n);
    expect(value.net).toBe(9_850n);
  });

  it("rounds the fee half up in the smallest unit", () => {
    // 0.50 USD: 50 × 150 / 10000 = 0.75 cent → 1 cent.
    const value = accept(card({ amount: "0.50" }));
    expect(value.fee).toBe(1n);
    expect(value.net).toBe(49n);
    // 1 unit of USDC: 0.015 → 0; 34 units: 0.51 → 1.
    expect(accept(crypto({ amount: "0.000001" })).fee).toBe(0n);
    expect(accept(crypto({ amount: "0.000034" })).fee).toBe(1n);
  });

  it("keeps net + fee = gross for 18-decimal tokens", () => {
    const value = accept(crypto({ tokenSymbol: "ETH", amount: "123.456789012345678" }));
    expect(value.fee + value.net).toBe(value.gross);
    expect(value.fee).toBe((value.gross * 150n + 5000n) / 10000n);
  });
});

describe("required fields", () => {
  it.each([
    ["tokenSymbol absent", { amount: "1", merchantWallet: WALLET }],
    ["amount absent", { tokenSymbol: "USDC", merchantWallet: WALLET }],
    ["both absent", { merchantWallet: WALLET }],
    ["tokenSymbol null", crypto({ tokenSymbol: null })],
    ["amount null", crypto({ amount: null })],
    ["tokenSymbol undefined", crypto({ tokenSymbol: undefined })],
    ["card without tokenSymbol", { paymentMethod: "card", amount: "1.00" }],
    ["card without amount", { paymentMethod: "card", tokenSymbol: "USD" }],
  ])("answers the required message when %s", (_label, body) => {
    expect(reject(body, BOTH_FALLBACKS)).toBe(MESSAGES.required);
  });
});

describe("paymentMethod", () => {
  it.each(["CARD", "Crypto", "bank", "", 1, true, {}])("rejects %j", (paymentMethod) => {
    expect(reject(crypto({ paymentMethod }))).toBe(MESSAGES.invalidPaymentMethod);
  });
});

describe("token symbol", () => {
  it.each(["USDC", "ETH", "ADAO"])("crypto accepts %s", (tokenSymbol) => {
    expect(accept(crypto({ tokenSymbol, amount: "1" })).tokenSymbol).toBe(tokenSymbol);
  });

  it.each(["USD", "DAI", "usdc", "Usdc", "eth", "adao", "BTC", " USDC", "USDC ", 1, true, {}, ["USDC"]])(
    "crypto rejects %j",
    (tokenSymbol) => {
      expect(reject(crypto({ tokenSymbol }))).toBe(MESSAGES.invalidToken);
    },
  );

  it("card accepts USD", () => {
    expect(accept(card()).tokenSymbol).toBe("USD");
  });

  it.each(["USDC", "ETH", "ADAO", "DAI", "usd", "Usd", "EUR", " USD", 1])(
    "card rejects %j",
    (tokenSymbol) => {
      expect(reject(card({ tokenSymbol }))).toBe(MESSAGES.invalidToken);
    },
  );
});

describe("amount", () => {
  it.each([
    ["a JSON number", 100],
    ["a JSON float", 1.5],
    ["a JSON zero", 0],
    ["an exponent", "1e2"],
    ["an uppercase exponent", "1E2"],
    ["hex", "0x10"],
    ["a minus sign", "-1"],
    ["a plus sign", "+1"],
    ["a leading space", " 1"],
    ["a trailing space", "1 "],
    ["an inner space", "1 000"],
    ["only spaces", "   "],
    ["a comma", "1,5"],
    ["two dots", "1.2.3"],
    ["no integer part", ".5"],
    ["no fraction digits", "5."],
    ["NaN", "NaN"],
    ["Infinity", "Infinity"],
    ["a currency sign", "$10"],
    ["an underscore", "1_000"],
    ["seven decimals for USDC", "1.0000001"],
    ["zero", "0"],
    ["zero with decimals", "0.000000"],
    ["a boolean", true],
    ["an object", {}],
    ["an array", ["1"]],
  ])("rejects %s", (_label, amount) => {
    expect(reject(crypto({ amount }))).toBe(MESSAGES.invalidAmount);
  });

  it("rejects an empty string as a malformed amount (D13)", () => {
    expect(reject(crypto({ amount: "" }))).toBe(MESSAGES.invalidAmount);
  });

  it("accepts six decimals for USDC and rejects a seventh", () => {
    expect(accept(crypto({ amount: "1.000001" })).gross).toBe(1_000_001n);
    expect(reject(crypto({ amount: "1.0000010" }))).toBe(MESSAGES.invalidAmount);
  });

  it("accepts 18 decimals for ETH and ADAO and rejects a 19th", () => {
    for (const tokenSymbol of ["ETH", "ADAO"]) {
      expect(accept(crypto({ tokenSymbol, amount: `0.${"0".repeat(17)}1` })).gross).toBe(1n);
      expect(reject(crypto({ tokenSymbol, amount: `0.${"0".repeat(18)}1` }))).toBe(MESSAGES.invalidAmount);
    }
  });

  it("accepts two decimals for USD and rejects a third", () => {
    expect(accept(card({ amount: "1.25" })).gross).toBe(125n);
    expect(reject(card({ amount: "1.255" }))).toBe(MESSAGES.invalidAmount);
    expect(reject(card({ amount: "1.250" }))).toBe(MESSAGES.invalidAmount);
  });

  it("rejects zero for card too", () => {
    expect(reject(card({ amount: "0" }))).toBe(MESSAGES.invalidAmount);
    expect(reject(card({ amount: "0.00" }))).toBe(MESSAGES.invalidAmount);
  });

  it("accepts a very large amount exactly, without floating point", () => {
    const value = accept(
      crypto({ tokenSymbol: "ETH", amount: "123456789012345678901234567890.123456789012345678" }),
    );
    expect(value.gross).toBe(123456789012345678901234567890123456789012345678n);
  });
});

describe("card minimum (0.50 USD)", () => {
  it("rejects 0.49 and 0.01", () => {
    expect(reject(card({ amount: "0.49" }))).toBe(MESSAGES.cardMinimum);
    expect(reject(card({ amount: "0.01" }))).toBe(MESSAGES.cardMinimum);
  });

  it("accepts 0.50, 0.5 and 0.51", () => {
    expect(accept(card({ amount: "0.50" })).gross).toBe(50n);
    expect(accept(card({ amount: "0.5" })).gross).toBe(50n);
    expect(accept(card({ amount: "0.51" })).gross).toBe(51n);
  });

  it("does not apply to crypto payments", () => {
    expect(accept(crypto({ amount: "0.01" })).gross).toBe(10_000n);
  });
});

describe("amount beyond a uint256 (issue 20)", () => {
  const UINT256_MAX = 2n ** 256n - 1n;
  const asEth = (wei: bigint) => `${wei / 10n ** 18n}.${(wei % 10n ** 18n).toString().padStart(18, "0")}`;

  it("accepts the largest amount a token transfer carries and refuses one unit more", () => {
    expect(accept(crypto({ tokenSymbol: "ETH", amount: asEth(UINT256_MAX) })).gross).toBe(UINT256_MAX);
    expect(reject(crypto({ tokenSymbol: "ETH", amount: asEth(UINT256_MAX + 1n) }))).toBe(
      MESSAGES.invalidAmount,
    );
  });

  it("refuses amounts of 79 digits and more with the malformed-amount message (D13)", () => {
    expect(reject(crypto({ amount: "9".repeat(79) }))).toBe(MESSAGES.invalidAmount);
    expect(reject(crypto({ tokenSymbol: "ETH", amount: "9".repeat(61) }))).toBe(MESSAGES.invalidAmount);
    expect(reject(crypto({ amount: "1".repeat(200_000) }))).toBe(MESSAGES.invalidAmount);
  });
});

describe("card maximum (999999.99 USD, the provider's)", () => {
  it("accepts 999999.99 and refuses a cent more", () => {
    expect(CARD_MAXIMUM_CENTS).toBe(99_999_999n);
    expect(accept(card({ amount: "999999.99" })).gross).toBe(99_999_999n);
    expect(reject(card({ amount: "1000000.00" }))).toBe(MESSAGES.cardMaximum);
    expect(reject(card({ amount: "9".repeat(40) }))).toBe(MESSAGES.cardMaximum);
    expect(MESSAGES.cardMaximum).toBe("Amount must be at most 999999.99 USD for card payments");
  });

  it("does not apply to crypto payments", () => {
    expect(accept(crypto({ amount: "1000000.00" })).gross).toBe(1_000_000_000_000n);
  });
});

describe("merchantWallet", () => {
  it.each([
    ["too short", "0x123"],
    ["41 hex chars", `${WALLET}1`],
    ["no 0x prefix", "1111111111111111111111111111111111111111"],
    ["uppercase 0X", "0X1111111111111111111111111111111111111111"],
    ["non-hex", "0x111111111111111111111111111111111111111g"],
    ["trailing space", `${WALLET} `],
    ["an empty string", ""],
    ["a number", 123],
    ["an ENS name", "merchant.eth"],
  ])("rejects %s", (_label, merchantWallet) => {
    expect(reject(crypto({ merchantWallet }), BOTH_FALLBACKS)).toBe(MESSAGES.invalidMerchantWallet);
  });

  it("rejects an invalid merchantWallet on card payments too", () => {
    expect(reject(card({ merchantWallet: "0x123" }), BOTH_FALLBACKS)).toBe(MESSAGES.invalidMerchantWallet);
  });

  it("keeps a valid card merchantWallet", () => {
    expect(accept(card({ merchantWallet: WALLET }), BOTH_FALLBACKS).merchantWallet).toBe(WALLET);
  });
});

describe("settlement fallback", () => {
  it("prefers the request's merchantWallet over both settlement addresses", () => {
    expect(accept(crypto(), BOTH_FALLBACKS).merchantWallet).toBe(WALLET);
  });

  it("uses the workspace settlement address when merchantWallet is absent", () => {
    const body = { tokenSymbol: "USDC", amount: "1" };
    expect(accept(body, BOTH_FALLBACKS).merchantWallet).toBe(WORKSPACE_ADDRESS);
  });

  it("treats a null merchantWallet as absent", () => {
    expect(accept(crypto({ merchantWallet: null }), BOTH_FALLBACKS).merchantWallet).toBe(WORKSPACE_ADDRESS);
  });

  it("falls back to the account settlement address when the workspace has none", () => {
    const body = { tokenSymbol: "USDC", amount: "1" };
    const fallback = { workspaceSettlementAddress: null, accountSettlementAddress: ACCOUNT_ADDRESS };
    expect(accept(body, fallback).merchantWallet).toBe(ACCOUNT_ADDRESS);
  });

  it("rejects a crypto payment with no wallet anywhere", () => {
    expect(reject({ tokenSymbol: "USDC", amount: "1" }, NO_FALLBACK)).toBe(MESSAGES.noSettlementAddress);
    expect(reject(crypto({ merchantWallet: null }), NO_FALLBACK)).toBe(MESSAGES.noSettlementAddress);
  });

  it("accepts a card payment with no wallet anywhere, merchantWallet null (D13)", () => {
    const value = accept(card(), NO_FALLBACK);
    expect(value.merchantWallet).toBeNull();
    expect(value.paymentMethod).toBe("card");
  });

  it("applies the same fallback order to card payments", () => {
    expect(accept(card(), BOTH_FALLBACKS).merchantWallet).toBe(WORKSPACE_ADDRESS);
    expect(
      accept(card(), { workspaceSettlementAddress: null, accountSettlementAddress: ACCOUNT_ADDRESS })
        .merchantWallet,
    ).toBe(ACCOUNT_ADDRESS);
  });
});

describe("order of checks (part 7 table, D13)", () => {
  it("required beats an invalid token symbol", () => {
    expect(reject({ tokenSymbol: "usdc", merchantWallet: WALLET })).toBe(MESSAGES.required);
  });

  it("required beats an invalid amount and an invalid wallet", () => {
    expect(reject({ amount: "-1", merchantWallet: "nope" })).toBe(MESSAGES.required);
  });

  it("token beats an invalid amount", () => {
    expect(reject(crypto({ tokenSymbol: "BTC", amount: "abc" }))).toBe(MESSAGES.invalidToken);
  });

  it("token beats an invalid merchant wallet and everything after it", () => {
    const body = crypto({
      tokenSymbol: "usdc",
      merchantWallet: "nope",
      walletType: "bad",
      expiresInMinutes: 0,
      description: "d".repeat(1001),
      returnUrl: "javascript:alert(1)",
    });
    expect(reject(body)).toBe(MESSAGES.invalidToken);
  });

  it("amount beats an invalid merchant wallet", () => {
    expect(reject(crypto({ amount: "1e3", merchantWallet: "nope" }))).toBe(MESSAGES.invalidAmount);
  });

  it("amount beats the missing settlement address", () => {
    expect(reject({ tokenSymbol: "USDC", amount: "0" }, NO_FALLBACK)).toBe(MESSAGES.invalidAmount);
  });

  it("merchant wallet beats later field checks", () => {
    const body = crypto({
      merchantWallet: "nope",
      walletType: "bad",
      expiresInMinutes: 0,
      description: "d".repeat(1001),
      metadata: [],
      returnUrl: "javascript:alert(1)",
      cancelUrl: "data:,x",
    });
    expect(reject(body)).toBe(MESSAGES.invalidMerchantWallet);
  });

  it("merchant wallet beats the card minimum", () => {
    expect(reject(card({ amount: "0.10", merchantWallet: "nope" }))).toBe(MESSAGES.invalidMerchantWallet);
  });

  it("an invalid card amount format beats the card minimum", () => {
    expect(reject(card({ amount: "0.001" }))).toBe(MESSAGES.invalidAmount);
  });

  it("the missing settlement address is the last check", () => {
    const base = { tokenSymbol: "USDC", amount: "1" };
    expect(reject({ ...base, walletType: "bad" })).toBe(MESSAGES.invalidWalletType);
    expect(reject({ ...base, expiresInMinutes: 0 })).toBe(MESSAGES.invalidExpiry);
    expect(reject({ ...base, description: "d".repeat(1001) })).toBe(
      "description must be a string of at most 1000 characters",
    );
    expect(reject({ ...base, metadata: [] })).toBe("metadata must be an object");
    expect(reject({ ...base, returnUrl: "javascript:alert(1)" })).toBe(
      "returnUrl must be an http(s) URL of at most 2048 characters",
    );
    expect(reject({ ...base, cancelUrl: "data:,x" })).toBe(
      "cancelUrl must be an http(s) URL of at most 2048 characters",
    );
    expect(reject(base)).toBe(MESSAGES.noSettlementAddress);
  });
});

describe("walletType", () => {
  it("defaults to null (the workspace default applies) when absent or null", () => {
    expect(accept(crypto()).walletType).toBeNull();
    expect(accept(crypto({ walletType: null })).walletType).toBeNull();
  });

  it.each(["eoa", "smart_wallet"])("accepts %s", (walletType) => {
    expect(accept(crypto({ walletType })).walletType).toBe(walletType);
    expect(accept(card({ walletType })).walletType).toBe(walletType);
  });

  it.each(["EOA", "smart-wallet", "smartWallet", "workspace", "", 1, true])("rejects %j", (walletType) => {
    expect(reject(crypto({ walletType }))).toBe(MESSAGES.invalidWalletType);
  });
});

describe("expiresInMinutes", () => {
  it("defaults to 60 when absent or null", () => {
    expect(accept(crypto()).expiresInMinutes).toBe(60);
    expect(accept(crypto({ expiresInMinutes: null })).expiresInMinutes).toBe(60);
  });

  it.each([1, 60, 1440, 10080])("accepts %i", (expiresInMinutes) => {
    expect(accept(crypto({ expiresInMinutes })).expiresInMinutes).toBe(expiresInMinutes);
  });

  it("accepts 5.0, which JSON cannot tell apart from 5", () => {
    expect(accept(crypto({ expiresInMinutes: 5.0 })).expiresInMinutes).toBe(5);
  });

  it.each([
    ["zero", 0],
    ["negative", -5],
    ["10081", 10081],
    ["a fraction", 1.5],
    ["a string", "60"],
    ["an empty string", ""],
    ["NaN", Number.NaN],
    ["Infinity", Number.POSITIVE_INFINITY],
    ["a boolean", true],
    ["an object", {}],
  ])("rejects %s", (_label, expiresInMinutes) => {
    expect(reject(crypto({ expiresInMinutes }))).toBe(MESSAGES.invalidExpiry);
  });
});

describe("description", () => {
  const message = "description must be a string of at most 1000 characters";

  it("defaults to null when absent or null", () => {
    expect(accept(crypto()).description).toBeNull();
    expect(accept(crypto({ description: null })).description).toBeNull();
  });

  it("keeps a description of up to 1000 characters", () => {
    expect(accept(crypto({ description: "Order #1234" })).description).toBe("Order #1234");
    expect(accept(crypto({ description: "d".repeat(1000) })).description).toHaveLength(1000);
  });

  it("rejects 1001 characters, naming the field", () => {
    expect(reject(crypto({ description: "d".repeat(1001) }))).toBe(message);
  });

  it("rejects a non-string description", () => {
    expect(reject(crypto({ description: 42 }))).toBe(message);
    expect(reject(crypto({ description: { text: "x" } }))).toBe(message);
  });
});

describe("metadata", () => {
  const keys = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`key${i}`, "v"]));

  it("defaults to an empty object when absent or null", () => {
    expect(accept(crypto()).metadata).toEqual({});
    expect(accept(crypto({ metadata: null })).metadata).toEqual({});
  });

  it("keeps string key-value pairs", () => {
    expect(accept(crypto({ metadata: { orderId: "1234", customer: "c_1" } })).metadata).toEqual({
      orderId: "1234",
      customer: "c_1",
    });
  });

  it("accepts 50 keys and rejects 51", () => {
    expect(Object.keys(accept(crypto({ metadata: keys(50) })).metadata)).toHaveLength(50);
    expect(reject(crypto({ metadata: keys(51) }))).toBe("metadata can have at most 50 keys");
  });

  it("accepts a 40-character key and rejects 41", () => {
    expect(accept(crypto({ metadata: { ["k".repeat(40)]: "v" } })).metadata).toEqual({
      ["k".repeat(40)]: "v",
    });
    expect(reject(crypto({ metadata: { ["k".repeat(41)]: "v" } }))).toBe(
      `metadata keys must be 1 to 40 characters (key "${"k".repeat(40)}…")`,
    );
  });

  it("accepts a 500-character value and rejects 501, naming the key", () => {
    expect(accept(crypto({ metadata: { note: "x".repeat(500) } })).metadata.note).toHaveLength(500);
    expect(reject(crypto({ metadata: { note: "x".repeat(501) } }))).toBe(
      "metadata.note must be a string of at most 500 characters",
    );
  });

  it.each([
    ["a number", 5],
    ["null", null],
    ["an array", ["a"]],
    ["an object", { nested: "x" }],
    ["a boolean", false],
  ])("rejects %s as a value", (_label, value) => {
    expect(reject(crypto({ metadata: { item: value } }))).toBe(
      "metadata.item must be a string of at most 500 characters",
    );
  });

  it.each([
    ["an array", ["a", "b"]],
    ["an empty array", []],
    ["a string", "orderId=1"],
    ["a number", 1],
    ["a boolean", true],
  ])("rejects %s as metadata", (_label, metadata) => {
    expect(reject(crypto({ metadata }))).toBe("metadata must be an object");
  });
});

describe("returnUrl and its aliases", () => {
  const urlMessage = (field: string) => `${field} must be an http(s) URL of at most 2048 characters`;

  it("defaults to null", () => {
    expect(accept(crypto()).returnUrl).toBeNull();
    expect(accept(crypto({ returnUrl: null })).returnUrl).toBeNull();
  });

  it.each(["returnUrl", "successUrl", "merchantReturnUrl"])("reads the top-level %s", (name) => {
    expect(accept(crypto({ [name]: "https://shop.example/thanks" })).returnUrl).toBe(
      "https://shop.example/thanks",
    );
  });

  it.each(["returnUrl", "successUrl", "merchantReturnUrl"])("reads %s inside metadata", (name) => {
    const value = accept(crypto({ metadata: { [name]: "https://shop.example/m" } }));
    expect(value.returnUrl).toBe("https://shop.example/m");
    expect(value.metadata).toEqual({ [name]: "https://shop.example/m" });
  });

  it("accepts http as well as https", () => {
    expect(accept(crypto({ returnUrl: "http://localhost:3000/done" })).returnUrl).toBe(
      "http://localhost:3000/done",
    );
  });

  it("prefers top-level returnUrl over successUrl and merchantReturnUrl", () => {
    const body = crypto({
      merchantReturnUrl: "https://example.com/merchant",
      successUrl: "https://example.com/success",
      returnUrl: "https://example.com/return",
    });
    expect(accept(body).returnUrl).toBe("https://example.com/return");
  });

  it("prefers successUrl over merchantReturnUrl", () => {
    const body = crypto({
      merchantReturnUrl: "https://example.com/merchant",
      successUrl: "https://example.com/success",
    });
    expect(accept(body).returnUrl).toBe("https://example.com/success");
  });

  it("prefers any top-level alias over the metadata keys", () => {
    const body = crypto({
      merchantReturnUrl: "https://example.com/top-merchant",
      metadata: { returnUrl: "https://example.com/meta-return" },
    });
    expect(accept(body).returnUrl).toBe("https://example.com/top-merchant");
  });

  it("orders the metadata keys returnUrl, successUrl, merchantReturnUrl", () => {
    const all = accept(
      crypto({
        metadata: {
          merchantReturnUrl: "https://example.com/m-merchant",
          successUrl: "https://example.com/m-success",
          returnUrl: "https://example.com/m-return",
        },
      }),
    );
    expect(all.returnUrl).toBe("https://example.com/m-return");
    const two = accept(
      crypto({
        metadata: {
          merchantReturnUrl: "https://example.com/m-merchant",
          successUrl: "https://example.com/m-success",
        },
      }),
    );
    expect(two.returnUrl).toBe("https://example.com/m-success");
  });

  it.each(["returnUrl", "successUrl", "merchantReturnUrl"])(
    "rejects javascript: and data: in top-level %s, naming the field",
    (name) => {
      expect(reject(crypto({ [name]: "javascript:alert(1)" }))).toBe(urlMessage(name));
      expect(reject(crypto({ [name]: "data:text/html,<script>alert(1)</script>" }))).toBe(urlMessage(name));
    },
  );

  it.each(["returnUrl", "successUrl", "merchantReturnUrl"])(
    "rejects javascript: and data: in metadata.%s, naming the field",
    (name) => {
      expect(reject(crypto({ metadata: { [name]: "javascript:alert(1)" } }))).toBe(
        urlMessage(`metadata.${name}`),
      );
      expect(reject(crypto({ metadata: { [name]: "data:,hello" } }))).toBe(urlMessage(`metadata.${name}`));
    },
  );

  it.each([
    ["a relative path", "/thanks"],
    ["ftp", "ftp://example.com"],
    ["an empty string", ""],
    ["a number", 1],
    ["an object", { href: "https://example.com" }],
  ])("rejects %s as returnUrl", (_label, returnUrl) => {
    expect(reject(crypto({ returnUrl }))).toBe(urlMessage("returnUrl"));
  });

  it("rejects a returnUrl over 2048 characters", () => {
    const long = `https://example.com/${"a".repeat(2048)}`;
    expect(reject(crypto({ returnUrl: long }))).toBe(urlMessage("returnUrl"));
  });

  it("still rejects a dangerous lower-precedence alias when a valid returnUrl is present", () => {
    const body = crypto({ returnUrl: "https://example.com/ok", successUrl: "javascript:alert(1)" });
    expect(reject(body)).toBe(urlMessage("successUrl"));
  });

  it("checks the top-level aliases before the metadata keys", () => {
    const body = crypto({ successUrl: "data:,x", metadata: { returnUrl: "javascript:alert(1)" } });
    expect(reject(body)).toBe(urlMessage("successUrl"));
  });

  it("is used for card payments too", () => {
    expect(accept(card({ successUrl: "https://example.com/card-ok" })).returnUrl).toBe(
      "https://example.com/card-ok",
    );
  });
});

describe("cancelUrl", () => {
  const message = "cancelUrl must be an http(s) URL of at most 2048 characters";

  it("defaults to null", () => {
    expect(accept(card()).cancelUrl).toBeNull();
    expect(accept(card({ cancelUrl: null })).cancelUrl).toBeNull();
  });

  it("keeps an http(s) cancelUrl", () => {
    expect(accept(card({ cancelUrl: "https://example.com/cancel" })).cancelUrl).toBe(
      "https://example.com/cancel",
    );
    expect(accept(crypto({ cancelUrl: "http://example.com/cancel" })).cancelUrl).toBe(
      "http://example.com/cancel",
    );
  });

  it.each(["javascript:alert(1)", "data:text/html,x", "/cancel", ""])("rejects %j", (cancelUrl) => {
    expect(reject(card({ cancelUrl }))).toBe(message);
  });

  it("is not an alias of returnUrl", () => {
    const value = accept(card({ cancelUrl: "https://example.com/cancel" }));
    expect(value.returnUrl).toBeNull();
  });

  it("is checked after the return URLs", () => {
    expect(reject(card({ returnUrl: "javascript:x", cancelUrl: "javascript:y" }))).toBe(
      "returnUrl must be an http(s) URL of at most 2048 characters",
    );
  });
});

describe("a full card request", () => {
  it("returns every field", () => {
    const value = accept(
      card({
        amount: "25.00",
        merchantWallet: WALLET,
        walletType: "smart_wallet",
        expiresInMinutes: 30,
        returnUrl: "https://example.com/ok",
        cancelUrl: "https://example.com/cancel",
        description: "T-shirt",
        metadata: { sku: "TS-1" },
      }),
      BOTH_FALLBACKS,
    );
    expect(value).toEqual({
      paymentMethod: "card",
      tokenSymbol: "USD",
      gross: 2_500n,
      fee: 38n,
      net: 2_462n,
      merchantWallet: WALLET,
      walletType: "smart_wallet",
      expiresInMinutes: 30,
      returnUrl: "https://example.com/ok",
      cancelUrl: "https://example.com/cancel",
      description: "T-shirt",
      metadata: { sku: "TS-1" },
    });
  });
});
