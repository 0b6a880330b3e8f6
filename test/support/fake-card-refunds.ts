import type { CardEvent, PaymentIntentRecord, RecordedRequest } from "./fake-card-provider.ts";

// The refunds part of the fake card provider (fake-card-provider.ts): the Refunds calls the
// service makes (create, retrieve, list by payment intent) with their state, the answers the next
// creations give (`answerNextRefunds`), and the inbound refund events (`refund.updated`,
// `charge.refunded`). FakeCardProvider owns one and delegates to it; tests use it through
// FakeCardProvider.

type Json = Record<string, unknown>;

export type RefundStatus = "pending" | "requires_action" | "succeeded" | "failed" | "canceled";

export interface RefundObject {
  id: string;
  object: "refund";
  amount: number;
  balance_transaction: string | null;
  charge: string;
  created: number;
  currency: string;
  metadata: Record<string, string>;
  payment_intent: string;
  reason: string | null;
  receipt_number: string | null;
  status: RefundStatus;
  failure_reason?: string;
}

/**
 * How the next refund creation answers: the status its refund gets, or a 500 — `error` made
 * nothing (a retry under the key reaches the fake again), `lost` made the refund and stored it
 * under the key but the answer never arrived (a retry under the key replays the refund).
 */
export type RefundAnswer = RefundStatus | "error" | "lost";

/** An idempotent result of the provider: the request's parameters and the answer. */
export interface IdempotentResult {
  form: string;
  status: number;
  body: unknown;
}

export type Reply = (status: number, payload: unknown, extra?: Record<string, string>) => void;
export type Fail = (status: number, type: string, message: string, extra?: Json) => void;

/** What the refunds part uses of the provider it belongs to. */
export interface RefundsHost {
  readonly requests: RecordedRequest[];
  readonly paymentIntents: Map<string, PaymentIntentRecord>;
  /** Idempotent results per account (`${secretKey}\n${key}`), shared with the session calls. */
  readonly idempotency: Map<string, IdempotentResult>;
  /** The provider's clock (epoch ms). */
  now(): number;
  randomId(prefix: string): string;
  event(type: string, object: Json, options: { livemode: boolean; created?: number }): CardEvent;
}

export class FakeCardRefunds {
  readonly refunds = new Map<string, RefundObject>();
  /** Answers of the next refund creations, in order (then `succeeded`). */
  #answers: RefundAnswer[] = [];
  readonly #host: RefundsHost;

  constructor(host: RefundsHost) {
    this.#host = host;
  }

  /** The next refund creations answer these, one each, in order; later ones succeed. */
  answerNext(...answers: RefundAnswer[]): void {
    this.#answers.push(...answers);
  }

  /** Forgets answers set with `answerNext` that no creation used. */
  resetAnswers(): void {
    this.#answers = [];
  }

  /** Refund requests: `create` (POST /v1/refunds), `retrieve` (GET /v1/refunds/:id), `list`. */
  calls(kind: "create" | "retrieve" | "list"): RecordedRequest[] {
    return this.#host.requests.filter((r) => {
      if (kind === "create") return r.method === "POST" && r.path === "/v1/refunds";
      if (kind === "list") return r.method === "GET" && r.path === "/v1/refunds";
      return r.method === "GET" && r.path.startsWith("/v1/refunds/");
    });
  }

  refund(id: string): RefundObject {
    const refund = this.refunds.get(id);
    if (!refund) throw new Error(`fake card provider: no refund ${id}`);
    return refund;
  }

  /** The refunds of a payment intent, newest first (as the provider lists them). */
  of(paymentIntent: string): RefundObject[] {
    return [...this.refunds.values()].filter((r) => r.payment_intent === paymentIntent).reverse();
  }

  /** The refund's outcome at the provider changes (as it would, before it sends the event). */
  settle(id: string, status: RefundStatus, failureReason?: string): RefundObject {
    const refund = this.refund(id);
    refund.status = status;
    if (failureReason) refund.failure_reason = failureReason;
    return refund;
  }

  // ---- inbound events -------------------------------------------------------------------------

  /** `refund.updated` (or another refund event) with the refund as it stands, after `status` if given. */
  updated(
    id: string,
    options: { livemode: boolean; status?: RefundStatus; failureReason?: string; type?: string },
  ): CardEvent {
    const refund = options.status ? this.settle(id, options.status, options.failureReason) : this.refund(id);
    return this.#host.event(options.type ?? "refund.updated", { ...refund }, options);
  }

  /**
   * `charge.refunded` for a payment intent's charge; its refunds are listed unless `withRefunds`
   * is false (recent API versions leave them out of the charge).
   */
  chargeRefunded(paymentIntent: string, options: { livemode: boolean; withRefunds?: boolean }): CardEvent {
    const intent = this.#host.paymentIntents.get(paymentIntent);
    if (!intent) throw new Error(`fake card provider: no payment intent ${paymentIntent}`);
    const refunds = this.of(paymentIntent);
    const refunded = this.#refundedOf(paymentIntent);
    const charge: Json = {
      id: intent.charge,
      object: "charge",
      amount: intent.amount,
      amount_captured: intent.amount,
      amount_refunded: refunded,
      currency: "usd",
      paid: true,
      payment_intent: intent.id,
      refunded: refunded >= intent.amount,
      status: "succeeded",
      metadata: {},
      created: Math.floor(this.#host.now() / 1000),
      ...(options.withRefunds === false
        ? {}
        : {
            refunds: {
              object: "list",
              data: refunds.map((r) => ({ ...r })),
              has_more: false,
              total_count: refunds.length,
              url: `/v1/charges/${intent.charge}/refunds`,
            },
          }),
    };
    return this.#host.event("charge.refunded", charge, options);
  }

  /** What a payment intent has refunded or on its way back (refunds not failed or canceled). */
  #refundedOf(paymentIntent: string): number {
    return this.of(paymentIntent)
      .filter((r) => r.status !== "failed" && r.status !== "canceled")
      .reduce((sum, r) => sum + r.amount, 0);
  }

  // ---- the API: /v1/refunds ---------------------------------------------------------------------

  handle(method: string, url: URL, record: RecordedRequest, secretKey: string, reply: Reply, fail: Fail) {
    if (method === "GET" && url.pathname.startsWith("/v1/refunds/")) {
      const id = decodeURIComponent(url.pathname.slice("/v1/refunds/".length));
      const refund = this.refunds.get(id);
      if (!refund)
        return fail(404, "invalid_request_error", `No such refund: '${id}'`, { code: "resource_missing" });
      return reply(200, refund);
    }
    if (method === "GET") {
      const intent = url.searchParams.get("payment_intent");
      const data = intent ? this.of(intent) : [...this.refunds.values()].reverse();
      return reply(200, { object: "list", data, has_more: false, url: "/v1/refunds" });
    }
    if (method !== "POST" || url.pathname !== "/v1/refunds")
      return fail(404, "invalid_request_error", `Unrecognized request URL (${method}: ${url.pathname}).`);

    const { form } = record;
    const fingerprint = JSON.stringify(Object.entries(form).sort(([a], [b]) => (a < b ? -1 : 1)));
    const idemKey = record.idempotencyKey ? `${secretKey}\n${record.idempotencyKey}` : undefined;
    const before = idemKey ? this.#host.idempotency.get(idemKey) : undefined;
    if (before) {
      if (before.form !== fingerprint)
        return fail(
          400,
          "idempotency_error",
          `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${record.idempotencyKey}' if you meant to execute a different request.`,
        );
      return reply(before.status, before.body, { "idempotent-replayed": "true" });
    }
    const answer = this.#answers.shift() ?? "succeeded";
    // The provider's own advice on a 500 it stored: asking again under the key changes nothing.
    const lost = () =>
      reply(
        500,
        { error: { type: "api_error", message: "An unknown error occurred." } },
        { "stripe-should-retry": "false" },
      );
    if (answer === "error") return lost();

    const intent = form.payment_intent ? this.#host.paymentIntents.get(form.payment_intent) : undefined;
    if (!intent)
      return fail(404, "invalid_request_error", `No such payment_intent: '${form.payment_intent ?? ""}'`, {
        code: "resource_missing",
        param: "payment_intent",
      });
    const left = intent.amount - this.#refundedOf(intent.id);
    const amount = form.amount === undefined ? left : Number(form.amount);
    if (left <= 0)
      return fail(400, "invalid_request_error", `Charge ${intent.charge} has already been refunded.`, {
        code: "charge_already_refunded",
      });
    if (!Number.isInteger(amount) || amount <= 0)
      return fail(400, "invalid_request_error", "Invalid positive integer", { param: "amount" });
    if (amount > left)
      return fail(
        400,
        "invalid_request_error",
        `Refund amount ($${(amount / 100).toFixed(2)}) is greater than unrefunded amount on charge ($${(left / 100).toFixed(2)})`,
        { code: "amount_too_large", param: "amount" },
      );
    const metadata: Record<string, string> = {};
    for (const [k, v] of Object.entries(form)) {
      const m = /^metadata\[(.+)\]$/.exec(k);
      if (m?.[1]) metadata[m[1]] = v;
    }
    const status: RefundStatus = answer === "lost" ? "succeeded" : answer;
    const refund: RefundObject = {
      id: this.#host.randomId("re_"),
      object: "refund",
      amount,
      balance_transaction: null,
      charge: intent.charge,
      created: Math.floor(this.#host.now() / 1000),
      currency: "usd",
      metadata,
      payment_intent: intent.id,
      reason: form.reason ?? null,
      receipt_number: null,
      status,
      ...(status === "failed" ? { failure_reason: "expired_or_canceled_card" } : {}),
    };
    this.refunds.set(refund.id, refund);
    if (idemKey) this.#host.idempotency.set(idemKey, { form: fingerprint, status: 200, body: { ...refund } });
    if (answer === "lost") return lost();
    return reply(200, refund);
  }
}
