import type Stripe from "stripe";
import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { badRequest, ProviderError } from "../../domain/errors.ts";
import { type PaymentStatus, type PaymentTrigger, transition } from "../../domain/payment-state.ts";
import { isUuid } from "../../domain/validation.ts";
import type { PaymentRow } from "../../platform/db/schema.ts";
import { applyTransition } from "../payments/transitions.ts";
import type { CardProvider } from "./provider.ts";

// Inbound card-provider webhooks (part 4.9, D5): verify the signature with the environment's
// signing secret (the environment is the event's livemode), de-duplicate by event id in the
// same transaction as the payment change, and map the provider's events onto our lifecycle.

export type CardProviders = Partial<Record<Environment, CardProvider>>;

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

const ASYNC_FAILURE_REASON =
  "The payer's delayed payment failed after the checkout completed (checkout.session.async_payment_failed)";

export class CardWebhooks {
  readonly #ctx: AppContext;
  readonly #providers: CardProviders;

  constructor(ctx: AppContext, providers: CardProviders) {
    this.#ctx = ctx;
    this.#providers = providers;
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

    const { answer, moved } = await this.#ctx.db.transaction().execute(async (trx) => {
      const payment = await this.#findPayment(trx, environment, event);
      const claimed = await trx
        .insertInto("card_events")
        .values({
          event_id: event.id,
          environment,
          event_type: event.type,
          payment_id: payment?.id ?? null,
          outcome: "received",
        })
        .onConflict((oc) => oc.column("event_id").doNothing())
        .returning("event_id")
        .executeTakeFirst();
      if (!claimed) return { answer: { received: true, duplicate: true } as const };

      const applied = payment ? await this.#apply(trx, payment, event) : { outcome: "unknown payment" };
      if (!payment)
        this.#ctx.log.warn({ eventId: event.id, type: event.type }, "card event for no known payment");
      await trx
        .updateTable("card_events")
        .set({ outcome: applied.outcome })
        .where("event_id", "=", event.id)
        .execute();
      return { answer: { received: true } as const, moved: applied.moved };
    });
    if (moved) this.#ctx.metrics.paymentsMoved([moved], moved.status);
    return answer;
  }

  async #findPayment(
    trx: AppContext["db"],
    environment: Environment,
    event: Stripe.Event,
  ): Promise<PaymentRow | undefined> {
    const object = event.data.object as {
      object?: string;
      id?: string;
      metadata?: Record<string, string> | null;
    };
    let query = trx
      .selectFrom("payments")
      .selectAll()
      .where("environment", "=", environment)
      .where("payment_method", "=", "card");
    if (object.object === "checkout.session" && object.id) {
      query = query.where("card_checkout_session_id", "=", object.id);
    } else {
      const paymentId = object.metadata?.paymentId;
      if (!isUuid(paymentId)) return undefined;
      query = query.where("id", "=", paymentId);
    }
    return query.forUpdate().executeTakeFirst();
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
        if (rule.needsPaid && payment.status !== "forwarded")
          this.#ctx.log.warn(
            { paymentId: payment.id, eventId: event.id, status: payment.status },
            "card payment paid at the provider for a payment that is final here: refund it at the provider",
          );
        return { outcome: `ignored: payment is ${payment.status}` };
      }
      const changes =
        rule.trigger === "card_async_payment_failed" ? { failure_reason: ASYNC_FAILURE_REASON } : {};
      return { outcome: "applied", moved: await applyTransition(trx, payment, rule.trigger, now, changes) };
    }
    if (event.type === "payment_intent.payment_failed") {
      // The payer may retry inside the same checkout: the payment stays pending (D5).
      const intent = event.data.object as Stripe.PaymentIntent;
      const error = intent.last_payment_error;
      await trx
        .updateTable("payments")
        .set({
          last_payment_error: JSON.stringify({
            code: error?.code ?? null,
            declineCode: error?.decline_code ?? null,
            message: error?.message ?? "payment failed",
            type: error?.type ?? null,
            at: now.toISOString(),
          }),
          updated_at: now,
        })
        .where("id", "=", payment.id)
        .execute();
      return { outcome: "recorded last payment error" };
    }
    return { outcome: `ignored: ${event.type} is not handled` };
  }
}

/** Raised by payments when the provider cannot be reached or refuses (the spec's 502). */
export function providerUnavailable(detail: string, cause?: unknown): ProviderError {
  return new ProviderError("Card provider error", { detail }, { cause });
}
