import { describe, expect, it } from "vitest";
import { stillToSettle, type UnsettledPayment } from "./unsettled-payments.ts";

describe("stillToSettle", () => {
  const unrecorded: UnsettledPayment = { token: "USDC", gross: 100n, settlementRecorded: false };
  const recorded: UnsettledPayment = { token: "USDC", gross: 50n, settlementRecorded: true };

  it("is nothing without unsettled payments, or with payments in another token", () => {
    expect(stillToSettle([], "USDC")).toBe(0n);
    expect(stillToSettle([unrecorded, recorded], "ETH")).toBe(0n);
  });

  it("keeps the gross amount of a payment whose settlement is not recorded yet", () => {
    expect(stillToSettle([unrecorded], "USDC")).toBe(100n);
    expect(stillToSettle([unrecorded, { ...unrecorded, gross: 7n }], "USDC")).toBe(107n);
  });

  it("leaves a recorded settlement to the wallet's recorded transactions", () => {
    expect(stillToSettle([recorded], "USDC")).toBe(0n);
    expect(stillToSettle([unrecorded, recorded], "USDC")).toBe(100n);
  });
});
