import { isFinal, type PaymentStatus, SETTLED_STATUS, UNSETTLED_STATUSES } from "./payment-state.ts";

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

// A claim left `settling` by an instance that stopped mid-settle (a crash between the claim and
// its answer) would hold its authorization and payment-identifier for ever. Once it is older than
// any settle takes, a repeat of it (same workspace, same request) ends it from what was written
// meanwhile: the payments of its authorization, which the facilitator writes before it sends
// anything (modules/x402/stale-claims.ts).

/**
 * A claim still `settling` this long after it was claimed (or taken over) belongs to an instance
 * that stopped: a settle takes at most a few minutes (its gas top-up, its turn of the wallet and
 * its receipt, each bounded by a minute's wait).
 */
export const STALE_SETTLE_SECONDS = 600;

/** A payment made for the authorization a stale claim holds, as the recovery needs it. */
export interface AuthorizationPayment {
  id: string;
  status: PaymentStatus;
  /** The transaction that pays it, once recorded (live: with its record, before it is sent). */
  txHash: string | null;
}

export type StaleClaimVerdict =
  /** Its transfer was made (detected at least): the settle succeeded with that transaction. */
  | { kind: "settled"; payment: AuthorizationPayment }
  /** Its transaction was sent and its payment ended unpaid (reverted, dropped until expiry). */
  | { kind: "failed"; payment: AuthorizationPayment }
  /** A transaction is recorded and its payment still waits for it: the chain decides first. */
  | { kind: "in_progress" }
  /**
   * Nothing was sent: no payment, or only ones whose transaction was never recorded. Those still
   * pending are failed first (`unsent`; which fences off their sending), then the repeat settles
   * afresh under the same claim.
   */
  | { kind: "nothing"; unsent: AuthorizationPayment[] };

/** A transfer paid it: received (not settled yet) or settled. */
const isPaid = (p: AuthorizationPayment) =>
  UNSETTLED_STATUSES.includes(p.status) || p.status === SETTLED_STATUS;
/** Still waiting for its transfer: neither paid nor ended. */
const isWaiting = (p: AuthorizationPayment) => !isPaid(p) && !isFinal(p.status);

/** What the payments of a stale claim's authorization say happened to it. */
export function staleClaimVerdict(payments: readonly AuthorizationPayment[]): StaleClaimVerdict {
  const paid = payments.find(isPaid);
  if (paid) return { kind: "settled", payment: paid };
  if (payments.some((p) => isWaiting(p) && p.txHash !== null)) return { kind: "in_progress" };
  const sentAndEnded = payments.find((p) => p.txHash !== null);
  if (sentAndEnded) return { kind: "failed", payment: sentAndEnded };
  return { kind: "nothing", unsent: payments.filter(isWaiting) };
}
