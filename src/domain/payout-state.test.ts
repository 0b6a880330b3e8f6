import { describe, expect, it } from "vitest";
import {
  failureTrigger,
  guardedByBreaker,
  isFinal,
  OPEN_PAYOUT,
  PAYOUT_STATUSES,
  PAYOUT_TRANSITIONS,
  revertCause,
  spendsItsPayment,
} from "./payout-state.ts";

describe("the payout transition table", () => {
  it("records a payout processing, and ends it from there only, once", () => {
    expect(PAYOUT_TRANSITIONS.recorded).toMatchObject({ from: null, to: "processing" });
    for (const trigger of [
      "transfer_succeeded",
      "transfer_failed",
      "recipient_refused",
      "never_sent",
      "settlement_failed",
    ] as const) {
      expect(PAYOUT_TRANSITIONS[trigger].from).toBe(OPEN_PAYOUT);
      expect(isFinal(PAYOUT_TRANSITIONS[trigger].to)).toBe(true);
    }
    expect(PAYOUT_STATUSES.filter((s) => !isFinal(s))).toEqual(["processing"]);
  });

  it("emits an event and counts for the breaker only where the spec says", () => {
    expect(PAYOUT_TRANSITIONS.transfer_succeeded).toMatchObject({
      event: "payout.completed",
      counted: false,
    });
    expect(PAYOUT_TRANSITIONS.transfer_failed).toMatchObject({ event: "payout.failed", counted: true });
    // A refund's or a return's recipient refusing it: failed with its event, not counted.
    expect(PAYOUT_TRANSITIONS.recipient_refused).toMatchObject({
      to: "failed",
      event: "payout.failed",
      counted: false,
    });
    // A payout whose sender stopped before sending was never attempted: no event, not counted.
    expect(PAYOUT_TRANSITIONS.never_sent).toMatchObject({ to: "failed", event: null, counted: false });
  });
});

describe("which failures the breaker counts", () => {
  it("counts every failure of the workspace's own sending, and a payout's recipient's too", () => {
    for (const kind of ["payout", "refund", "return", "swap"] as const)
      expect(failureTrigger(kind, "sending"), kind).toBe("transfer_failed");
    expect(failureTrigger("payout", "recipient")).toBe("transfer_failed");
  });

  it("does not count a refund's or a return's recipient refusing it", () => {
    expect(failureTrigger("refund", "recipient")).toBe("recipient_refused");
    expect(failureTrigger("return", "recipient")).toBe("recipient_refused");
  });

  it("never counts a settlement's failure, whatever caused it, and announces none", () => {
    expect(failureTrigger("settlement", "sending")).toBe("settlement_failed");
    expect(failureTrigger("settlement", "recipient")).toBe("settlement_failed");
    expect(PAYOUT_TRANSITIONS.settlement_failed).toMatchObject({
      from: "processing",
      to: "failed",
      event: null,
      counted: false,
    });
  });

  it("guards every kind a merchant orders, not a settlement, which alone spends its payment's money", () => {
    for (const kind of ["payout", "refund", "return", "swap"] as const) {
      expect(guardedByBreaker(kind), kind).toBe(true);
      expect(spendsItsPayment(kind), kind).toBe(false);
    }
    expect(guardedByBreaker("settlement")).toBe(false);
    expect(spendsItsPayment("settlement")).toBe(true);
  });

  it("puts a reverted plain ETH transfer on its recipient, anything else on the sending", () => {
    expect(revertCause({ kind: "refund", tokenSymbol: "ETH" })).toBe("recipient");
    expect(revertCause({ kind: "payout", tokenSymbol: "ETH" })).toBe("recipient");
    expect(revertCause({ kind: "refund", tokenSymbol: "USDC" })).toBe("sending");
    expect(revertCause({ kind: "swap", tokenSymbol: "ETH" })).toBe("sending");
  });
});
