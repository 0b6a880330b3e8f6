import { describe, expect, it } from "vitest";
import { CLAIM_TRANSITIONS, firstClaim, onrampMayCredit, TRANSFER_CLAIMS } from "./transfer-claim.ts";

describe("what an incoming transfer counts as", () => {
  it("is claimed first as a session's when one names it, a payment's when paired, else the inbox's", () => {
    expect(firstClaim({ named: true, paired: false })).toBe("onramp");
    expect(firstClaim({ named: true, paired: true })).toBe("onramp");
    expect(firstClaim({ named: false, paired: true })).toBe("payment");
    expect(firstClaim({ named: false, paired: false })).toBe("inbox");
  });

  it("moves only between the three meanings, never out of an on-ramp delivery", () => {
    for (const rule of Object.values(CLAIM_TRANSITIONS)) {
      expect(TRANSFER_CLAIMS).toContain(rule.from);
      expect(TRANSFER_CLAIMS).toContain(rule.to);
      expect(rule.from).not.toBe("onramp");
    }
  });

  it("is credited to an on-ramp session only when unclaimed, already the session's, or an open inbox item", () => {
    expect(onrampMayCredit(undefined, false)).toBe(true);
    expect(onrampMayCredit("onramp", false)).toBe(true);
    expect(onrampMayCredit("inbox", true)).toBe(true);
    // Attached (the claim is then the payment's) or returned (the item is no longer open).
    expect(onrampMayCredit("inbox", false)).toBe(false);
    expect(onrampMayCredit("payment", false)).toBe(false);
    expect(onrampMayCredit("payment", true)).toBe(false);
  });
});
