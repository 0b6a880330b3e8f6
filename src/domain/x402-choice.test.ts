import type { PaymentRequirements } from "@x402/core/types";
import { describe, expect, it } from "vitest";
import { InvalidRequest } from "./errors.ts";
import { chooseRequirement, type PayableNetwork, parsePaymentRequired } from "./x402-choice.ts";

const USDC_A = "0xE948B10A290BF5Ee274cF0B50d1387fb7049B9f3";
const DAI_A = "0xe33f954364B743E50C658761694ee7Eb58247693";
const USDC_B = "0x29840E9CeDf837FBEEE1cCF1b8F42A64Ce49080A";
const PAYEE = "0x2222222222222222222222222222222222222222";

const NETWORKS: PayableNetwork[] = [
  {
    id: "sandbox-a",
    caip2: "eip155:73570001",
    tokens: [
      { symbol: "ETH", address: null },
      { symbol: "USDC", address: USDC_A },
      { symbol: "DAI", address: DAI_A },
    ],
  },
  { id: "sandbox-b", caip2: "eip155:73570002", tokens: [{ symbol: "USDC", address: USDC_B }] },
];

const requirement = (fields: Partial<PaymentRequirements> = {}): PaymentRequirements => ({
  scheme: "exact",
  network: "eip155:73570001",
  asset: USDC_A,
  amount: "1500000",
  payTo: PAYEE,
  maxTimeoutSeconds: 60,
  extra: { name: "USDC", version: "2" },
  ...fields,
});

const required = (...accepts: PaymentRequirements[]) => ({
  x402Version: 2,
  resource: { url: "https://api.example.com/data" },
  accepts,
});

/** A PaymentRequired whose one requirement has `field` set to `value`. */
const malformed = (field: string, value: unknown) => ({
  ...required(),
  accepts: [{ ...requirement(), [field]: value }],
});

function refusal(run: () => unknown): InvalidRequest {
  try {
    run();
  } catch (err) {
    if (err instanceof InvalidRequest) return err;
    throw err;
  }
  throw new Error("expected a refusal");
}

describe("parsePaymentRequired", () => {
  it("accepts an x402 v2 PaymentRequired, keeping what each requirement carries", () => {
    const parsed = parsePaymentRequired({
      ...required(requirement({ extra: { name: "USDC", version: "2", note: "x" } })),
      error: "PAYMENT-SIGNATURE header is required",
      extensions: { "payment-identifier": { info: { required: false } } },
    });
    expect(parsed.x402Version).toBe(2);
    expect(parsed.accepts[0]?.extra).toEqual({ name: "USDC", version: "2", note: "x" });
    expect(parsed.extensions).toEqual({ "payment-identifier": { info: { required: false } } });
    expect(parsed).not.toHaveProperty("error");
  });

  it.each([
    ["text", /^paymentRequired must be an x402 PaymentRequired object/],
    [{ ...required(requirement()), x402Version: 1 }, /^paymentRequired\.x402Version must be 2/],
    [{ x402Version: 2, resource: { url: "https://a.example" }, accepts: [] }, /^paymentRequired\.accepts/],
    [{ x402Version: 2, accepts: [requirement()] }, /^paymentRequired\.resource is invalid/],
    [malformed("amount", 5), /^paymentRequired\.accepts\[0\]\.amount is invalid/],
    [malformed("network", "base"), /^paymentRequired\.accepts\[0\]\.network is invalid/],
  ])("refuses %j naming paymentRequired", (value, message) => {
    expect(() => parsePaymentRequired(value)).toThrow(message);
  });
});

describe("chooseRequirement", () => {
  const choose = (...accepts: PaymentRequirements[]) =>
    chooseRequirement(parsePaymentRequired(required(...accepts)), NETWORKS, ["USDC", "ETH"]);

  it("takes the first exact requirement on an environment network in a token the wallet holds", () => {
    const chosen = choose(
      requirement({ scheme: "upto" }),
      requirement({ network: "eip155:8453" }),
      requirement({ asset: DAI_A }),
      requirement({ network: "eip155:73570002", asset: USDC_B.toLowerCase(), amount: "7" }),
      requirement(),
    );
    expect(chosen).toMatchObject({
      network: "sandbox-b",
      caip2: "eip155:73570002",
      currency: "USDC",
      amount: 7n,
      payTo: PAYEE,
    });
    expect(chosen.requirement.asset).toBe(USDC_B.toLowerCase());
  });

  it("refuses with 400 and each requirement's reason when none fits", () => {
    const err = refusal(() =>
      choose(
        requirement({ scheme: "upto" }),
        requirement({ network: "eip155:8453" }),
        requirement({ asset: DAI_A }),
        requirement({ asset: USDC_B }),
        requirement({ extra: { name: "USDC", version: "2", assetTransferMethod: "permit2" } }),
        requirement({ extra: { name: "USDC", version: "2", paymentFlow: "escrow" } }),
        requirement({ extra: {} }),
        requirement({ amount: "1.5" }),
        requirement({ amount: "0" }),
        requirement({ payTo: "0x1234" }),
        requirement({ maxTimeoutSeconds: 1.5 }),
        requirement({ maxTimeoutSeconds: 86_401 }),
      ),
    );
    expect(err.message).toMatch(/^paymentRequired\.accepts has no requirement this wallet can pay/);
    expect(err.message).toContain("eip155:73570001, eip155:73570002");
    const reasons = (err.details.rejected as Array<{ index: number; reason: string }>).map((r) => r.reason);
    expect(reasons).toEqual([
      "scheme upto is not supported (only exact)",
      "network eip155:8453 is not a network of this environment",
      "the wallet does not hold DAI",
      `asset ${USDC_B} is not a token of sandbox-a`,
      "assetTransferMethod permit2 is not supported (only eip3009)",
      "paymentFlow escrow is not supported (only authorization)",
      "extra.name and extra.version (the token's EIP-712 domain) are required",
      "amount must be an integer of the token's smallest unit",
      "amount must be above zero and fit a uint256",
      "payTo must be an address (0x and 40 hex digits, not the zero address)",
      "maxTimeoutSeconds must be a whole number of seconds from 1 to 86400",
      "maxTimeoutSeconds must be a whole number of seconds from 1 to 86400",
    ]);
  });
});
