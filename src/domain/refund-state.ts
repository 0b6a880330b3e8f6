// A refund's lifecycle (D19) as one transition table. A refund is recorded `pending` before its
// money moves and ends `completed` or `failed`; the card provider may still fail a refund it had
// reported succeeded (its refund.updated event), which gives the amount back to the payment. A
// crypto refund moves through the payout operation, whose table (payout-state.ts) it follows:
// `processing` is shown as `pending`.

export const REFUND_STATUSES = ["pending", "completed", "failed"] as const;
export type RefundStatus = (typeof REFUND_STATUSES)[number];

export type RefundTrigger =
  /** Recorded, its amount taken from what the payment has left to refund. */
  | "recorded"
  /** The money is back with the payer (mined, or the provider says succeeded). */
  | "succeeded"
  /** It can never happen, or the provider reports it failed: the amount is given back. */
  | "failed";

interface RefundRule {
  from: readonly RefundStatus[];
  to: RefundStatus;
  event: "refund.completed" | "refund.failed" | null;
}

export const REFUND_TRANSITIONS = {
  recorded: { from: [], to: "pending", event: null },
  succeeded: { from: ["pending"], to: "completed", event: "refund.completed" },
  failed: { from: ["pending", "completed"], to: "failed", event: "refund.failed" },
} as const satisfies Record<RefundTrigger, RefundRule>;

/** The rule of `trigger` from `from`, or undefined when that status does not move by it. */
export function refundTransition(from: RefundStatus, trigger: RefundTrigger): RefundRule | undefined {
  const rule: RefundRule = REFUND_TRANSITIONS[trigger];
  return rule.from.includes(from) ? rule : undefined;
}

/** A refund's status as the API shows it, from the status of the payout-kind transfer that carries it. */
export function refundStatusOfTransfer(status: string): RefundStatus {
  if (status === "completed") return "completed";
  if (status === "failed") return "failed";
  return "pending";
}
