import type Stripe from "stripe";
import type { Environment } from "../../config.ts";
import type { Db } from "../../platform/db/database.ts";
import type { PaymentRow } from "../../platform/db/schema.ts";
import { type ProviderRefund, providerRefundOf } from "./provider.ts";
import type { CardRefundRow } from "./refund-repo.ts";
import type { CardRefunds } from "./refunds.ts";
import * as repo from "./repo.ts";

// Inbound provider events about refunds (D19): a refund's own events carry the refund, a
// charge.refunded carries the charge and, when the provider includes them, its refunds. Each is
// applied like the payment events: its id claimed in the transaction that moves the refunds, so
// a redelivery changes nothing, and the refund's transition table decides what an out-of-order
// report may still change. A refund made in the provider's own dashboard (no id of ours in its
// metadata) is recorded on the payment its payment intent pays, once (issue 39).

/** The refunds `event` reports on; undefined when it is not a refund event. */
export function reportedRefunds(event: Stripe.Event): ProviderRefund[] | undefined {
  switch (event.type) {
    case "refund.created":
    case "refund.updated":
    case "refund.failed":
    case "charge.refund.updated":
      return [providerRefundOf(event.data.object)];
    case "charge.refunded":
      // Recent API versions leave a charge's refunds out of its events: then there is nothing to apply.
      return (event.data.object.refunds?.data ?? []).map(providerRefundOf);
    default:
      return undefined;
  }
}

/** Refunds made in the provider's dashboard: their payments (CardRefunds.externalPayments), and how to lock one. */
export interface ExternalRefunds {
  payments: ReadonlyMap<string, string>;
  lockPayment(trx: Db, paymentId: string): Promise<PaymentRow | undefined>;
}

/**
 * Claims the event and applies the refunds it reports, in `trx`; false when it was a redelivery.
 * A refund not ours whose payment `external` names is recorded on that payment (issue 39).
 */
export async function applyRefundEvent(
  trx: Db,
  refunds: CardRefunds,
  environment: Environment,
  event: Stripe.Event,
  reported: ProviderRefund[],
  external: ExternalRefunds,
): Promise<{ claimed: boolean; outcome: string }> {
  // The refunds are locked before the claim (as payments are): a concurrent redelivery waits for
  // this one and then finds its id claimed.
  // In one order (the provider's ids), so two events listing the same refunds never deadlock.
  const ordered = [...reported].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const targets: Array<{ reported: ProviderRefund; row: CardRefundRow | undefined }> = [];
  for (const one of ordered)
    targets.push({ reported: one, row: await refunds.lockReported(trx, environment, one) });
  const paymentId =
    targets.find((t) => t.row)?.row?.payment_id ??
    targets.map((t) => external.payments.get(t.reported.id)).find((id) => id !== undefined) ??
    null;
  const claimed = await repo.claimEvent(trx, { id: event.id, environment, type: event.type, paymentId });
  if (!claimed) return { claimed: false, outcome: "duplicate" };

  const outcomes: string[] = [];
  if (targets.length === 0) outcomes.push(`ignored: ${event.type} lists no refunds`);
  for (const { reported: one, row } of targets) {
    if (!row) {
      const paymentId = external.payments.get(one.id);
      const payment = paymentId ? await external.lockPayment(trx, paymentId) : undefined;
      if (payment?.payment_method === "card") {
        outcomes.push((await refunds.recordExternal(trx, payment, one)).outcome);
        continue;
      }
      outcomes.push(`ignored: refund ${one.id} is not one of ours`);
      continue;
    }
    outcomes.push((await refunds.applyReported(trx, row, one)).outcome);
  }
  const outcome = outcomes.join("; ");
  await repo.recordOutcome(trx, event.id, outcome);
  return { claimed: true, outcome };
}
