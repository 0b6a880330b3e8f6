import { describe, expect, it } from "vitest";
import type { PaymentStatus } from "./payment-state.ts";
import {
  type AuthorizationPayment,
  settleOutcome,
  staleClaimVerdict,
  X402_SETTLE_STATUSES,
  X402_SETTLE_TRANSITIONS,
} from "./x402-settle-state.ts";

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

// What a stale settle claim's authorization payments say happened to it (the recovery of a settle
// whose instance stopped before answering).

const payment = (id: string, status: PaymentStatus, txHash: string | null = null): AuthorizationPayment => ({
  id,
  status,
  txHash,
});

describe("staleClaimVerdict", () => {
  it("nothing written: settle afresh, with nothing to fail first", () => {
    expect(staleClaimVerdict([])).toEqual({ kind: "nothing", unsent: [] });
  });

  it("a payment waiting for a transaction never recorded: fail it, then settle afresh", () => {
    const unsent = payment("a", "pending");
    expect(staleClaimVerdict([unsent])).toEqual({ kind: "nothing", unsent: [unsent] });
  });

  it("a payment failed unsent by an earlier recovery is no answer: settle afresh", () => {
    expect(staleClaimVerdict([payment("a", "failed")])).toEqual({ kind: "nothing", unsent: [] });
  });

  it("a transaction recorded and its payment still waiting: in progress", () => {
    expect(staleClaimVerdict([payment("a", "pending", "0x1")])).toEqual({ kind: "in_progress" });
  });

  it.each<PaymentStatus>(["detected", "confirmed", "forwarded"])(
    "a payment %s: settled by its transaction",
    (status) => {
      const paid = payment("b", status, "0x2");
      expect(staleClaimVerdict([payment("a", "failed"), paid])).toEqual({ kind: "settled", payment: paid });
    },
  );

  it.each<PaymentStatus>(["failed", "expired"])(
    "a payment %s after its transaction was sent: failed",
    (status) => {
      const ended = payment("a", status, "0x1");
      expect(staleClaimVerdict([ended])).toEqual({ kind: "failed", payment: ended });
    },
  );

  it("a paid payment wins over one in progress or ended", () => {
    const paid = payment("c", "forwarded", "0x3");
    const verdict = staleClaimVerdict([payment("a", "expired", "0x1"), payment("b", "pending", "0x2"), paid]);
    expect(verdict).toEqual({ kind: "settled", payment: paid });
  });
});
