import { randomBytes } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import Stripe from "stripe";
import {
  FakeCardOnramp,
  type Fulfilment,
  ONRAMP_SESSIONS_PATH,
  type OnrampDelivery,
  type OnrampSessionObject,
  type OnrampStatus,
  type RetrieveHold,
} from "./fake-card-onramp.ts";
import {
  FakeCardRefunds,
  type IdempotentResult,
  type RefundAnswer,
  type RefundObject,
  type RefundStatus,
} from "./fake-card-refunds.ts";

export type {
  Fulfilment,
  OnrampDelivery,
  OnrampSessionObject,
  OnrampStatus,
  RetrieveHold,
} from "./fake-card-onramp.ts";
export type { RefundAnswer, RefundObject, RefundStatus } from "./fake-card-refunds.ts";

// A local stand-in for the hosted card checkout provider (the Stripe Checkout API), on 127.0.0.1.
// The service reaches it through the official `stripe` SDK (CARD_API_BASE → host/port/protocol),
// so what is recorded here is exactly what the SDK put on the wire: form-encoded bodies, the
// Idempotency-Key and Stripe-Version headers. It implements the three Checkout Session calls the
// service makes and the Refunds calls (create, retrieve, list by payment intent; their state,
// answers and events are in fake-card-refunds.ts), the crypto on-ramp session calls (create,
// retrieve; state, events and devnet deliveries in fake-card-onramp.ts), keeps idempotent results
// per account (secret key), and builds inbound events signed with the SDK's own test helper.

export const SESSION_MIN_SECONDS = 30 * 60;
export const SESSION_MAX_SECONDS = 24 * 60 * 60;

type Json = Record<string, unknown>;

export interface RecordedRequest {
  method: string;
  /** Path without the query string, e.g. `/v1/checkout/sessions/cs_test_…/expire`. */
  path: string;
  query: Record<string, string>;
  /** The form-encoded body as sent, flat keys: `line_items[0][price_data][unit_amount]`. */
  form: Record<string, string>;
  headers: IncomingHttpHeaders;
  idempotencyKey: string | undefined;
  stripeVersion: string | undefined;
  /** The secret key from `Authorization: Bearer …`. */
  secretKey: string | undefined;
  status: number;
  at: number;
}

export interface CheckoutSessionObject {
  id: string;
  object: "checkout.session";
  url: string | null;
  status: "open" | "complete" | "expired";
  payment_status: "unpaid" | "paid" | "no_payment_required";
  mode: string;
  client_reference_id: string | null;
  metadata: Record<string, string>;
  amount_subtotal: number | null;
  amount_total: number | null;
  currency: string | null;
  created: number;
  expires_at: number;
  success_url: string | null;
  cancel_url: string | null;
  payment_intent: string | null;
  /** As asked at creation (`payment_method_types[i]`); empty when the request named none. */
  payment_method_types: string[];
  livemode: boolean;
}

/** A payment intent a completed session was paid with, and its one charge. */
export interface PaymentIntentRecord {
  id: string;
  charge: string;
  amount: number;
  sessionId: string;
  livemode: boolean;
  /** What the checkout's `payment_intent_data[metadata]` gave it. */
  metadata: Record<string, string>;
}

export interface CardEvent {
  id: string;
  object: "event";
  api_version: string;
  created: number;
  type: string;
  livemode: boolean;
  pending_webhooks: number;
  request: { id: string | null; idempotency_key: string | null };
  data: { object: Json };
}

export interface SignedDelivery {
  event: CardEvent;
  /** The exact bytes to POST. */
  payload: string;
  /** The `Stripe-Signature` header value (`t=…,v1=…`). */
  header: string;
}

export interface LastPaymentError {
  code?: string;
  decline_code?: string;
  message?: string;
  type?: string;
}

const API_VERSION = "2026-05-27.dahlia";

function randomId(prefix: string, length = 24): string {
  const alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  const bytes = randomBytes(length);
  let out = prefix;
  for (const b of bytes) out += alphabet[b % alphabet.length];
  return out;
}

function stripeError(res: ServerResponse, status: number, type: string, message: string, extra: Json = {}) {
  send(res, status, { error: { type, message, ...extra } });
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": String(Buffer.byteLength(text)),
    "request-id": randomId("req_", 14),
    ...headers,
  });
  res.end(text);
}

export class FakeCardProvider {
  readonly requests: RecordedRequest[] = [];
  readonly sessions = new Map<string, CheckoutSessionObject>();
  readonly paymentIntents = new Map<string, PaymentIntentRecord>();
  /** By checkout session: the metadata its payment intent will carry (payment_intent_data). */
  readonly #intentMetadata = new Map<string, Record<string, string>>();
  /** Idempotent results per account: `${secretKey}\n${key}` → the parameters and the answer. */
  readonly #idempotency = new Map<string, IdempotentResult>();
  /** The refunds part: the /v1/refunds routes, their state and the refund events. */
  readonly #refunds = new FakeCardRefunds({
    requests: this.requests,
    paymentIntents: this.paymentIntents,
    idempotency: this.#idempotency,
    now: () => this.#now(),
    randomId,
    event: (type, object, options) => this.event(type, object, options),
  });
  readonly refunds: Map<string, RefundObject> = this.#refunds.refunds;
  /** The crypto on-ramp part: /v1/crypto/onramp_sessions, their state, events and deliveries. */
  readonly #onramp = new FakeCardOnramp({
    requests: this.requests,
    idempotency: this.#idempotency,
    now: () => this.#now(),
    randomId,
    event: (type, object, options) => this.event(type, object, options),
    sign: (event, secret) => this.sign(event, secret),
  });
  readonly onrampSessions: Map<string, OnrampSessionObject> = this.#onramp.sessions;
  #failCreates = 0;
  /** The provider's clock (epoch ms): tests that move the service's clock move this one too. */
  #now: () => number = Date.now;
  #server: Server | undefined;
  /** The SDK's webhook helpers (signing), the same code the service verifies with. */
  readonly #webhooks = new Stripe("sk_test_fake_provider_signing").webhooks;

  get url(): string {
    const address = this.#server?.address() as AddressInfo | undefined;
    if (!address) throw new Error("fake card provider not started");
    return `http://127.0.0.1:${address.port}`;
  }

  async start(): Promise<void> {
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        try {
          this.#handle(req.method ?? "GET", req.url ?? "/", req.headers, Buffer.concat(chunks), res);
        } catch (err) {
          stripeError(res, 500, "api_error", `fake provider crashed: ${(err as Error).message}`);
        }
      });
    });
    await new Promise<void>((resolve) => this.#server?.listen(0, "127.0.0.1", resolve));
  }

  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** The next `times` session creations answer 500 `api_error` (`Infinity`: until told otherwise; 0: stop). */
  failNextCreate(times = 1): void {
    this.#failCreates = times;
  }

  /** The next refund creations answer these, one each, in order; later ones succeed. */
  answerNextRefunds(...answers: RefundAnswer[]): void {
    this.#refunds.answerNext(...answers);
  }

  /** Forgets answers set with `answerNextRefunds` that no creation used. */
  resetRefundAnswers(): void {
    this.#refunds.resetAnswers();
  }

  /** The next `times` on-ramp session creations answer 500 `api_error` (the SDK retries twice). */
  failNextOnrampCreate(times = 1): void {
    this.#onramp.failNext(times);
  }

  /** The next on-ramp session creation is refused: 400 `invalid_request_error` with `message`. */
  refuseNextOnrampCreate(message: string, extra: Json = {}): void {
    this.#onramp.refuseNext(message, extra);
  }

  /** The next `times` retrieves of on-ramp session `id` answer 500 (3: one read, the SDK's retries too). */
  failOnrampRetrieve(id: string, times = 3): void {
    this.#onramp.failRetrieve(id, times);
  }

  /** The next retrieve of on-ramp session `id` answers 200 with `body` in place of the session. */
  answerOnrampRetrieve(id: string, body: Json): void {
    this.#onramp.answerRetrieve(id, body);
  }

  /** The next retrieve of on-ramp session `id` is read on arrival, answered on `release()`. */
  holdOnrampRetrieve(id: string): RetrieveHold {
    return this.#onramp.holdRetrieve(id);
  }

  /** On-ramp requests: `create` (POST /v1/crypto/onramp_sessions) or `retrieve`. */
  onrampCalls(kind: "create" | "retrieve" = "create"): RecordedRequest[] {
    return this.#onramp.calls(kind);
  }

  onrampSession(id: string): OnrampSessionObject {
    return this.#onramp.session(id);
  }

  /** The on-ramp session moves at the provider (before it sends the event); the updated session. */
  setOnrampStatus(
    id: string,
    status: OnrampStatus,
    facts: { transactionId?: string; destinationAmount?: string; sourceAmount?: string } = {},
  ): OnrampSessionObject {
    return this.#onramp.setStatus(id, status, facts);
  }

  /** `crypto.onramp_session_updated` with the session (of this fake, as it stands; or any object). */
  onrampUpdated(session: string | OnrampSessionObject, options: { livemode: boolean }): CardEvent {
    return this.#onramp.updated(session, options);
  }

  /** Delivers the session's crypto on the devnet, then its signed fulfillment_complete event. */
  fulfil(id: string, delivery: OnrampDelivery): Promise<Fulfilment & { blockNumber: bigint }> {
    return this.#onramp.fulfil(id, delivery);
  }

  /** As `fulfil`, the signed event first: the transaction is sent by `broadcast()`. */
  fulfilAnnouncedFirst(
    id: string,
    delivery: OnrampDelivery,
  ): Promise<Fulfilment & { broadcast(): Promise<bigint> }> {
    return this.#onramp.fulfilAnnouncedFirst(id, delivery);
  }

  /** Moves the provider's clock (session creation, expiry bounds); `undefined` restores real time. */
  setNow(date: Date | undefined): void {
    this.#now = date ? () => date.getTime() : Date.now;
  }

  /** Requests of one kind: `create`, `expire`, `retrieve`. */
  calls(kind: "create" | "expire" | "retrieve", sessionId?: string): RecordedRequest[] {
    return this.requests.filter((r) => {
      if (kind === "create") return r.method === "POST" && r.path === "/v1/checkout/sessions";
      const m = /^\/v1\/checkout\/sessions\/([^/]+)(\/expire)?$/.exec(r.path);
      if (!m || (sessionId !== undefined && decodeURIComponent(m[1] ?? "") !== sessionId)) return false;
      return kind === "expire" ? r.method === "POST" && m[2] === "/expire" : r.method === "GET" && !m[2];
    });
  }

  /** Refund requests: `create` (POST /v1/refunds), `retrieve` (GET /v1/refunds/:id), `list`. */
  refundCalls(kind: "create" | "retrieve" | "list"): RecordedRequest[] {
    return this.#refunds.calls(kind);
  }

  refund(id: string): RefundObject {
    return this.#refunds.refund(id);
  }

  /** The refunds of a payment intent, newest first (as the provider lists them). */
  refundsOf(paymentIntent: string): RefundObject[] {
    return this.#refunds.of(paymentIntent);
  }

  /** The refund's outcome at the provider changes (as it would, before it sends the event). */
  settleRefund(id: string, status: RefundStatus, failureReason?: string): RefundObject {
    return this.#refunds.settle(id, status, failureReason);
  }

  session(id: string): CheckoutSessionObject {
    const session = this.sessions.get(id);
    if (!session) throw new Error(`fake card provider: no session ${id}`);
    return session;
  }

  /** The payer paid: the session becomes complete (as the provider would, before it sends the event). */
  complete(id: string): CheckoutSessionObject {
    const session = this.session(id);
    if (session.status !== "open") throw new Error(`fake card provider: session ${id} is ${session.status}`);
    session.status = "complete";
    session.payment_status = "paid";
    session.payment_intent = this.#newIntent(session);
    return session;
  }

  /**
   * The payer finished the checkout with a delayed payment method (a bank debit): the session is
   * complete but `unpaid` until `async_payment_succeeded` or `async_payment_failed`.
   */
  completeUnpaid(id: string): CheckoutSessionObject {
    const session = this.session(id);
    if (session.status !== "open") throw new Error(`fake card provider: session ${id} is ${session.status}`);
    session.status = "complete";
    session.payment_status = "unpaid";
    session.payment_intent = this.#newIntent(session);
    return session;
  }

  #newIntent(session: CheckoutSessionObject): string {
    const id = randomId("pi_");
    this.paymentIntents.set(id, {
      id,
      charge: randomId("ch_"),
      amount: session.amount_total ?? 0,
      sessionId: session.id,
      livemode: session.livemode,
      metadata: { ...(this.#intentMetadata.get(session.id) ?? {}) },
    });
    return id;
  }

  /** The session ran out at the provider (the provider's own expiry). */
  expire(id: string): CheckoutSessionObject {
    const session = this.session(id);
    if (session.status !== "open") throw new Error(`fake card provider: session ${id} is ${session.status}`);
    session.status = "expired";
    session.url = null;
    return session;
  }

  // ---- inbound events -------------------------------------------------------------------------

  /** An event of any type with a unique `evt_…` id (snapshot payload: data.object is the object). */
  event(type: string, object: Json, options: { livemode: boolean; created?: number }): CardEvent {
    return {
      id: randomId("evt_"),
      object: "event",
      api_version: API_VERSION,
      created: options.created ?? Math.floor(this.#now() / 1000),
      type,
      livemode: options.livemode,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      data: { object: { ...object, livemode: options.livemode } },
    };
  }

  /**
   * `checkout.session.completed` for a session of this fake (marked complete if still open), or any
   * session object; `paymentStatus: "unpaid"` completes it as a delayed payment method does.
   */
  checkoutCompleted(
    session: string | CheckoutSessionObject,
    options: { livemode: boolean; paymentStatus?: "paid" | "unpaid" },
  ): CardEvent {
    const paymentStatus = options.paymentStatus ?? "paid";
    let object: CheckoutSessionObject;
    if (typeof session === "string") {
      object = this.session(session);
      if (object.status === "open") {
        if (paymentStatus === "paid") this.complete(session);
        else this.completeUnpaid(session);
      }
    } else {
      object = { ...session, status: "complete", payment_status: paymentStatus };
    }
    return this.event("checkout.session.completed", { ...object }, { livemode: options.livemode });
  }

  /** `checkout.session.async_payment_succeeded`: the delayed payment of a completed session arrived. */
  asyncPaymentSucceeded(session: string | CheckoutSessionObject, options: { livemode: boolean }): CardEvent {
    let object: CheckoutSessionObject;
    if (typeof session === "string") {
      object = this.session(session);
      if (object.status !== "complete")
        throw new Error(`fake card provider: session ${session} is ${object.status}`);
      object.payment_status = "paid";
    } else {
      object = { ...session, status: "complete", payment_status: "paid" };
    }
    return this.event("checkout.session.async_payment_succeeded", { ...object }, options);
  }

  /** `checkout.session.async_payment_failed`: the delayed payment of a completed session failed. */
  asyncPaymentFailed(session: string | CheckoutSessionObject, options: { livemode: boolean }): CardEvent {
    let object: CheckoutSessionObject;
    if (typeof session === "string") {
      object = this.session(session);
      if (object.status !== "complete")
        throw new Error(`fake card provider: session ${session} is ${object.status}`);
    } else {
      object = { ...session, status: "complete", payment_status: "unpaid" };
    }
    return this.event("checkout.session.async_payment_failed", { ...object }, options);
  }

  /** `checkout.session.expired` for a session of this fake (marked expired if still open), or any session object. */
  checkoutExpired(session: string | CheckoutSessionObject, options: { livemode: boolean }): CardEvent {
    let object: CheckoutSessionObject;
    if (typeof session === "string") {
      object = this.session(session);
      if (object.status === "open") this.expire(session);
    } else {
      object = { ...session, status: "expired", url: null };
    }
    return this.event("checkout.session.expired", { ...object }, options);
  }

  /** `payment_intent.payment_failed`: a PaymentIntent carrying `metadata.paymentId` and the decline. */
  paymentFailed(
    paymentId: string,
    options: { livemode: boolean; amount?: number; error?: LastPaymentError },
  ): CardEvent {
    const error: LastPaymentError = options.error ?? {
      code: "card_declined",
      decline_code: "insufficient_funds",
      message: "Your card has insufficient funds.",
      type: "card_error",
    };
    const intent = {
      id: randomId("pi_"),
      object: "payment_intent",
      amount: options.amount ?? 1000,
      currency: "usd",
      status: "requires_payment_method",
      metadata: { paymentId },
      last_payment_error: error,
      created: Math.floor(this.#now() / 1000),
    };
    return this.event("payment_intent.payment_failed", intent, options);
  }

  /** `refund.updated` (or another refund event) with the refund as it stands, after `status` if given. */
  refundUpdated(
    id: string,
    options: { livemode: boolean; status?: RefundStatus; failureReason?: string; type?: string },
  ): CardEvent {
    return this.#refunds.updated(id, options);
  }

  /**
   * `charge.refunded` for a payment intent's charge; its refunds are listed unless `withRefunds`
   * is false (recent API versions leave them out of the charge).
   */
  chargeRefunded(paymentIntent: string, options: { livemode: boolean; withRefunds?: boolean }): CardEvent {
    return this.#refunds.chargeRefunded(paymentIntent, options);
  }

  /** An unattached session object (the provider knows it; the service does not). */
  foreignSession(overrides: Partial<CheckoutSessionObject> = {}): CheckoutSessionObject {
    const now = Math.floor(this.#now() / 1000);
    const id = randomId("cs_test_", 58);
    return {
      id,
      object: "checkout.session",
      url: `https://checkout.fake-card.test/c/pay/${id}`,
      status: "open",
      payment_status: "unpaid",
      mode: "payment",
      client_reference_id: null,
      metadata: {},
      amount_subtotal: 1000,
      amount_total: 1000,
      currency: "usd",
      created: now,
      expires_at: now + 3600,
      success_url: "https://merchant.example/ok",
      cancel_url: null,
      payment_intent: null,
      payment_method_types: ["card"],
      livemode: false,
      ...overrides,
    };
  }

  /** Serializes and signs an event with the SDK's `webhooks.generateTestHeaderString`. */
  sign(event: CardEvent, secret: string, options: { timestamp?: number } = {}): SignedDelivery {
    const payload = JSON.stringify(event, null, 2);
    const header = this.#webhooks.generateTestHeaderString({
      payload,
      secret,
      ...(options.timestamp !== undefined ? { timestamp: options.timestamp } : {}),
    });
    return { event, payload, header };
  }

  // ---- the API ---------------------------------------------------------------------------------

  #handle(method: string, rawUrl: string, headers: IncomingHttpHeaders, body: Buffer, res: ServerResponse) {
    const url = new URL(rawUrl, "http://fake.invalid");
    const form = Object.fromEntries(new URLSearchParams(body.toString("utf8")));
    const auth = headers.authorization;
    const secretKey = typeof auth === "string" && auth.startsWith("Bearer ") ? auth.slice(7) : undefined;
    const header = (name: string) => {
      const v = headers[name];
      return Array.isArray(v) ? v[0] : v;
    };
    const record: RecordedRequest = {
      method,
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      form,
      headers,
      idempotencyKey: header("idempotency-key"),
      stripeVersion: header("stripe-version"),
      secretKey,
      status: 0,
      at: Date.now(),
    };
    this.requests.push(record);
    const reply = (status: number, payload: unknown, extra: Record<string, string> = {}) => {
      record.status = status;
      send(res, status, payload, extra);
    };
    const fail = (status: number, type: string, message: string, extra: Json = {}) =>
      reply(status, { error: { type, message, ...extra } });

    if (!secretKey || !/^(sk|rk)_(test|live)_/.test(secretKey)) {
      return fail(401, "invalid_request_error", "Invalid API Key provided");
    }

    if (method === "POST" && url.pathname === "/v1/checkout/sessions") {
      return this.#create(record, secretKey, reply, fail);
    }
    if (url.pathname === ONRAMP_SESSIONS_PATH || url.pathname.startsWith(`${ONRAMP_SESSIONS_PATH}/`)) {
      return this.#onramp.handle(method, url, record, secretKey, reply, fail);
    }
    if (url.pathname === "/v1/refunds" || url.pathname.startsWith("/v1/refunds/")) {
      return this.#refunds.handle(method, url, record, secretKey, reply, fail);
    }
    const intentPath = /^\/v1\/payment_intents\/([^/]+)$/.exec(url.pathname);
    if (method === "GET" && intentPath) {
      const intent = this.paymentIntents.get(decodeURIComponent(intentPath[1] ?? ""));
      if (!intent)
        return fail(404, "invalid_request_error", `No such payment_intent: '${intentPath[1]}'`, {
          code: "resource_missing",
        });
      return reply(200, {
        id: intent.id,
        object: "payment_intent",
        amount: intent.amount,
        currency: "usd",
        latest_charge: intent.charge,
        livemode: intent.livemode,
        metadata: intent.metadata,
        status: "succeeded",
      });
    }
    const match = /^\/v1\/checkout\/sessions\/([^/]+)(\/expire)?$/.exec(url.pathname);
    if (match) {
      const id = decodeURIComponent(match[1] ?? "");
      const session = this.sessions.get(id);
      if (!session) {
        return fail(404, "invalid_request_error", `No such checkout.session: '${id}'`, {
          code: "resource_missing",
          param: "session",
        });
      }
      if (method === "POST" && match[2]) {
        if (session.status !== "open") {
          return fail(
            400,
            "invalid_request_error",
            `Only Checkout Sessions with a status in ["open"] can be expired. This Checkout Session has a status of "${session.status}".`,
          );
        }
        session.status = "expired";
        session.url = null;
        return reply(200, session);
      }
      if (method === "GET" && !match[2]) return reply(200, session);
    }
    return fail(404, "invalid_request_error", `Unrecognized request URL (${method}: ${url.pathname}).`);
  }

  #create(
    record: RecordedRequest,
    secretKey: string,
    reply: (status: number, payload: unknown, extra?: Record<string, string>) => void,
    fail: (status: number, type: string, message: string, extra?: Json) => void,
  ) {
    const { form } = record;
    const fingerprint = JSON.stringify(Object.entries(form).sort(([a], [b]) => (a < b ? -1 : 1)));
    const idemKey = record.idempotencyKey ? `${secretKey}\n${record.idempotencyKey}` : undefined;
    if (idemKey) {
      const before = this.#idempotency.get(idemKey);
      if (before) {
        if (before.form !== fingerprint) {
          return fail(
            400,
            "idempotency_error",
            `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${record.idempotencyKey}' if you meant to execute a different request.`,
          );
        }
        return reply(before.status, before.body, { "idempotent-replayed": "true" });
      }
    }
    if (this.#failCreates > 0) {
      this.#failCreates -= 1;
      // Not stored under the idempotency key: the retry reaches the fake again.
      return fail(500, "api_error", "An unknown error occurred on the fake card provider.");
    }

    const now = Math.floor(this.#now() / 1000);
    if (form.mode !== "payment")
      return fail(400, "invalid_request_error", "Missing or invalid mode", { param: "mode" });
    const unitAmount = Number(form["line_items[0][price_data][unit_amount]"]);
    const quantity = Number(form["line_items[0][quantity]"] ?? "1");
    const currency = form["line_items[0][price_data][currency]"];
    if (!Number.isInteger(unitAmount) || unitAmount < 0 || !currency) {
      return fail(400, "invalid_request_error", "Invalid line_items[0][price_data]", { param: "line_items" });
    }
    if (currency === "usd" && unitAmount * quantity < 50) {
      return fail(
        400,
        "invalid_request_error",
        "The Checkout Session's total amount due must add up to at least $0.50 usd",
        {
          code: "amount_too_small",
        },
      );
    }
    let expiresAt = now + SESSION_MAX_SECONDS;
    if (form.expires_at !== undefined) {
      expiresAt = Number(form.expires_at);
      if (
        !Number.isInteger(expiresAt) ||
        expiresAt < now + SESSION_MIN_SECONDS ||
        expiresAt > now + SESSION_MAX_SECONDS
      ) {
        return fail(
          400,
          "invalid_request_error",
          "The `expires_at` timestamp must be between 30 minutes and 24 hours from Checkout Session creation.",
          { param: "expires_at" },
        );
      }
    }
    const metadata: Record<string, string> = {};
    const intentMetadata: Record<string, string> = {};
    const paymentMethodTypes: string[] = [];
    for (const [k, v] of Object.entries(form)) {
      const m = /^metadata\[(.+)\]$/.exec(k);
      if (m?.[1]) metadata[m[1]] = v;
      const pi = /^payment_intent_data\[metadata\]\[(.+)\]$/.exec(k);
      if (pi?.[1]) intentMetadata[pi[1]] = v;
      const t = /^payment_method_types\[(\d+)\]$/.exec(k);
      if (t?.[1]) paymentMethodTypes[Number(t[1])] = v;
    }
    const livemode = secretKey.includes("_live_");
    const id = randomId(livemode ? "cs_live_" : "cs_test_", 58);
    const session: CheckoutSessionObject = {
      id,
      object: "checkout.session",
      url: `https://checkout.fake-card.test/c/pay/${id}`,
      status: "open",
      payment_status: "unpaid",
      mode: "payment",
      client_reference_id: form.client_reference_id ?? null,
      metadata,
      amount_subtotal: unitAmount * quantity,
      amount_total: unitAmount * quantity,
      currency,
      created: now,
      expires_at: expiresAt,
      success_url: form.success_url ?? null,
      cancel_url: form.cancel_url ?? null,
      payment_intent: null,
      payment_method_types: paymentMethodTypes,
      livemode,
    };
    this.sessions.set(id, session);
    this.#intentMetadata.set(id, intentMetadata);
    // The stored answer is a snapshot: a replay returns the session as it was created.
    if (idemKey) this.#idempotency.set(idemKey, { form: fingerprint, status: 200, body: { ...session } });
    return reply(200, session);
  }
}
