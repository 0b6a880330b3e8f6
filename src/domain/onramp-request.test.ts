import { describe, expect, it } from "vitest";
import {
  ONRAMP_CURRENCIES,
  ONRAMP_MESSAGES,
  type OnrampRequest,
  validateOnrampRequest,
} from "./onramp-request.ts";
import { MAX_AMOUNT_UNITS } from "./validation.ts";

// Validation of POST /api/v1/onramp/session (D17): every message, each amount in its own decimals
// (2 for US dollars, 6 for USDC, 18 for ETH), at most one amount, positive amounts, walletType.

const E6 = 10n ** 6n;
const E18 = 10n ** 18n;

function accepted(body: unknown): OnrampRequest {
  const checked = validateOnrampRequest(body);
  if (!checked.ok) throw new Error(`refused ${JSON.stringify(body)}: ${checked.message}`);
  return checked.value;
}

function refusal(body: unknown): string {
  const checked = validateOnrampRequest(body);
  if (checked.ok) throw new Error(`accepted ${JSON.stringify(body)}`);
  return checked.message;
}

describe("validateOnrampRequest: accepted", () => {
  it("reads a currency alone: no amount (the customer chooses), no wallet (the default)", () => {
    for (const destinationCurrency of ONRAMP_CURRENCIES) {
      expect(accepted({ destinationCurrency })).toEqual({
        destinationCurrency,
        sourceAmountCents: null,
        destinationAmount: null,
        walletType: null,
      });
    }
    expect(ONRAMP_CURRENCIES).toEqual(["USDC", "ETH"]);
  });

  it("reads sourceAmount as cents of US dollars, with at most 2 decimals", () => {
    const cents = (sourceAmount: string) =>
      accepted({ destinationCurrency: "ETH", sourceAmount }).sourceAmountCents;
    expect(cents("100")).toBe(10_000n);
    expect(cents("100.5")).toBe(10_050n);
    expect(cents("0.01")).toBe(1n);
    expect(cents("19.99")).toBe(1_999n);
    expect(cents("007.10")).toBe(710n);
    expect(accepted({ destinationCurrency: "USDC", sourceAmount: "25" })).toEqual({
      destinationCurrency: "USDC",
      sourceAmountCents: 2_500n,
      destinationAmount: null,
      walletType: null,
    });
  });

  it("reads destinationAmount in the crypto's smallest units: 6 decimals for USDC, 18 for ETH", () => {
    const units = (destinationCurrency: string, destinationAmount: string) =>
      accepted({ destinationCurrency, destinationAmount }).destinationAmount;
    expect(units("USDC", "1")).toBe(E6);
    expect(units("USDC", "0.000001")).toBe(1n);
    expect(units("USDC", "12.345678")).toBe(12_345_678n);
    expect(units("ETH", "1")).toBe(E18);
    expect(units("ETH", "0.000000000000000001")).toBe(1n);
    expect(units("ETH", "0.1")).toBe(E18 / 10n);
    expect(accepted({ destinationCurrency: "ETH", destinationAmount: "2" }).sourceAmountCents).toBeNull();
  });

  it("takes null for an amount or walletType as not given", () => {
    expect(
      accepted({ destinationCurrency: "USDC", sourceAmount: null, destinationAmount: "5", walletType: null }),
    ).toEqual({
      destinationCurrency: "USDC",
      sourceAmountCents: null,
      destinationAmount: 5n * E6,
      walletType: null,
    });
    expect(
      accepted({ destinationCurrency: "USDC", sourceAmount: "5", destinationAmount: null }).sourceAmountCents,
    ).toBe(500n);
  });

  it("reads walletType eoa and smart_wallet", () => {
    expect(accepted({ destinationCurrency: "USDC", walletType: "eoa" }).walletType).toBe("eoa");
    expect(accepted({ destinationCurrency: "ETH", walletType: "smart_wallet" }).walletType).toBe(
      "smart_wallet",
    );
  });

  it("accepts up to the retail bound of the crypto: 1,000,000 USDC, 1,000 ETH", () => {
    expect(accepted({ destinationCurrency: "USDC", destinationAmount: "1000000" }).destinationAmount).toBe(
      1_000_000n * E6,
    );
    expect(accepted({ destinationCurrency: "ETH", destinationAmount: "1000" }).destinationAmount).toBe(
      1_000n * E18,
    );
  });
});

describe("validateOnrampRequest: refused, with the message naming the field", () => {
  it("a body that is not a JSON object", () => {
    for (const body of [undefined, null, "USDC", 1, true, [], [{ destinationCurrency: "USDC" }]]) {
      expect(refusal(body)).toBe(ONRAMP_MESSAGES.notAnObject);
    }
    expect(ONRAMP_MESSAGES.notAnObject).toBe("Request body must be a JSON object");
  });

  it("a destinationCurrency missing or other than USDC and ETH", () => {
    for (const destinationCurrency of [
      undefined,
      null,
      "",
      "usdc",
      "eth",
      "USD",
      "DAI",
      "ADAO",
      " USDC",
      1,
      ["USDC"],
    ]) {
      expect(refusal({ destinationCurrency, sourceAmount: "10" })).toBe(ONRAMP_MESSAGES.currency);
    }
    expect(refusal({})).toBe("destinationCurrency is required: USDC or ETH");
  });

  it("both amounts, whatever they are", () => {
    const message = "Give at most one of sourceAmount and destinationAmount";
    expect(ONRAMP_MESSAGES.bothAmounts).toBe(message);
    expect(refusal({ destinationCurrency: "USDC", sourceAmount: "10", destinationAmount: "10" })).toBe(
      message,
    );
    expect(refusal({ destinationCurrency: "ETH", sourceAmount: "0", destinationAmount: "-1" })).toBe(message);
    expect(refusal({ destinationCurrency: "ETH", sourceAmount: "", destinationAmount: "" })).toBe(message);
  });

  it("a sourceAmount that is not a positive amount of US dollars up to 1,000,000.00 with at most 2 decimals", () => {
    const message =
      "sourceAmount must be a positive amount of US dollars, at most 1000000.00, with at most 2 decimals";
    expect(ONRAMP_MESSAGES.sourceAmount).toBe(message);
    const bad = [
      "0",
      "0.00",
      "-1",
      "-0.01",
      "1.001",
      "0.001",
      "",
      " 1",
      "1e2",
      "0x10",
      "1,5",
      ".5",
      "5.",
      "NaN",
    ];
    for (const sourceAmount of [...bad, 10, 0, -5, true, {}, ["1"]]) {
      for (const destinationCurrency of ONRAMP_CURRENCIES) {
        expect(refusal({ destinationCurrency, sourceAmount }), JSON.stringify(sourceAmount)).toBe(message);
      }
    }
    // Beyond what an amount column holds, and past the retail limit by a cent.
    expect(refusal({ destinationCurrency: "USDC", sourceAmount: "9".repeat(79) })).toBe(message);
    expect(refusal({ destinationCurrency: "ETH", sourceAmount: "1000000.01" })).toBe(message);
    expect(accepted({ destinationCurrency: "ETH", sourceAmount: "1000000.00" }).sourceAmountCents).toBe(
      100_000_000n,
    );
  });

  it("a destinationAmount that is not a positive amount of the crypto within its decimals", () => {
    const usdc =
      "destinationAmount must be a positive amount of USDC, at most 1000000, with at most 6 decimals";
    const eth = "destinationAmount must be a positive amount of ETH, at most 1000, with at most 18 decimals";
    expect(ONRAMP_MESSAGES.destinationAmount("USDC")).toBe(usdc);
    expect(ONRAMP_MESSAGES.destinationAmount("ETH")).toBe(eth);
    const bad = ["0", "0.000000", "-1", "", "1e3", " 2", "abc", 1, 0, -1, {}];
    for (const destinationAmount of bad) {
      expect(refusal({ destinationCurrency: "USDC", destinationAmount })).toBe(usdc);
      expect(refusal({ destinationCurrency: "ETH", destinationAmount })).toBe(eth);
    }
    // One decimal too many for each; what one accepts the other may refuse.
    expect(refusal({ destinationCurrency: "USDC", destinationAmount: "0.0000001" })).toBe(usdc);
    expect(refusal({ destinationCurrency: "USDC", destinationAmount: "1.000000000000000001" })).toBe(usdc);
    expect(
      accepted({ destinationCurrency: "ETH", destinationAmount: "1.000000000000000001" }).destinationAmount,
    ).toBe(E18 + 1n);
    expect(refusal({ destinationCurrency: "ETH", destinationAmount: "0.0000000000000000001" })).toBe(eth);
    expect(
      refusal({ destinationCurrency: "USDC", destinationAmount: (MAX_AMOUNT_UNITS + 1n).toString() }),
    ).toBe(usdc);
    expect(refusal({ destinationCurrency: "USDC", destinationAmount: "1000000.000001" })).toBe(usdc);
    expect(refusal({ destinationCurrency: "ETH", destinationAmount: "1000.000000000000000001" })).toBe(eth);
  });

  it("a walletType other than eoa and smart_wallet", () => {
    const message = "Invalid walletType: use eoa or smart_wallet";
    expect(ONRAMP_MESSAGES.walletType).toBe(message);
    for (const walletType of ["", "EOA", "workspace", "smart-wallet", "smartWallet", 0, true, ["eoa"], {}]) {
      expect(refusal({ destinationCurrency: "USDC", sourceAmount: "10", walletType })).toBe(message);
    }
  });

  it("reports the first problem in the rules' order: body, currency, both amounts, each amount, wallet", () => {
    expect(
      refusal({ destinationCurrency: "BTC", sourceAmount: "1", destinationAmount: "1", walletType: "x" }),
    ).toBe(ONRAMP_MESSAGES.currency);
    expect(
      refusal({ destinationCurrency: "USDC", sourceAmount: "x", destinationAmount: "y", walletType: "x" }),
    ).toBe(ONRAMP_MESSAGES.bothAmounts);
    expect(refusal({ destinationCurrency: "USDC", sourceAmount: "x", walletType: "x" })).toBe(
      ONRAMP_MESSAGES.sourceAmount,
    );
    expect(refusal({ destinationCurrency: "ETH", destinationAmount: "0", walletType: "x" })).toBe(
      ONRAMP_MESSAGES.destinationAmount("ETH"),
    );
  });
});
