import type { AgentPaymentStatus } from "./agent-payment-state.ts";
import type { WalletCurrency } from "./money.ts";
import { isOneOf } from "./one-of.ts";

// The event catalogue of part 6 and the exact body each kind is delivered with.

export const EVENT_TYPES = [
  "payment.created",
  "payment.detected",
  "payment.confirmed",
  "payment.forwarded",
  "payment.failed",
  "payment.expired",
  "payment.cancelled",
  "settlement.recorded",
  "split.recorded",
  "payout.completed",
  "payout.failed",
  "refund.completed",
  "refund.failed",
  "swap.completed",
  "swap.failed",
  "onramp.session.updated",
  "onramp.completed",
  "agent.created",
  "agent.updated",
  "agent.deleted",
  "wallet.created",
  "wallet.balance.updated",
  "wallet.currency.added",
  "agent.payment.authorized",
  "agent.payment.approval_required",
  "agent.payment.settled",
  "agent.payment.expired",
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/**
 * The `data` of every agent.payment.* event (D23): the authorization as
 * `GET /api/wallets/{id}/x402/authorizations/{authorizationId}` shows it when the event is written.
 * `agent.payment.authorized` (signed: `nonce` and the validity window are set) and
 * `agent.payment.approval_required` (waiting for a human: they are null) are written by the pay and
 * approve operations; `agent.payment.settled` (its transfer landed: `txHash` set) and
 * `agent.payment.expired` (its validity ended unused: its reservation is released) carry the same
 * shape with their status.
 */
export interface AgentPaymentEventData {
  authorizationId: string;
  walletId: string;
  status: AgentPaymentStatus;
  /** Our network id (D22) and its CAIP-2 name, as the x402 requirement named it. */
  network: string;
  caip2: string;
  currency: WalletCurrency;
  /** The token contract (the requirement's `asset`). */
  asset: string;
  /** Decimal string in the currency's units (D4). */
  amount: string;
  payTo: string;
  /** The URL the agent paid for, and its origin (what allowedOrigins is checked against). */
  resource: string;
  origin: string;
  /** The EIP-3009 nonce (bytes32 hex) and validity, once signed. */
  nonce: string | null;
  validAfter: string | null;
  validBefore: string | null;
  createdAt: string;
  decidedAt: string | null;
  txHash: string | null;
}

/** `*` subscribes a registration to every kind, present and future (D7). */
export const ALL_EVENTS = "*";

export function isSubscribableEvent(value: unknown): boolean {
  return value === ALL_EVENTS || isOneOf(EVENT_TYPES, value);
}

export function isSubscribed(subscribed: readonly string[], event: string): boolean {
  return subscribed.includes(ALL_EVENTS) || subscribed.includes(event);
}

/**
 * The delivered body. Payout events carry the delivery id and a timestamp (part 6); every other
 * kind is exactly `{event, data}` (D13). Built from stored values only, so every retry of one
 * delivery sends the same bytes.
 */
export function deliveryBody(
  event: string,
  data: Record<string, unknown>,
  deliveryId: string,
  createdAt: Date,
): Record<string, unknown> {
  if (event.startsWith("payout.")) {
    return { id: deliveryId, event, data, timestamp: createdAt.toISOString() };
  }
  return { event, data };
}
