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
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/** `*` subscribes a registration to every kind, present and future (D7). */
export const ALL_EVENTS = "*";

export function isSubscribableEvent(value: unknown): boolean {
  return (
    value === ALL_EVENTS || (typeof value === "string" && (EVENT_TYPES as readonly string[]).includes(value))
  );
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
