// The payout lifecycle as one transition table, like payments' (payment-state.ts): only this
// table decides which status follows which, and the repos' compare-and-set statements take their
// `from` and `to` from it. A payout is recorded `processing` before anything is sent and ends
// once: `completed` when its transfer is mined with success, `failed` when it can never happen.

/**
 * What a transfer out of a workspace wallet is (the payouts table's `kind`, migration 022): a
 * payout, a refund of a payment, the return of an unmatched transfer, a swap (migration 023), or
 * a payment's settlement (migration 030).
 * All follow this table.
 */
export const TRANSFER_KINDS = ["payout", "refund", "return", "swap", "settlement"] as const;
export type TransferKindName = (typeof TRANSFER_KINDS)[number];

export const PAYOUT_STATUSES = ["processing", "completed", "failed"] as const;
export type PayoutStatus = (typeof PAYOUT_STATUSES)[number];

export type PayoutTrigger =
  /** Recorded, its funds reserved, before anything is signed or sent. */
  | "recorded"
  /** Its transfer is mined with a success receipt. */
  | "transfer_succeeded"
  /** Its transfer reverted, or another mined transaction took its nonce: counted by the breaker. */
  | "transfer_failed"
  /**
   * A refund's or a return's recipient refused it (its code reverted or ran out of the capped
   * gas, or the node's estimate says it would): failed with its event, not counted.
   */
  | "recipient_refused"
  /** Its sender stopped before sending anything: failed uncounted and without an event. */
  | "never_sent"
  /**
   * A settlement failed (however it failed): the circuit breaker guards what a merchant asks to
   * send, not the money a payment brought in, which leaves on its own schedule.
   */
  | "settlement_failed";

interface PayoutRule {
  from: PayoutStatus | null;
  to: PayoutStatus;
  event: "payout.completed" | "payout.failed" | null;
  /** Whether the circuit breaker counts it as a failure. */
  counted: boolean;
}

export const PAYOUT_TRANSITIONS = {
  recorded: { from: null, to: "processing", event: null, counted: false },
  transfer_succeeded: { from: "processing", to: "completed", event: "payout.completed", counted: false },
  transfer_failed: { from: "processing", to: "failed", event: "payout.failed", counted: true },
  recipient_refused: { from: "processing", to: "failed", event: "payout.failed", counted: false },
  never_sent: { from: "processing", to: "failed", event: null, counted: false },
  settlement_failed: { from: "processing", to: "failed", event: null, counted: false },
} as const satisfies Record<PayoutTrigger, PayoutRule>;

/** The status of a payout that may still move (recorded, not ended): every ending starts here. */
export const OPEN_PAYOUT: PayoutStatus = PAYOUT_TRANSITIONS.recorded.to;

/** The status of a payout that was paid, and of one that never will be. */
export const COMPLETED_PAYOUT: PayoutStatus = PAYOUT_TRANSITIONS.transfer_succeeded.to;
export const FAILED_PAYOUT: PayoutStatus = PAYOUT_TRANSITIONS.transfer_failed.to;

/** Whether a payout in `status` has ended (its answer is final). */
export function isFinal(status: PayoutStatus): boolean {
  return status !== OPEN_PAYOUT;
}

/**
 * Whether the circuit breaker guards transfers of `kind` (what a merchant asks to send): a paused
 * workspace refuses them. A settlement is not guarded: the money a payment brought in leaves on
 * its own schedule, and its failures are not counted (failureTrigger).
 */
export function guardedByBreaker(kind: TransferKindName): boolean {
  return kind !== "settlement";
}

/**
 * A transfer of `kind` spends what its payment received (a settlement): its legs are recorded
 * under the payment, that payment's held money is what it may spend (domain/unsettled-payments),
 * and nobody waits on it (a rail may trade latency for certainty).
 */
export function spendsItsPayment(kind: TransferKindName): boolean {
  return kind === "settlement";
}

/**
 * Where a transfer failed: in the wallet's own sending, or in its recipient's code (rails/rail.ts);
 * `unsent`, in its own sending before its rail recorded anything (nothing can have left the wallet,
 * so its orderer may order it again: kinds.ts releasesUnsent).
 */
export type FailureCause = "sending" | "recipient" | "unsent";

/**
 * The trigger of a failed transfer. The breaker stops a workspace whose own sending keeps failing;
 * a refund or a return goes where the payer (or the transfer's sender) points it, so a recipient
 * that refuses it is theirs, not the workspace's, and three such would otherwise pause every
 * payout. A payout's recipient is the merchant's own choice: its revert counts, as D13 says
 * ("chain error, revert, dropped transaction").
 */
export function failureTrigger(
  kind: TransferKindName,
  cause: FailureCause,
): "transfer_failed" | "recipient_refused" | "settlement_failed" {
  if (kind === "settlement") return "settlement_failed";
  return cause === "recipient" && (kind === "refund" || kind === "return")
    ? "recipient_refused"
    : "transfer_failed";
}

/** Why plain ETH reverted on chain: only its recipient's code runs in such a transaction. */
export const RECIPIENT_REVERTED =
  "transaction reverted: the recipient's code refused the ETH or ran out of gas";

/**
 * Why a transfer whose transaction reverted on chain failed: a plain ETH transfer from an EOA
 * runs no code but its recipient's, so its revert is the recipient's; any other (an ERC-20
 * transfer, a swap's calls) is the sending's.
 */
export function revertCause(transfer: { kind: TransferKindName; tokenSymbol: string }): FailureCause {
  return transfer.tokenSymbol === "ETH" && transfer.kind !== "swap" ? "recipient" : "sending";
}
