import type { EventType } from "./events.ts";
import { isOneOf } from "./one-of.ts";

// An agent wallet's x402 payment authorization (D23, issue 40) as one transition table, like
// payouts' (payout-state.ts): only this table decides which status follows which, and the repo's
// compare-and-set takes its `from` and `to` from here. A payment the policy allows is signed and
// recorded `authorized` at once; one above the wallet's approvalAbove waits, `approval_required`,
// until a person approves (then it is signed) or denies it. An authorization ends `settled` when its
// transfer lands, or `expired` when its validity (validBefore) ends unused.
//
// Every status but `denied` and `expired` holds a share of the policy's caps: a reservation while
// it may still be spent, a spend once settled (RESERVING_STATUSES).

export const AGENT_PAYMENT_STATUSES = [
  "approval_required",
  "authorized",
  "denied",
  "settled",
  "expired",
] as const;
export type AgentPaymentStatus = (typeof AGENT_PAYMENT_STATUSES)[number];

export type AgentPaymentEvent = Extract<EventType, `agent.payment.${string}`>;

export type AgentPaymentTrigger =
  /** Within the policy and at or below approvalAbove: signed at once. */
  | "issued"
  /** Within the policy's limits but above approvalAbove: waits for a person, reserved. */
  | "held_for_approval"
  /** A person approved it: signed now. */
  | "approved"
  /** A person refused it: its reservation is released. */
  | "denied"
  /**
   * Its transfer landed on chain (the facilitator side, or the chain watcher): the reservation
   * becomes a spend.
   */
  | "settled"
  /**
   * Its validBefore has passed unused: the reservation is released. Only once the time has passed
   * on chain too: transferWithAuthorization reverts from validBefore on, so nothing settles after.
   */
  | "expired";

interface AgentPaymentRule {
  from: AgentPaymentStatus | null;
  to: AgentPaymentStatus;
  event: AgentPaymentEvent | null;
}

export const AGENT_PAYMENT_TRANSITIONS = {
  issued: { from: null, to: "authorized", event: "agent.payment.authorized" },
  held_for_approval: { from: null, to: "approval_required", event: "agent.payment.approval_required" },
  approved: { from: "approval_required", to: "authorized", event: "agent.payment.authorized" },
  denied: { from: "approval_required", to: "denied", event: null },
  settled: { from: "authorized", to: "settled", event: "agent.payment.settled" },
  expired: { from: "authorized", to: "expired", event: "agent.payment.expired" },
} as const satisfies Record<AgentPaymentTrigger, AgentPaymentRule>;

/** The statuses whose amounts count against the daily and monthly caps: reserved, or spent. */
export const RESERVING_STATUSES: readonly AgentPaymentStatus[] = [
  "approval_required",
  "authorized",
  "settled",
];

export function isAgentPaymentStatus(value: unknown): value is AgentPaymentStatus {
  return isOneOf(AGENT_PAYMENT_STATUSES, value);
}

/** Whether an authorization in `status` counts against the caps. */
export function reserves(status: AgentPaymentStatus): boolean {
  return RESERVING_STATUSES.includes(status);
}

/** Whether an authorization in `status` can never move again. */
export function isFinal(status: AgentPaymentStatus): boolean {
  return !Object.values(AGENT_PAYMENT_TRANSITIONS).some((rule) => rule.from === status);
}
