// A facilitator settle's claim (D23, x402_settlements) as one transition table, like the other
// aggregates': only this table decides which status follows which, and the repo's compare-and-set
// takes `from` and `to` from here. A settle is claimed `settling` before anything is sent (its
// authorization and its payment-identifier are then held), and ends `settled` when the scheme
// answered success, or `failed` when it answered failure or threw. A failed one frees its
// authorization (the unique index leaves failed rows out), so a new settle may claim it again.

export const X402_SETTLE_STATUSES = ["settling", "settled", "failed"] as const;
export type X402SettleStatus = (typeof X402_SETTLE_STATUSES)[number];

export type X402SettleTrigger =
  /** Claimed: the authorization and the identifier are held from now on. */
  | "claimed"
  /** The scheme's settle answered success (a transaction, or nothing to move for an upto of 0). */
  | "succeeded"
  /** The scheme answered failure, or threw: nothing is answered as settled. */
  | "failed";

interface X402SettleRule {
  from: X402SettleStatus | null;
  to: X402SettleStatus;
}

export const X402_SETTLE_TRANSITIONS = {
  claimed: { from: null, to: "settling" },
  succeeded: { from: "settling", to: "settled" },
  failed: { from: "settling", to: "failed" },
} as const satisfies Record<X402SettleTrigger, X402SettleRule>;

/** How a claimed settle ends: the triggers out of `settling`. */
export type X402SettleEnd = Exclude<X402SettleTrigger, "claimed">;

/** The trigger of a settle's answer. */
export const settleOutcome = (success: boolean): X402SettleEnd => (success ? "succeeded" : "failed");
