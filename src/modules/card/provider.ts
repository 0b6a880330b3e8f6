import Stripe from "stripe";
import type { CardProviderConfig, Environment } from "../../config.ts";
import { ProviderError } from "../../domain/errors.ts";

// The one adapter to the hosted card checkout provider (Stripe Checkout's API, through the
// official SDK, pinned to the API version of part 9). Everything provider-shaped stays here.

export const CARD_API_VERSION = "2026-05-27.dahlia";

/** The provider of each environment with card payments configured. */
export type CardProviders = Partial<Record<Environment, CardProvider>>;

/** Raised by payments when the provider cannot be reached or refuses (the spec's 502). */
export function providerUnavailable(detail: string, cause?: unknown): ProviderError {
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

  /** Verifies the signature header over the raw body (5 minute tolerance) and parses the event. */
  verifyEvent(rawBody: Buffer, signature: string): Stripe.Event {
    if (!this.#webhookSecret) throw new CardProviderError("no webhook signing secret configured");
    return this.#stripe.webhooks.constructEvent(rawBody, signature, this.#webhookSecret, 300);
  }
}

function providerMessage(err: unknown): string {
  const e = err as { message?: string; type?: string; statusCode?: number };
  return `${e.type ? `${e.type}: ` : ""}${e.message ?? "request failed"}`.slice(0, 300);
}
