import type Stripe from "stripe";
import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { badRequest } from "../../domain/errors.ts";
import {
  isVerified,
  type PaymentStatus,
  type PaymentTrigger,
  transition,
} from "../../domain/payment-state.ts";
import { isUuid } from "../../domain/validation.ts";
import type { PaymentRow } from "../../platform/db/schema.ts";
import type { CardPaymentRef, PaymentsService } from "../payments/service.ts";
import {
  NotAnOnrampSession,
  ONRAMP_EVENT,
  onrampSessionOf,
  type ProviderOnrampSession,
} from "./onramp-provider.ts";
import type { CardProviders } from "./provider.ts";
import { applyRefundEvent, reportedRefunds } from "./refund-events.ts";
import type { CardRefunds } from "./refunds.ts";
import * as repo from "./repo.ts";

// Inbound card-provider webhooks (part 4.9, D5): verify the signature with the environment's
// signing secret (the environment is the event's livemode), de-duplicate by event id in the
// same transaction as the payment change, and map the provider's events onto our lifecycle.

/**
 * Session events that move a payment. A session completes `unpaid` when the payer chose a delayed
 * method (a bank debit): only a `paid` session forwards, and the delayed payment's outcome comes
 * later as async_payment_succeeded / async_payment_failed. Sessions are created for cards only
 * (provider.ts), so `unpaid` is not expected; it is handled all the same.
 */
const SESSION_TRIGGERS: Record<string, { trigger: PaymentTrigger; needsPaid: boolean }> = {
  "checkout.session.completed": { trigger: "card_checkout_completed", needsPaid: true },
  "checkout.session.async_payment_succeeded": { trigger: "card_async_payment_succeeded", needsPaid: true },
  "checkout.session.async_payment_failed": { trigger: "card_async_payment_failed", needsPaid: false },
  "checkout.session.expired": { trigger: "card_checkout_expired", needsPaid: false },
};

/** Who applies on-ramp session events (the on-ramp module, handed in by app.ts). */
export interface OnrampEvents {
  applyEvent(
    trx: AppContext["db"],
    environment: Environment,
    event: { id: string; session: ProviderOnrampSession },
  ): Promise<string>;
}

const ASYNC_FAILURE_REASON =
  "The payer's delayed payment failed after the checkout completed (checkout.session.async_payment_failed)";

export class CardWebhooks {
  readonly #ctx: AppContext;
  readonly #providers: CardProviders;
  readonly #payments: PaymentsService;
  readonly #refunds: CardRefunds;
  readonly #onramp: OnrampEvents;

  constructor(
    ctx: AppContext,
    providers: CardProviders,
    payments: PaymentsService,
    refunds: CardRefunds,
    onramp: OnrampEvents,
  ) {
    this.#ctx = ctx;
    this.#onramp = onramp;
    this.#refunds = refunds;
    this.#providers = providers;
    this.#payments = payments;
  }

  async receive(
    rawBody: Buffer,
    signature: string | undefined,
  ): Promise<{ received: true; duplicate?: true }> {
    if (!signature) throw badRequest("Invalid signature");
    let livemode: unknown;
    try {
      livemode = (JSON.parse(rawBody.toString("utf8")) as { livemode?: unknown }).livemode;
    } catch {
      throw badRequest("Invalid signature");
    }
    const environment: Environment = livemode === true ? "live" : "sandbox";
    const provider = this.#providers[environment];
    if (!provider?.webhooksConfigured) throw badRequest("Card webhooks are not configured");
    let event: Stripe.Event;
    try {
      event = provider.verifyEvent(rawBody, signature);
    } catch {
      throw badRequest("Invalid signature");
    }

    // On-ramp sessions (D17) are the on-ramp's: claimed here like every event, applied there.
    // The SDK's event types do not list the on-ramp's (it has no typed on-ramp resource).
    const type: string = event.type;
    if (type === ONRAMP_EVENT) {
      const claimed = await this.#ctx.db.transaction().execute(async (trx) => {
        if (!(await repo.claimEvent(trx, { id: event.id, environment, type: event.type, paymentId: null })))
          return false;
        await repo.recordOutcome(trx, event.id, await this.#applyOnramp(trx, environment, event));
        return true;
      });
      return claimed ? { received: true } : { received: true, duplicate: true };
    }

    // Refund events name a refund (or a charge), never a checkout: the refunds apply them (D19).
    const reported = reportedRefunds(event);
    if (reported) {
      // Refunds made in the provider's dashboard: their payments are asked for before the transaction.
      const external = {
        payments: await this.#refunds.externalPayments(environment, reported),
        lockPayment: (trx: AppContext["db"], paymentId: string) =>
          this.#payments.lockCardPayment(trx, environment, { paymentId }),
      };
      const { claimed } = await this.#ctx.db
        .transaction()
        .execute((trx) => applyRefundEvent(trx, this.#refunds, environment, event, reported, external));
      return claimed ? { received: true } : { received: true, duplicate: true };
    }

    const { answer, moved } = await this.#ctx.db.transaction().execute(async (trx) => {
      const ref = paymentRefOf(event);
      const payment = ref ? await this.#payments.lockCardPayment(trx, environment, ref) : undefined;
      const claimed = await repo.claimEvent(trx, {
        id: event.id,
        environment,
        type: event.type,
        paymentId: payment?.id ?? null,
      });
      if (!claimed) return { answer: { received: true, duplicate: true } as const };

      const applied = payment ? await this.#apply(trx, payment, event) : { outcome: "unknown payment" };
      if (!payment)
        this.#ctx.log.warn({ eventId: event.id, type: event.type }, "card event for no known payment");
      await repo.recordOutcome(trx, event.id, applied.outcome);
      return { answer: { received: true } as const, moved: applied.moved };
    });
    if (moved) this.#ctx.metrics.paymentsMoved([moved], moved.status);
    return answer;
  }

  /** An on-ramp event's session, read here (the provider's shape stays in this module), applied there. */
  async #applyOnramp(trx: AppContext["db"], environment: Environment, event: Stripe.Event): Promise<string> {
    let session: ProviderOnrampSession;
    try {
      session = onrampSessionOf(event.data.object);
    } catch (err) {
      if (err instanceof NotAnOnrampSession) {
        // Verified and from the provider, yet unreadable (a status this service does not know): kept
        // as the event's outcome and said here, since the session it names stays where it was.
        this.#ctx.log.warn({ eventId: event.id, reason: err.message }, "on-ramp event ignored");
        return `ignored: ${err.message}`;
      }
      throw err;
    }
    return this.#onramp.applyEvent(trx, environment, { id: event.id, session });
  }

  /** What the event did to the payment (card_events.outcome), and the payment if it moved. */
  async #apply(
    trx: AppContext["db"],
    payment: PaymentRow,
    event: Stripe.Event,
  ): Promise<{ outcome: string; moved?: PaymentRow }> {
    const now = this.#ctx.now();
    const rule = SESSION_TRIGGERS[event.type];
    if (rule) {
      const session = event.data.object as Stripe.Checkout.Session;
      if (rule.needsPaid && session.payment_status !== "paid")
        return { outcome: `awaiting payment: payment_status is ${session.payment_status}` };
      // Out of order (completed after expired, a replay after cancel): a final payment never moves.
      if (!transition(payment.status as PaymentStatus, rule.trigger).ok) {
        if (rule.needsPaid && !isVerified(payment.status as PaymentStatus))
          this.#ctx.log.warn(
            { paymentId: payment.id, eventId: event.id, status: payment.status },
            "card payment paid at the provider for a payment that is final here: refund it at the provider",
          );
        return { outcome: `ignored: payment is ${payment.status}` };
      }
      // A paid checkout confirms the payment now: the time its receipt shows (D25).
      const changes = rule.needsPaid
        ? { confirmed_at: now }
        : rule.trigger === "card_async_payment_failed"
          ? { failure_reason: ASYNC_FAILURE_REASON }
          : {};
      const moved = await this.#payments.moveCardPayment(trx, payment, rule.trigger, now, changes);
      return { outcome: "applied", moved };
    }
    if (event.type === "payment_intent.payment_failed") {
      // The payer may retry inside the same checkout: the payment stays pending (D5).
      const intent = event.data.object as Stripe.PaymentIntent;
      const error = intent.last_payment_error;
      const refusal = JSON.stringify({
        code: error?.code ?? null,
        declineCode: error?.decline_code ?? null,
        message: error?.message ?? "payment failed",
        type: error?.type ?? null,
        at: now.toISOString(),
      });
      await this.#payments.recordCardRefusal(trx, payment.id, refusal, now);
      return { outcome: "recorded last payment error" };
    }
    return { outcome: `ignored: ${event.type} is not handled` };
  }
}

/** The payment an event names: a session by its id, anything else by our id in its metadata. */
function paymentRefOf(event: Stripe.Event): CardPaymentRef | undefined {
  const object = event.data.object as {
    object?: string;
    id?: string;
    metadata?: Record<string, string> | null;
  };
  if (object.object === "checkout.session" && object.id) return { checkoutSessionId: object.id };
  const paymentId = object.metadata?.paymentId;
  return isUuid(paymentId) ? { paymentId } : undefined;
}
