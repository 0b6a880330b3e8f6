import { describe, expect, it } from "vitest";
import { stillToSettle, type UnsettledPayment } from "./unsettled-payments.ts";

describe("stillToSettle", () => {
  const unrecorded: UnsettledPayment = { token: "USDC", gross: 100n, transfers: [] };
  const recorded: UnsettledPayment = {
    token: "USDC",
    gross: 50n,
    transfers: [
      { amount: 49n, nonce: 7, status: "signed" },
      { amount: 1n, nonce: 8, status: "signed" },
    ],
  };

  it("is nothing without unsettled payments, or with payments in another token", () => {
    expect(stillToSettle([], "USDC", 3)).toBe(0n);
    expect(stillToSettle([unrecorded, recorded], "ETH", null)).toBe(0n);
  });

  it("keeps the gross amount of a payment whose settlement is not recorded yet", () => {
    expect(stillToSettle([unrecorded], "USDC", 10)).toBe(100n);
    expect(stillToSettle([unrecorded], "USDC", null)).toBe(100n);
  });

  it("keeps the recorded transfers that are not mined at the balance's block", () => {
    expect(stillToSettle([recorded], "USDC", 7)).toBe(50n);
    expect(stillToSettle([recorded], "USDC", 8)).toBe(1n);
    expect(stillToSettle([recorded], "USDC", 9)).toBe(0n);
    expect(stillToSettle([recorded], "USDC", null)).toBe(50n);
    expect(stillToSettle([unrecorded, recorded], "USDC", 8)).toBe(101n);
  });

  it("lets go of transfers known mined or failed", () => {
    const settled: UnsettledPayment = {
      token: "USDC",
      gross: 50n,
      transfers: [
        { amount: 49n, nonce: 7, status: "mined" },
        { amount: 1n, nonce: 8, status: "failed" },
      ],
    };
    expect(stillToSettle([settled], "USDC", null)).toBe(0n);
    expect(stillToSettle([settled], "USDC", 0)).toBe(0n);
  });
});
