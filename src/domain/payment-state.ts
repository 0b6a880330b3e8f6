// The payment lifecycle (interface part 3, decisions D5) as one transition table. Only this
// table decides which status follows which; services ask it and never compare statuses
// themselves. docs/payment-lifecycle.md draws the same table.

export const PAYMENT_STATUSES = [
  "pending",
  "detected",
  "confirmed",
  "forwarded",
  "failed",
  "expired",
  "cancelled",
] as const;
export type PaymentStatus = (typeof PAYMENT_STATUSES)[number];

export type PaymentEventType =
  | "payment.created"
  | "payment.detected"
  | "payment.confirmed"
  | "payment.forwarded"
  | "payment.failed"
  | "payment.expired"
  | "payment.cancelled";

export type PaymentTrigger =
  | "transfer_detected"
  | "detection_reverted"
  | "confirmations_met"
  | "settlement_completed"
  | "settlement_failed"
  | "sandbox_completed"
  | "card_checkout_completed"
  | "card_async_payment_succeeded"
  | "card_async_payment_failed"
  | "card_checkout_expired"
  | "expiry_elapsed"
  | "cancel_requested"
  | "unmatched_attached"
  | "x402_settlement_failed";

interface TransitionRule {
  from: readonly PaymentStatus[];
  to: PaymentStatus;
  event: PaymentEventType | null;
}

export const TRANSITIONS: Readonly<Record<PaymentTrigger, TransitionRule>> = {
  transfer_detected: { from: ["pending"], to: "detected", event: "payment.detected" },
  // A reorg removed the transfer before it was confirmed: wait for funds again (no event kind exists).
  detection_reverted: { from: ["detected"], to: "pending", event: null },
  confirmations_met: { from: ["detected"], to: "confirmed", event: "payment.confirmed" },
  settlement_completed: { from: ["confirmed"], to: "forwarded", event: "payment.forwarded" },
  settlement_failed: { from: ["confirmed"], to: "failed", event: "payment.failed" },
  sandbox_completed: { from: ["pending"], to: "forwarded", event: "payment.forwarded" },
  // Card: the checkout completed paid, or a delayed payment it completed unpaid arrived later.
  card_checkout_completed: { from: ["pending"], to: "forwarded", event: "payment.forwarded" },
  card_async_payment_succeeded: { from: ["pending"], to: "forwarded", event: "payment.forwarded" },
  // The delayed payment failed: the checkout is over, so nothing can pay this payment any more.
  card_async_payment_failed: { from: ["pending"], to: "failed", event: "payment.failed" },
  card_checkout_expired: { from: ["pending"], to: "expired", event: "payment.expired" },
  expiry_elapsed: { from: ["pending"], to: "expired", event: "payment.expired" },
  cancel_requested: { from: ["pending"], to: "cancelled", event: "payment.cancelled" },
  // The merchant attaches a transfer that matched nothing (an underpayment, a late payment: D19);
  // the payment then goes on like one the watcher matched, confirmed and settled as usual.
  unmatched_attached: { from: ["pending", "expired"], to: "detected", event: "payment.detected" },
  // The facilitator's transaction for an x402 payment reverted, or could not be sent (D23): no
  // transfer will ever pay it.
  x402_settlement_failed: { from: ["pending"], to: "failed", event: "payment.failed" },
};

export const FINAL_STATUSES: readonly PaymentStatus[] = ["forwarded", "failed", "expired", "cancelled"];

/**
 * Received and not settled yet: the payment's money is on its receiving wallet and belongs to
 * its settlement, not to the wallet's payouts (domain/unsettled-payments.ts).
 */
export const UNSETTLED_STATUSES: readonly PaymentStatus[] = ["detected", "confirmed"];

/**
 * No trigger of the payer, the chain or the provider moves a payment out of a final status; the
 * merchant may attach a transfer to an expired payment (unmatched_attached, D19).
 */
export function isFinal(status: PaymentStatus): boolean {
  return FINAL_STATUSES.includes(status);
}

export type TransitionResult =
  | { ok: true; from: PaymentStatus; to: PaymentStatus; event: PaymentEventType | null }
  | { ok: false; from: PaymentStatus; trigger: PaymentTrigger };

export function transition(from: PaymentStatus, trigger: PaymentTrigger): TransitionResult {
  const rule = TRANSITIONS[trigger];
  if (!rule.from.includes(from)) return { ok: false, from, trigger };
  return { ok: true, from, to: rule.to, event: rule.event };
}

/** Paid and settled: what `verify` answers true for (D5), and what the dashboard counts as volume. */
export const SETTLED_STATUS: PaymentStatus = "forwarded";

/** Only a settled payment is refunded (D19): its money reached the merchant and the fee. */
export function isRefundable(status: PaymentStatus): boolean {
  return status === SETTLED_STATUS;
}

/** `verify` answers true only for a fully settled payment (D5). */
export function isVerified(status: PaymentStatus): boolean {
  return status === SETTLED_STATUS;
}
