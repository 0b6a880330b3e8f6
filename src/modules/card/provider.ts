import Stripe from "stripe";
import type { CardProviderConfig, Environment } from "../../config.ts";
import { ProviderError } from "../../domain/errors.ts";
import type { RefundTrigger } from "../../domain/refund-state.ts";
import {
  ONRAMP_PATH,
  type OnrampSessionRequest,
  onrampParams,
  onrampSessionOf,
  type ProviderOnrampSession,
} from "./onramp-provider.ts";

// The one adapter to the hosted card checkout provider (Stripe Checkout's API, through the
// official SDK, pinned to the API version of part 9). Everything provider-shaped stays here.

export const CARD_API_VERSION = "2026-05-27.dahlia";

/** The provider of each environment with card payments configured. */
export type CardProviders = Partial<Record<Environment, CardProvider>>;

/** What a tenant is told when the provider failed: its own message may name the operator's account (logged instead). */
export const CARD_PROVIDER_FAILED =
  "The card provider did not answer as expected. Try again later, or contact the operator if it persists.";

/**
 * Raised by payments when the provider cannot be reached or refuses (the spec's 502): the detail
 * is ours (CARD_PROVIDER_FAILED unless given), the provider's error is the cause, which the error
 * handler logs.
 */
export function providerUnavailable(cause?: unknown, detail: string = CARD_PROVIDER_FAILED): ProviderError {
  return new ProviderError("Card provider error", { detail }, { cause });
}
/** The provider accepts a session expiry between 30 minutes and 24 hours from now. */
const MIN_SESSION_SECONDS = 30 * 60 + 60;
const MAX_SESSION_SECONDS = 24 * 60 * 60 - 60;

/**
 * Session parameters of the pinned API version. The SDK's types follow its own newest version,
 * which dropped `payment_method_types` from session creation (2026-09-30.endive, in favour of
 * `allowed_payment_method_types`); on 2026-05-27.dahlia it is the way to allow cards only.
 */
type PinnedSessionCreateParams = Stripe.Checkout.SessionCreateParams & { payment_method_types: ["card"] };

export interface CheckoutRequest {
  paymentId: string;
  amountCents: bigint;
  description: string | null;
  successUrl: string;
  cancelUrl: string;
  expiresAt: Date;
  idempotencyKey: string | undefined;
  now: Date;
}

export interface CheckoutSession {
  id: string;
  url: string;
}

export class CardProviderError extends Error {
  override name = "CardProviderError";
}

/**
 * The provider answered and refused: what was asked certainly did not happen (a 4xx other than a
 * conflict or a rate limit). Any other failure (network, 5xx after the SDK's retries) may or may
 * not have done it.
 */
export class CardProviderRefusal extends CardProviderError {
  override name = "CardProviderRefusal";
}

/** A refund at the provider, its status mapped to our refund's trigger (null: not final yet). */
export interface ProviderRefund {
  id: string;
  /** succeeded → completed; failed or canceled → failed; pending, requires_action → null. */
  outcome: Exclude<RefundTrigger, "recorded"> | null;
  /** Our refund's id (its metadata), when we made it. */
  refundId: string | null;
  /** Why it failed, when it did. */
  failure: string | null;
  /** The payment intent it refunds (a refund made at the provider is found by it). */
  paymentIntent: string | null;
  /** In the currency's smallest unit (cents). */
  amount: bigint;
}

export interface RefundRequest {
  paymentIntent: string;
  amountCents: bigint;
  refundId: string;
  paymentId: string;
  idempotencyKey: string;
}

/** The one place the provider's refund statuses become ours (requests and inbound events alike). */
export function providerRefundOf(refund: Stripe.Refund): ProviderRefund {
  const status = refund.status ?? "pending";
  const outcome =
    status === "succeeded" ? "succeeded" : status === "failed" || status === "canceled" ? "failed" : null;
  return {
    id: refund.id,
    outcome,
    refundId: refund.metadata?.refundId ?? null,
    paymentIntent:
      typeof refund.payment_intent === "string" ? refund.payment_intent : (refund.payment_intent?.id ?? null),
    amount: BigInt(refund.amount),
    failure:
      outcome === "failed"
        ? `The card provider reports the refund ${status}${refund.failure_reason ? ` (${refund.failure_reason})` : ""}`
        : null,
  };
}

export class CardProvider {
  readonly #stripe: Stripe;
  readonly #webhookSecret: string | undefined;

  constructor(config: CardProviderConfig, apiBase: string | undefined) {
    const base = apiBase ? new URL(apiBase) : undefined;
    this.#stripe = new Stripe(config.secretKey, {
      apiVersion: CARD_API_VERSION as Stripe.LatestApiVersion,
      maxNetworkRetries: 2,
      timeout: 15_000,
      ...(base
        ? {
            host: base.hostname,
            port: Number(base.port || (base.protocol === "https:" ? 443 : 80)),
            protocol: base.protocol.replace(":", "") as "http" | "https",
          }
        : {}),
    });
    this.#webhookSecret = config.webhookSecret;
  }

  get webhooksConfigured(): boolean {
    return this.#webhookSecret !== undefined;
  }

  async createCheckout(request: CheckoutRequest): Promise<CheckoutSession> {
    const seconds = Math.round((request.expiresAt.getTime() - request.now.getTime()) / 1000);
    const expiresIn = Math.min(MAX_SESSION_SECONDS, Math.max(MIN_SESSION_SECONDS, seconds));
    try {
      const params: PinnedSessionCreateParams = {
        mode: "payment",
        // Cards only: a delayed method (bank debit) completes the session before it is paid, and
        // its money could arrive after the payment has expired here (docs/card.md).
        payment_method_types: ["card"],
        client_reference_id: request.paymentId,
        metadata: { paymentId: request.paymentId },
        payment_intent_data: { metadata: { paymentId: request.paymentId } },
        line_items: [
          {
            quantity: 1,
            price_data: {
              currency: "usd",
              unit_amount: Number(request.amountCents),
              product_data: { name: request.description ?? "Payment" },
            },
          },
        ],
        success_url: request.successUrl,
        cancel_url: request.cancelUrl,
        expires_at: Math.floor(request.now.getTime() / 1000) + expiresIn,
      };
      const session = await this.#stripe.checkout.sessions.create(
        params,
        request.idempotencyKey ? { idempotencyKey: request.idempotencyKey } : undefined,
      );
      if (!session.url) throw new CardProviderError("the provider returned a session without a checkout URL");
      return { id: session.id, url: session.url };
    } catch (err) {
      if (err instanceof CardProviderError) throw err;
      throw new CardProviderError(providerMessage(err));
    }
  }

  /** Expires an open session; answers the session's status afterwards ("expired" or "complete"). */
  async expireCheckout(sessionId: string): Promise<"expired" | "complete" | "open"> {
    try {
      const session = await this.#stripe.checkout.sessions.expire(sessionId);
      return (session.status ?? "expired") as "expired" | "complete" | "open";
    } catch (err) {
      // Expiring a session that is already complete or expired is refused: read what it is.
      try {
        const session = await this.#stripe.checkout.sessions.retrieve(sessionId);
        return (session.status ?? "open") as "expired" | "complete" | "open";
      } catch {
        throw new CardProviderError(providerMessage(err));
      }
    }
  }

  /** The payment intent a completed checkout session was paid with (what a refund names). */
  async paymentIntentOf(sessionId: string): Promise<string> {
    let session: Stripe.Checkout.Session;
    try {
      session = await this.#stripe.checkout.sessions.retrieve(sessionId);
    } catch (err) {
      throw providerFailure(err);
    }
    const intent = session.payment_intent;
    if (!intent) throw new CardProviderRefusal(`checkout session ${sessionId} has no payment intent`);
    return typeof intent === "string" ? intent : intent.id;
  }

  /**
   * Our payment a payment intent pays: the id checkout put in its metadata (payment_intent_data);
   * null for a payment intent this service did not make.
   */
  async paymentOfIntent(paymentIntent: string): Promise<string | null> {
    try {
      const intent = await this.#stripe.paymentIntents.retrieve(paymentIntent);
      return intent.metadata?.paymentId ?? null;
    } catch (err) {
      // One the provider does not know in this account is not ours; any other failure is thrown (the event is delivered again).
      if (err instanceof Stripe.errors.StripeError && err.statusCode === 404) return null;
      throw providerFailure(err);
    }
  }

  /**
   * Refunds part or all of a payment intent. The idempotency key makes a repeat (a retry after a
   * crash, the reconciler) answer the refund the first call made instead of making another.
   */
  async createRefund(request: RefundRequest): Promise<ProviderRefund> {
    try {
      const refund = await this.#stripe.refunds.create(
        {
          payment_intent: request.paymentIntent,
          amount: Number(request.amountCents),
          metadata: { refundId: request.refundId, paymentId: request.paymentId },
        },
        { idempotencyKey: request.idempotencyKey },
      );
      return providerRefundOf(refund);
    } catch (err) {
      throw providerFailure(err);
    }
  }

  async retrieveRefund(id: string): Promise<ProviderRefund> {
    try {
      return providerRefundOf(await this.#stripe.refunds.retrieve(id));
    } catch (err) {
      throw providerFailure(err);
    }
  }

  /**
   * Our refund among the payment intent's refunds, by the id in its metadata. The provider stores
   * a request's answer under its idempotency key, a 500 included, so a refund whose creation
   * answered 500 is looked for before it is asked for again.
   */
  async findRefund(paymentIntent: string, refundId: string): Promise<ProviderRefund | undefined> {
    try {
      for await (const refund of this.#stripe.refunds.list({ payment_intent: paymentIntent, limit: 100 })) {
        if (refund.metadata?.refundId === refundId) return providerRefundOf(refund);
      }
      return undefined;
    } catch (err) {
      throw providerFailure(err);
    }
  }

  /**
   * Creates a crypto on-ramp session (D17) through the SDK's raw request (the SDK types no on-ramp
   * resource): its authentication, retries and idempotency (our session's id as the key) stay
   * the SDK's.
   */
  async createOnrampSession(request: OnrampSessionRequest): Promise<ProviderOnrampSession> {
    try {
      const raw: unknown = await this.#stripe.rawRequest("POST", ONRAMP_PATH, onrampParams(request), {
        idempotencyKey: `onramp-${request.onrampId}`,
      });
      return onrampSessionOf(raw);
    } catch (err) {
      // The provider's refusal, a failure on the way, or an answer that is not a session.
      throw providerFailure(err);
    }
  }

  /**
   * Reads one on-ramp session back (`GET /v1/crypto/onramp_sessions/{id}`, the raw request as for
   * creation): what the reconciler asks when the session's events may have been lost.
   */
  async retrieveOnrampSession(id: string): Promise<ProviderOnrampSession> {
    try {
      const raw: unknown = await this.#stripe.rawRequest("GET", `${ONRAMP_PATH}/${encodeURIComponent(id)}`);
      return onrampSessionOf(raw);
    } catch (err) {
      throw providerFailure(err);
    }
  }

  /** Verifies the signature header over the raw body (5 minute tolerance) and parses the event. */
  verifyEvent(rawBody: Buffer, signature: string): Stripe.Event {
    if (!this.#webhookSecret) throw new CardProviderError("no webhook signing secret configured");
    return this.#stripe.webhooks.constructEvent(rawBody, signature, this.#webhookSecret, 300);
  }
}

/** A definite refusal (CardProviderRefusal) or a failure that may have done what was asked. */
function providerFailure(err: unknown): CardProviderError {
  if (!(err instanceof Stripe.errors.StripeError))
    return new CardProviderError(providerMessage(err), { cause: err });
  const status = err.statusCode ?? 0;
  // A conflict or a rate limit refuses for now, an idempotency error says the key was used before
  // (so the first request may have done it): none of them is a refusal of what was asked.
  const refused =
    status >= 400 && status < 500 && status !== 409 && status !== 429 && err.rawType !== "idempotency_error";
  return refused
    ? new CardProviderRefusal(err.message.slice(0, 300), { cause: err })
    : new CardProviderError(providerMessage(err), { cause: err });
}

function providerMessage(err: unknown): string {
  const e = err as { message?: string; type?: string; statusCode?: number };
  return `${e.type ? `${e.type}: ` : ""}${e.message ?? "request failed"}`.slice(0, 300);
}
