import { describe, expect, it } from "vitest";
import { isActionable, UNMATCHED_STATUSES, UNMATCHED_TRANSITIONS } from "./unmatched-state.ts";

describe("unmatched transfer transitions", () => {
  it("only an open transfer may be attached or returned", () => {
    expect(UNMATCHED_STATUSES.filter(isActionable)).toEqual(["open"]);
  });

  it("a reorganisation drops an open or attached transfer; mined again, it is open", () => {
    expect(UNMATCHED_TRANSITIONS.dropped_by_reorg).toEqual({ from: "open", to: "dropped" });
    expect(UNMATCHED_TRANSITIONS.attachment_reverted).toEqual({ from: "attached", to: "dropped" });
    expect(UNMATCHED_TRANSITIONS.mined_again).toEqual({ from: "dropped", to: "open" });
  });

  it("returned and onramp are left only by a failed return; nothing moves a transfer into a status the table does not list", () => {
    const rules: ReadonlyArray<{ from: string; to: string }> = Object.values(UNMATCHED_TRANSITIONS);
    expect(rules.filter((r) => r.from === "returned")).toEqual([{ from: "returned", to: "open" }]);
    expect(rules.filter((r) => r.from === "onramp")).toEqual([]);
    for (const r of rules) {
      expect(UNMATCHED_STATUSES as readonly string[]).toContain(r.from);
      expect(UNMATCHED_STATUSES as readonly string[]).toContain(r.to);
    }
  });
});
