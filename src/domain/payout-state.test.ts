import { describe, expect, it } from "vitest";
import { isFinal, OPEN_PAYOUT, PAYOUT_STATUSES, PAYOUT_TRANSITIONS } from "./payout-state.ts";

describe("the payout transition table", () => {
  it("records a payout processing, and ends it from there only, once", () => {
    expect(PAYOUT_TRANSITIONS.recorded).toMatchObject({ from: null, to: "processing" });
    for (const trigger of ["transfer_succeeded", "transfer_failed", "never_sent"] as const) {
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
    // A payout whose sender stopped before sending was never attempted: no event, not counted.
    expect(PAYOUT_TRANSITIONS.never_sent).toMatchObject({ to: "failed", event: null, counted: false });
  });
});
