import { describe, expect, it } from "vitest";
import { checkFunds } from "./payout-funds.ts";
import { heldInbox, settlingWhole, stillToSettle, type UnsettledPayment } from "./unsettled-payments.ts";

describe("stillToSettle", () => {
  const unrecorded: UnsettledPayment = {
    id: "a",
    token: "USDC",
    gross: 100n,
    splits: 0,
    settlementRecorded: false,
  };
  const recorded: UnsettledPayment = {
    id: "b",
    token: "USDC",
    gross: 50n,
    splits: 0,
    settlementRecorded: true,
  };

  it("is nothing without unsettled payments", () => {
    expect(stillToSettle([])).toEqual(new Map());
  });

  it("keeps the gross amount of each payment whose settlement is not recorded yet, per token", () => {
    expect(
      stillToSettle([unrecorded, { ...unrecorded, gross: 7n }, { ...unrecorded, token: "ETH" }]),
    ).toEqual(
      new Map([
        ["USDC", { amount: 107n, payments: 2, transfers: 4 }],
        ["ETH", { amount: 100n, payments: 1, transfers: 2 }],
      ]),
    );
  });

  it("leaves a recorded settlement to the wallet's recorded transactions", () => {
    expect(stillToSettle([recorded])).toEqual(new Map());
    expect(stillToSettle([unrecorded, recorded])).toEqual(
      new Map([["USDC", { amount: 100n, payments: 1, transfers: 2 }]]),
    );
    expect(settlingWhole([unrecorded, recorded])).toEqual(["a"]);
  });

  it("counts one more transfer per split of a payment's snapshot", () => {
    expect(stillToSettle([{ ...unrecorded, splits: 5 }, unrecorded])).toEqual(
      new Map([["USDC", { amount: 200n, payments: 2, transfers: 9 }]]),
    );
  });
});

describe("heldInbox", () => {
  const settling = stillToSettle([
    { id: "p", token: "USDC", gross: 100n, splits: 0, settlementRecorded: false },
  ]);

  it("adds each open inbox transfer's amount and its return's one transfer to its token", () => {
    expect(
      heldInbox(settling, [
        { id: "a", token: "USDC", amount: 6n },
        { id: "b", token: "ETH", amount: 9n },
        { id: "c", token: "USDC", amount: 1n },
      ]),
    ).toEqual(
      new Map([
        ["USDC", { amount: 107n, payments: 1, transfers: 4 }],
        ["ETH", { amount: 9n, payments: 0, transfers: 1 }],
      ]),
    );
    expect(heldInbox(settling, [])).toEqual(settling);
  });

  it("keeps a payout from spending it: the balance less it is what is available", () => {
    const unsettled = heldInbox(new Map(), [{ id: "a", token: "USDC", amount: 6n }]);
    const check = {
      token: "USDC" as const,
      balances: { USDC: 10n },
      committed: new Map(),
      unsettled,
      gas: null,
    };
    expect(checkFunds({ ...check, amount: 4n })).toEqual({ ok: true });
    expect(checkFunds({ ...check, amount: 5n })).toEqual({ ok: false, short: "balance", available: 4n });
  });
});
