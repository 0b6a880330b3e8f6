import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  FULFILLED,
  ONRAMP_STATUSES,
  onrampMoves,
  onrampStatusesBefore,
  UNENDED_ONRAMP_STATUSES,
} from "./onramp-state.ts";

describe("on-ramp session lifecycle", () => {
  it("moves forward through the provider's statuses, never back, never out of an ending", () => {
    expect(onrampMoves("initialized", "requires_payment")).toBe(true);
    expect(onrampMoves("initialized", "fulfillment_complete")).toBe(true);
    expect(onrampMoves("requires_payment", "fulfillment_processing")).toBe(true);
    expect(onrampMoves("fulfillment_processing", "fulfillment_complete")).toBe(true);
    expect(onrampMoves("requires_payment", "rejected")).toBe(true);
    expect(onrampMoves("fulfillment_processing", "requires_payment")).toBe(false);
    expect(onrampMoves("fulfillment_complete", "rejected")).toBe(false);
    expect(onrampMoves("rejected", "fulfillment_complete")).toBe(false);
    expect(onrampMoves("requires_payment", "requires_payment")).toBe(false);
  });

  it("applies any sequence of events, in any order, to the status its furthest event names", () => {
    const forward = [
      "initialized",
      "requires_payment",
      "fulfillment_processing",
      "fulfillment_complete",
    ] as const;
    fc.assert(
      fc.property(fc.shuffledSubarray([...forward], { minLength: 1 }), (events) => {
        let status: (typeof ONRAMP_STATUSES)[number] = "initialized";
        for (const event of events) if (onrampMoves(status, event)) status = event;
        const furthest = Math.max(...events.map((e) => forward.indexOf(e)));
        expect(status).toBe(forward[furthest]);
      }),
    );
  });

  it("names the statuses an update may move from, and only a fulfilled session is credited", () => {
    expect(onrampStatusesBefore("fulfillment_complete")).toEqual([
      "initialized",
      "requires_payment",
      "fulfillment_processing",
    ]);
    expect(onrampStatusesBefore("initialized")).toEqual([]);
    expect(FULFILLED).toBe("fulfillment_complete");
    // The statuses a session may still deliver from: every one it may move out of.
    expect(UNENDED_ONRAMP_STATUSES).toEqual(["initialized", "requires_payment", "fulfillment_processing"]);
    expect(UNENDED_ONRAMP_STATUSES).toEqual(ONRAMP_STATUSES.filter((s) => onrampMoves(s, FULFILLED)));
  });
});
