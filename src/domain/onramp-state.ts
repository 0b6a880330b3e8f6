import { isOneOf } from "./one-of.ts";

// A fiat on-ramp session's lifecycle (D17) as one table: the provider's statuses, in the order a
// session moves through them. The provider's events may arrive late, twice or out of order, so a
// status applies only when it moves the session forward; `rejected` and `fulfillment_complete`
// end it. The crypto counts for the wallet only once the chain shows the transfer: `completed`
// is ours, set once on a session whose provider status is `fulfillment_complete`.

export const ONRAMP_STATUSES = [
  "initialized",
  "requires_payment",
  "fulfillment_processing",
  "fulfillment_complete",
  "rejected",
] as const;
export type OnrampStatus = (typeof ONRAMP_STATUSES)[number];

/** How far along each status is; the two endings share the last step. */
const STEP: Record<OnrampStatus, number> = {
  initialized: 0,
  requires_payment: 1,
  fulfillment_processing: 2,
  fulfillment_complete: 3,
  rejected: 3,
};

const FINAL: ReadonlySet<OnrampStatus> = new Set(["fulfillment_complete", "rejected"]);

export function isOnrampStatus(value: unknown): value is OnrampStatus {
  return isOneOf(ONRAMP_STATUSES, value);
}

/**
 * Whether the provider's `to` moves a session that is `from`: forward only, never out of an
 * ending (an event replayed or arriving after a later one changes nothing).
 */
export function onrampMoves(from: OnrampStatus, to: OnrampStatus): boolean {
  return !FINAL.has(from) && STEP[to] > STEP[from];
}

/** The statuses a session may still move from (the compare-and-set of the repo's update). */
export function onrampStatusesBefore(to: OnrampStatus): OnrampStatus[] {
  return ONRAMP_STATUSES.filter((from) => onrampMoves(from, to));
}

/** The ending whose crypto may be credited: the provider fulfilled it (the chain decides when). */
export const FULFILLED: OnrampStatus = "fulfillment_complete";

/** The statuses a session has not ended in: the provider may still deliver it. */
export const UNENDED_ONRAMP_STATUSES: readonly OnrampStatus[] = ONRAMP_STATUSES.filter((s) => !FINAL.has(s));
