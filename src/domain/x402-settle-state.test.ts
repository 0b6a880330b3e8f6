import { describe, expect, it } from "vitest";
import { settleOutcome, X402_SETTLE_STATUSES, X402_SETTLE_TRANSITIONS } from "./x402-settle-state.ts";

describe("x402 settle claim transitions", () => {
  it("a claim starts settling and ends once, settled or failed; nothing leaves an ended one", () => {
    const rules: ReadonlyArray<{ from: string | null; to: string }> = Object.values(X402_SETTLE_TRANSITIONS);
    expect(rules.filter((r) => r.from === null)).toEqual([{ from: null, to: "settling" }]);
    expect(rules.filter((r) => r.from === "settling").map((r) => r.to)).toEqual(["settled", "failed"]);
    expect(rules.filter((r) => r.from === "settled" || r.from === "failed")).toEqual([]);
    for (const r of rules) expect(X402_SETTLE_STATUSES as readonly string[]).toContain(r.to);
  });

  it("a settle's answer names its trigger", () => {
    expect(settleOutcome(true)).toBe("succeeded");
    expect(settleOutcome(false)).toBe("failed");
  });
});
