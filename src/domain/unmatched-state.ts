// What becomes of a transfer that matched no payment (D13, D19), as one transition table: only
// it decides an unmatched transfer's status, and the repo's compare-and-set takes `from` and `to`
// from it. A transfer is open until the merchant attaches it to a payment (final) or returns it
// to its sender; a return that fails leaves it open again, so nothing a payer sent is stranded. One
// that turns out to be an on-ramp session's delivery is the session's (final). A reorganisation
// that drops its transaction (open, or attached to a payment not confirmed yet) leaves it
// `dropped`: nothing to act on until the transaction is mined again, which opens it again.

export const UNMATCHED_STATUSES = ["open", "attached", "returned", "onramp", "dropped", "kept"] as const;
export type UnmatchedStatus = (typeof UNMATCHED_STATUSES)[number];

export type UnmatchedTrigger =
  /** Attached to a pending or expired payment, which settles what it carried. */
  | "attached"
  /** Its return is recorded (before anything is sent). */
  | "return_recorded"
  /** Its return failed: nothing left the wallet. */
  | "return_failed"
  /**
   * It was an on-ramp session's delivery, named by the provider after the watcher saw it (D17):
   * the session credits it, final.
   */
  | "onramp_delivered"
  /**
   * A reorganisation deeper than the confirmations dropped its transaction after it was attached:
   * the payment waits again, and the transfer waits to be mined again.
   */
  | "attachment_reverted"
  /** A reorganisation dropped its transaction before the network's confirmations were met. */
  | "dropped_by_reorg"
  /** Its dropped transaction is in a block again: the merchant's to act on again. */
  | "mined_again"
  /**
   * The merchant keeps it as the wallet's own money (a top-up of its own, like Coinbase
   * Commerce's "resolve"): final; no longer held from payouts, refunds and swaps.
   */
  | "kept";

interface UnmatchedRule {
  from: UnmatchedStatus;
  to: UnmatchedStatus;
}

export const UNMATCHED_TRANSITIONS = {
  attached: { from: "open", to: "attached" },
  return_recorded: { from: "open", to: "returned" },
  return_failed: { from: "returned", to: "open" },
  onramp_delivered: { from: "open", to: "onramp" },
  attachment_reverted: { from: "attached", to: "dropped" },
  dropped_by_reorg: { from: "open", to: "dropped" },
  mined_again: { from: "dropped", to: "open" },
  kept: { from: "open", to: "kept" },
} as const satisfies Record<UnmatchedTrigger, UnmatchedRule>;

/** Whether the merchant may still act on a transfer in `status` (attach it, or return it). */
export function isActionable(status: UnmatchedStatus): boolean {
  return (
    status === UNMATCHED_TRANSITIONS.attached.from && status === UNMATCHED_TRANSITIONS.return_recorded.from
  );
}
