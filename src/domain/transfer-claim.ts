// What an incoming transfer counts as, once: a payment's money, an item of the unmatched inbox, or
// an on-ramp session's delivery (D5, D17, D19), never two. Every transfer the chain watcher or an
// on-ramp credit accounts for has one claim row (observed_transfers, keyed by the transfer's
// identity), and its `claim` says which of the three it is. Only this table moves a claim; the
// repos' compare-and-sets take `from` and `to` from it, so a transfer a payment took can never be
// credited to an on-ramp session, and one a session took never pays a payment.

export const TRANSFER_CLAIMS = ["payment", "inbox", "onramp"] as const;
export type TransferClaim = (typeof TRANSFER_CLAIMS)[number];

export type ClaimTrigger =
  /** The merchant attached the inbox item to a payment. */
  | "attached"
  /** A reorganisation dropped the transaction of an attached payment: the inbox item is open again. */
  | "attachment_reverted"
  /** An on-ramp session's provider named the transaction of an inbox item: the session's. */
  | "onramp_named";

interface ClaimRule {
  from: TransferClaim;
  to: TransferClaim;
}

export const CLAIM_TRANSITIONS = {
  attached: { from: "inbox", to: "payment" },
  attachment_reverted: { from: "payment", to: "inbox" },
  onramp_named: { from: "inbox", to: "onramp" },
} as const satisfies Record<ClaimTrigger, ClaimRule>;

/**
 * What the chain watcher claims a transfer as when it first accounts for it: the session's if an
 * on-ramp session names its transaction, a payment's if it paired it with one, else the inbox's.
 */
export function firstClaim(seen: { named: boolean; paired: boolean }): TransferClaim {
  if (seen.named) return "onramp";
  return seen.paired ? "payment" : "inbox";
}

/**
 * Whether an on-ramp session may credit a transfer claimed as `claim` (undefined: no claim yet, the
 * credit takes it): unclaimed, already the session's, or an inbox item still open (`inboxItemOpen`:
 * the session takes it, onramp_named). A payment's money, or an inbox item the merchant attached or
 * returned, is not the session's.
 */
export function onrampMayCredit(claim: TransferClaim | undefined, inboxItemOpen: boolean): boolean {
  const named = CLAIM_TRANSITIONS.onramp_named;
  if (claim === undefined || claim === named.to) return true;
  return claim === named.from && inboxItemOpen;
}
