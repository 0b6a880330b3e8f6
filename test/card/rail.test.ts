import { createHmac, randomUUID, timingSafeEqual } from "node:crypto";
import type { LightMyRequestResponse } from "fastify";
import { sql } from "kysely";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CARD_PROVIDER_FAILED } from "../../src/modules/card/provider.ts";
import { expireDuePayments } from "../../src/modules/payments/expiry.ts";
import { WebhookDispatcher } from "../../src/modules/webhooks/dispatcher.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import {
  type CardEvent,
  FakeCardProvider,
  SESSION_MAX_SECONDS,
  SESSION_MIN_SECONDS,
  type SignedDelivery,
} from "../support/fake-card-provider.ts";
import { WebhookReceiver } from "../support/receiver.ts";

// Integration tests of the card rail (interface parts 3, 4.1, 4.4, 4.9, 6; decisions D5, D13):
// the real app on a real database talks through the official stripe SDK to a local fake
// provider (CARD_API_BASE), and inbound events are signed with the SDK's own test helper.

type Json = Record<string, unknown>;

const LIVE_WHSEC = "whsec_live_destination_secret_0123456789abcdef";
const SANDBOX_WHSEC = "whsec_sandbox_destination_secret_0123456789ab";
const LIVE_SK = "sk_test_liveEnvironmentKey0123456789";
const SANDBOX_SK = "sk_test_sandboxEnvironmentKey0123456789";
const API_VERSION = "2026-05-27.dahlia";
const RATE_LIMITS = { RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" };
const BASE = "http://pay.test";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const fake = new FakeCardProvider();
let t: TestApp;

beforeAll(async () => {
  await fake.start();
  // Live: secret key + webhook secret. Sandbox: a secret key but no webhook secret, so sandbox
  // events are "not configured" and sandbox card payments show they never reach the provider.
  t = await startTestApp({
    ...RATE_LIMITS,
    WEBHOOK_ALLOW_PRIVATE: "true",
    CARD_SECRET_KEY_LIVE: LIVE_SK,
    CARD_WEBHOOK_SECRET_LIVE: LIVE_WHSEC,
    CARD_SECRET_KEY_SANDBOX: SANDBOX_SK,
    CARD_API_BASE: fake.url,
  });
});

afterEach(() => {
  fake.failNextCreate(0);
  fake.setNow(undefined);
  t?.setNow(undefined);
});

afterAll(async () => {
  await t?.close();
  await fake.stop();
});

// ---- helpers -------------------------------------------------------------------------------

function createPayment(
  key: string,
  body: Json,
  headers: Record<string, string> = {},
  app: TestApp = t,
): Promise<LightMyRequestResponse> {
  return app.request({
    method: "POST",
    url: "/api/v1/payments",
    headers: { ...bearer(key), ...headers },
    payload: body,
  });
}

interface LiveCard {
  body: Json;
  payment: Json;
  id: string;
  sessionId: string;
}

async function createLiveCard(
  ws: CreatedWorkspace,
  extra: Json = {},
  headers: Record<string, string> = {},
): Promise<LiveCard> {
  const res = await createPayment(
    ws.liveKey,
    { paymentMethod: "card", tokenSymbol: "USD", amount: "10.50", ...extra },
    headers,
  );
  expect(res.statusCode, res.body).toBe(201);
  const body = res.json() as Json;
  const payment = body.payment as Json;
  return { body, payment, id: payment.id as string, sessionId: body.cardCheckoutSessionId as string };
}

async function getPayment(key: string, id: string, app: TestApp = t): Promise<Json> {
  const res = await app.request({ method: "GET", url: `/api/v1/payments/${id}`, headers: bearer(key) });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().payment as Json;
}

function cancel(key: string, id: string): Promise<LightMyRequestResponse> {
  return t.request({ method: "POST", url: `/api/v1/payments/${id}/cancel`, headers: bearer(key) });
}

function postWebhook(
  payload: string,
  signature: string | undefined,
  app: TestApp = t,
): Promise<LightMyRequestResponse> {
  return app.request({
    method: "POST",
    url: "/api/webhooks/card",
    headers: {
      "content-type": "application/json",
      ...(signature === undefined ? {} : { "stripe-signature": signature }),
    },
    payload,
  });
}

/** Signs `event` with `secret` (the SDK's helper) and POSTs it as the provider would. */
function deliver(
  event: CardEvent,
  secret = LIVE_WHSEC,
  options: { timestamp?: number; app?: TestApp } = {},
): Promise<LightMyRequestResponse> {
  const signed = fake.sign(event, secret, { timestamp: options.timestamp });
  return postWebhook(signed.payload, signed.header, options.app);
}

function resend(signed: SignedDelivery): Promise<LightMyRequestResponse> {
  return postWebhook(signed.payload, signed.header);
}

async function outboxRows(workspaceId: string, environment: "sandbox" | "live" = "live") {
  return t.database.db
    .selectFrom("outbox_events")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .where("environment", "=", environment)
    .orderBy("id", "asc")
    .execute();
}

async function outboxTypes(workspaceId: string, environment: "sandbox" | "live" = "live") {
  return (await outboxRows(workspaceId, environment)).map((r) => r.event_type);
}

async function cardEventRows(eventId: string, app: TestApp = t) {
  return app.database.db.selectFrom("card_events").selectAll().where("event_id", "=", eventId).execute();
}

async function paymentRows(workspaceId: string, app: TestApp = t) {
  return app.database.db.selectFrom("payments").selectAll().where("workspace_id", "=", workspaceId).execute();
}

const createsFor = (paymentId: string) =>
  fake.calls("create").filter((r) => r.form.client_reference_id === paymentId);

function expectJsonError(res: LightMyRequestResponse, status: number, error?: string): Json {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers["content-type"]).toMatch(/^application\/json/);
  const body = res.json() as Json;
  expect(typeof body.error).toBe("string");
  if (error !== undefined) expect(body.error).toBe(error);
  return body;
}

// ---- create ----------------------------------------------------------------------------------

describe("POST /api/v1/payments — live card", () => {
  it("creates the provider session first and answers 201 with checkoutUrl, session id and a pending payment", async () => {
    const ws = await createWorkspace(t);
    const before = Math.floor(Date.now() / 1000);
    const created = await createLiveCard(ws, {
      returnUrl: "https://merchant.example/thanks?order=7",
      cancelUrl: "https://merchant.example/cart",
      description: "Order 7",
    });
    const after = Math.floor(Date.now() / 1000);

    // The response of part 4.1 for the live card rail.
    expect(created.body.paymentMethod).toBe("card");
    expect(created.body.paymentProvider).toBe("card");
    expect(created.body).not.toHaveProperty("receivingAddress");
    expect(created.id).toMatch(UUID);
    expect(created.payment).toMatchObject({
      id: created.id,
      status: "pending",
      paymentProvider: "card",
      tokenSymbol: "USD",
      grossAmount: "10.50",
      feeAmount: "0.16",
      netAmount: "10.34",
      environment: "live",
      description: "Order 7",
    });
    expect(created.body.paymentUrl).toBe(`${BASE}/pay/${created.id}`);
    expect(created.sessionId).toMatch(/^cs_test_/);
    const session = fake.session(created.sessionId);
    expect(created.body.checkoutUrl).toBe(session.url);

    // What the provider received through the SDK.
    const creates = createsFor(created.id);
    expect(creates).toHaveLength(1);
    const [req] = creates;
    if (!req) throw new Error("no create request");
    expect(req.secretKey).toBe(LIVE_SK);
    expect(req.stripeVersion).toBe(API_VERSION);
    expect(req.headers["content-type"]).toMatch(/^application\/x-www-form-urlencoded/);
    expect(req.form).toMatchObject({
      mode: "payment",
      "line_items[0][quantity]": "1",
      "line_items[0][price_data][unit_amount]": "1050",
      "line_items[0][price_data][currency]": "usd",
      "line_items[0][price_data][product_data][name]": "Order 7",
      success_url: "https://merchant.example/thanks?order=7",
      cancel_url: "https://merchant.example/cart",
      client_reference_id: created.id,
      "metadata[paymentId]": created.id,
    });
    // Default expiry: 60 minutes, inside the provider's 30 min – 24 h window.
    const expiresAt = Number(req.form.expires_at);
    expect(expiresAt).toBeGreaterThanOrEqual(before + 3600 - 5);
    expect(expiresAt).toBeLessThanOrEqual(after + 3600 + 5);
    expect(expiresAt).toBeGreaterThanOrEqual(before + SESSION_MIN_SECONDS);
    expect(expiresAt).toBeLessThanOrEqual(after + SESSION_MAX_SECONDS);
    expect(session).toMatchObject({
      status: "open",
      amount_total: 1050,
      currency: "usd",
      client_reference_id: created.id,
      metadata: { paymentId: created.id },
    });

    // The stored payment: pending, pointing at its session.
    const read = await getPayment(ws.liveKey, created.id);
    expect(read).toMatchObject({
      id: created.id,
      status: "pending",
      paymentProvider: "card",
      checkoutUrl: session.url,
      cardCheckoutSessionId: created.sessionId,
    });
    expect(await outboxTypes(ws.id)).toEqual(["payment.created"]);
    const [createdEvent] = await outboxRows(ws.id);
    expect(createdEvent?.payload).toMatchObject({ status: "pending" });
  });

  it.each([["successUrl"], ["merchantReturnUrl"]])(
    "uses the %s alias as the checkout success URL and the hosted page as the default cancel URL",
    async (alias) => {
      const ws = await createWorkspace(t);
      const created = await createLiveCard(ws, { [alias]: "https://merchant.example/done" });
      const [req] = createsFor(created.id);
      expect(req?.form.success_url).toBe("https://merchant.example/done");
      expect(req?.form.cancel_url).toBe(`${BASE}/pay/${created.id}`);
    },
  );

  it("forwards the merchant's Idempotency-Key to the provider, and a replay creates no second session", async () => {
    const ws = await createWorkspace(t);
    const key = `order-${Date.now()}-idem`;
    const body = { paymentMethod: "card", tokenSymbol: "USD", amount: "12.00" };
    const first = await createPayment(ws.liveKey, body, { "idempotency-key": key });
    expect(first.statusCode, first.body).toBe(201);
    const id = first.json().payment.id as string;
    const creates = createsFor(id);
    expect(creates).toHaveLength(1);
    expect(creates[0]?.idempotencyKey).toContain(key);

    const sessionsBefore = fake.sessions.size;
    const replay = await createPayment(ws.liveKey, body, { "idempotency-key": key });
    expect(replay.statusCode, replay.body).toBe(201);
    expect(replay.headers["idempotent-replayed"]).toBe("true");
    expect(replay.json()).toEqual(first.json());
    expect(fake.sessions.size).toBe(sessionsBefore);
    expect((await paymentRows(ws.id)).length).toBe(1);

    // Same key, different body: 409 with the existing payment, and no new session.
    const conflict = await createPayment(
      ws.liveKey,
      { ...body, amount: "13.00" },
      { "idempotency-key": key },
    );
    expectJsonError(conflict, 409, "Idempotency key already used");
    expect(conflict.json().payment.id).toBe(id);
    expect(fake.sessions.size).toBe(sessionsBefore);
  });

  it("scopes Idempotency-Key per workspace: two workspaces using one key get two payments and two sessions (D5)", async () => {
    const a = await createWorkspace(t);
    const b = await createWorkspace(t);
    const key = `shared-key-${Date.now()}`;
    const body = { paymentMethod: "card", tokenSymbol: "USD", amount: "20.00" };
    const ra = await createPayment(a.liveKey, body, { "idempotency-key": key });
    expect(ra.statusCode, ra.body).toBe(201);
    const rb = await createPayment(b.liveKey, body, { "idempotency-key": key });
    expect(rb.statusCode, rb.body).toBe(201);
    expect(rb.json().payment.id).not.toBe(ra.json().payment.id);
    expect(rb.json().cardCheckoutSessionId).not.toBe(ra.json().cardCheckoutSessionId);
    expect(fake.session(rb.json().cardCheckoutSessionId).client_reference_id).toBe(rb.json().payment.id);
  });

  it("pins the checkout to the card payment method, so a completed session is a paid one", async () => {
    const ws = await createWorkspace(t);
    const created = await createLiveCard(ws);
    const [req] = createsFor(created.id);
    const methodFields = Object.entries(req?.form ?? {}).filter(([k]) =>
      k.startsWith("payment_method_types"),
    );
    expect(methodFields).toEqual([["payment_method_types[0]", "card"]]);
    expect(fake.session(created.sessionId).payment_method_types).toEqual(["card"]);
  });

  it("creates a new payment and a new session when an Idempotency-Key comes back after 24 h", async () => {
    const ws = await createWorkspace(t);
    const key = `order-${randomUUID()}`;
    const body = { paymentMethod: "card", tokenSymbol: "USD", amount: "15.00" };
    const start = new Date();
    const at = (hours: number) => {
      const moved = new Date(start.getTime() + hours * 3_600_000);
      t.setNow(moved);
      fake.setNow(moved);
    };
    at(0);
    const first = await createPayment(ws.liveKey, body, { "idempotency-key": key });
    expect(first.statusCode, first.body).toBe(201);

    // 23 h later: still the original answer, and the provider is not asked again.
    at(23);
    const createsBefore = fake.calls("create").length;
    const within = await createPayment(ws.liveKey, body, { "idempotency-key": key });
    expect(within.statusCode, within.body).toBe(201);
    expect(within.headers["idempotent-replayed"]).toBe("true");
    expect(within.json()).toEqual(first.json());
    expect(fake.calls("create").length).toBe(createsBefore);

    // 25 h later the key is free again: a new payment with a session of its own, not the old one.
    at(25);
    const later = await createPayment(ws.liveKey, body, { "idempotency-key": key });
    expect(later.statusCode, later.body).toBe(201);
    expect(later.headers["idempotent-replayed"]).toBeUndefined();
    const laterId = later.json().payment.id as string;
    expect(laterId).not.toBe(first.json().payment.id);
    expect(later.json().cardCheckoutSessionId).not.toBe(first.json().cardCheckoutSessionId);
    const [laterCreate] = createsFor(laterId);
    const [firstCreate] = createsFor(first.json().payment.id);
    expect(laterCreate?.status).toBe(200);
    expect(laterCreate?.idempotencyKey).toBeTruthy();
    expect(laterCreate?.idempotencyKey).not.toBe(firstCreate?.idempotencyKey);
    expect(fake.session(later.json().cardCheckoutSessionId).client_reference_id).toBe(laterId);
    expect((await paymentRows(ws.id)).map((r) => r.id).sort()).toEqual(
      [first.json().payment.id, laterId].sort(),
    );

    // The key now answers with the new payment, and 25 h after that with a third one.
    const replay = await createPayment(ws.liveKey, body, { "idempotency-key": key });
    expect(replay.headers["idempotent-replayed"]).toBe("true");
    expect(replay.json().payment.id).toBe(laterId);
    at(50);
    const third = await createPayment(ws.liveKey, body, { "idempotency-key": key });
    expect(third.statusCode, third.body).toBe(201);
    expect(third.headers["idempotent-replayed"]).toBeUndefined();
    expect(new Set([first.json().payment.id, laterId, third.json().payment.id]).size).toBe(3);
  });

  it("keeps the session's expires_at inside the provider's 30 min – 24 h window", async () => {
    const ws = await createWorkspace(t);
    // Under 31 minutes a live card payment is refused (its checkout would outlive it); see below.
    for (const expiresInMinutes of [31, 45, 10_080]) {
      const now = Math.floor(Date.now() / 1000);
      const created = await createLiveCard(ws, { expiresInMinutes });
      const [req] = createsFor(created.id);
      const expiresAt = Number(req?.form.expires_at);
      expect(expiresAt, `expiresInMinutes ${expiresInMinutes}`).toBeGreaterThanOrEqual(
        now + SESSION_MIN_SECONDS,
      );
      expect(expiresAt, `expiresInMinutes ${expiresInMinutes}`).toBeLessThanOrEqual(
        now + SESSION_MAX_SECONDS + 2,
      );
      if (expiresInMinutes === 45) expect(Math.abs(expiresAt - (now + 45 * 60))).toBeLessThanOrEqual(5);
    }
  });

  it("enforces the 0.50 USD minimum: 0.49 → 400 without a provider call, 0.50 → 50 cents", async () => {
    const ws = await createWorkspace(t);
    const createsBefore = fake.calls("create").length;
    const low = await createPayment(ws.liveKey, {
      paymentMethod: "card",
      tokenSymbol: "USD",
      amount: "0.49",
    });
    expectJsonError(low, 400);
    expect(fake.calls("create").length).toBe(createsBefore);
    expect(await paymentRows(ws.id)).toHaveLength(0);

    const ok = await createLiveCard(ws, { amount: "0.50" });
    expect(ok.payment.grossAmount).toBe("0.50");
    expect(createsFor(ok.id)[0]?.form["line_items[0][price_data][unit_amount]"]).toBe("50");
  });

  it("answers 502 JSON when the provider fails, writes nothing, and does not burn the Idempotency-Key", async () => {
    const ws = await createWorkspace(t);
    fake.failNextCreate(Number.POSITIVE_INFINITY);
    const key = `failing-${Date.now()}`;
    const body = { paymentMethod: "card", tokenSymbol: "USD", amount: "10.50" };
    const res = await createPayment(ws.liveKey, body, { "idempotency-key": key });
    // The provider's own message is the operator's to read in the logs, not the tenant's.
    expect(expectJsonError(res, 502, "Card provider error")).toEqual({
      error: "Card provider error",
      detail: CARD_PROVIDER_FAILED,
    });
    expect(res.body).not.toContain("fake card provider");
    expect(await paymentRows(ws.id)).toHaveLength(0);
    expect(await outboxRows(ws.id)).toHaveLength(0);
    const keys = await t.database.db
      .selectFrom("idempotency_keys")
      .selectAll()
      .where("workspace_id", "=", ws.id)
      .execute();
    expect(keys).toHaveLength(0);

    // The provider recovers: the same key now creates the payment.
    fake.failNextCreate(0);
    const retry = await createPayment(ws.liveKey, body, { "idempotency-key": key });
    expect(retry.statusCode, retry.body).toBe(201);
    expect(retry.headers["idempotent-replayed"]).toBeUndefined();
    expect(await paymentRows(ws.id)).toHaveLength(1);
  });

  it("survives one transient provider 500: the retry carries the same Idempotency-Key and one session results", async () => {
    const ws = await createWorkspace(t);
    fake.failNextCreate(1);
    const created = await createLiveCard(ws, { amount: "7.25" });
    const attempts = fake.calls("create").filter((r) => r.form["metadata[paymentId]"] === created.id);
    expect(attempts.map((r) => r.status)).toEqual([500, 200]);
    expect(attempts[0]?.idempotencyKey).toBeTruthy();
    expect(attempts[1]?.idempotencyKey).toBe(attempts[0]?.idempotencyKey);
    expect(await paymentRows(ws.id)).toHaveLength(1);
  });

  it("completes sandbox card payments at once with no provider call (D5)", async () => {
    const ws = await createWorkspace(t);
    const requestsBefore = fake.requests.length;
    const res = await createPayment(ws.testKey, {
      paymentMethod: "card",
      tokenSymbol: "USD",
      amount: "10.50",
      returnUrl: "https://merchant.example/thanks",
    });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json() as Json;
    expect(body.paymentMethod).toBe("card");
    expect(body.paymentProvider).toBe("card");
    expect(body).not.toHaveProperty("checkoutUrl");
    expect(body).not.toHaveProperty("cardCheckoutSessionId");
    expect(body.payment).toMatchObject({
      status: "forwarded",
      environment: "sandbox",
      paymentProvider: "card",
    });
    expect(fake.requests.length).toBe(requestsBefore);
    expect(await outboxTypes(ws.id, "sandbox")).toEqual(["payment.created", "payment.forwarded"]);
  });

  it("keeps checkout session ids unique with an index that payments without a session stay out of", async () => {
    const ws = await createWorkspace(t);
    const card = await createLiveCard(ws);
    const row = (await paymentRows(ws.id)).find((r) => r.id === card.id);
    if (!row) throw new Error("card payment not written");
    const db = t.database.db;

    // A second payment naming the same session is refused by the database itself …
    await expect(
      db
        .insertInto("payments")
        .values({
          ...row,
          id: randomUUID(),
          metadata: "{}",
          last_payment_error: null,
          split_snapshot: null,
          settlement: null,
        })
        .execute(),
    ).rejects.toThrow(/unique constraint "payments_card_checkout_session"/);
    // … while any number of payments without one are written.
    for (let i = 0; i < 3; i++)
      expect((await createPayment(ws.testKey, { tokenSymbol: "USDC", amount: "1" })).statusCode).toBe(201);

    const { rows } = await sql<{ predicate: string | null }>`
      SELECT pg_get_expr(indpred, indrelid) AS predicate FROM pg_index
      WHERE indexrelid = 'payments_card_checkout_session'::regclass AND indisunique`.execute(db);
    expect(rows).toEqual([{ predicate: "(card_checkout_session_id IS NOT NULL)" }]);
  });
});

// ---- inbound webhook --------------------------------------------------------------------------

describe("POST /api/webhooks/card — lifecycle", () => {
  it("checkout.session.completed → forwarded with payment.forwarded", async () => {
    const ws = await createWorkspace(t);
    const card = await createLiveCard(ws);
    const event = fake.checkoutCompleted(card.sessionId, { livemode: true });
    const res = await deliver(event);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ received: true });

    const read = await getPayment(ws.liveKey, card.id);
    expect(read.status).toBe("forwarded");
    const rows = await outboxRows(ws.id);
    expect(rows.map((r) => r.event_type)).toEqual(["payment.created", "payment.forwarded"]);
    expect(rows[1]?.payload).toMatchObject({ id: card.id, status: "forwarded", paymentProvider: "card" });
    expect(await cardEventRows(event.id)).toHaveLength(1);

    const verify = await t.request({
      method: "POST",
      url: "/api/v1/verify",
      headers: bearer(ws.liveKey),
      payload: { paymentId: card.id },
    });
    expect(verify.statusCode).toBe(200);
    expect(verify.json().verified).toBe(true);
  });

  it("checkout.session.expired → expired with payment.expired", async () => {
    const ws = await createWorkspace(t);
    const card = await createLiveCard(ws);
    const res = await deliver(fake.checkoutExpired(card.sessionId, { livemode: true }));
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ received: true });
    expect((await getPayment(ws.liveKey, card.id)).status).toBe("expired");
    const rows = await outboxRows(ws.id);
    expect(rows.map((r) => r.event_type)).toEqual(["payment.created", "payment.expired"]);
    expect(rows[1]?.payload).toMatchObject({ id: card.id, status: "expired" });
  });

  it("payment_intent.payment_failed → stays pending with lastPaymentError; the payer can still complete", async () => {
    const ws = await createWorkspace(t);
    const card = await createLiveCard(ws);
    const res = await deliver(
      fake.paymentFailed(card.id, {
        livemode: true,
        amount: 1050,
        error: {
          code: "card_declined",
          decline_code: "insufficient_funds",
          message: "Your card has insufficient funds.",
          type: "card_error",
        },
      }),
    );
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ received: true });

    const read = await getPayment(ws.liveKey, card.id);
    expect(read.status).toBe("pending");
    expect(read.lastPaymentError).toMatchObject({
      code: "card_declined",
      declineCode: "insufficient_funds",
      message: "Your card has insufficient funds.",
      type: "card_error",
    });
    expect(await outboxTypes(ws.id)).toEqual(["payment.created"]);

    // The payer retries inside the same checkout and succeeds.
    const done = await deliver(fake.checkoutCompleted(card.sessionId, { livemode: true }));
    expect(done.json()).toEqual({ received: true });
    expect((await getPayment(ws.liveKey, card.id)).status).toBe("forwarded");
    expect(await outboxTypes(ws.id)).toEqual(["payment.created", "payment.forwarded"]);
  });
});

describe("POST /api/webhooks/card — delayed payment methods", () => {
  async function outcomeOf(eventId: string): Promise<string | undefined> {
    return (await cardEventRows(eventId))[0]?.outcome;
  }

  it("keeps a payment pending when its session completes unpaid, and forwards it on async_payment_succeeded", async () => {
    const ws = await createWorkspace(t);
    const card = await createLiveCard(ws);
    const completed = fake.checkoutCompleted(card.sessionId, { livemode: true, paymentStatus: "unpaid" });
    const res = await deliver(completed);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ received: true });
    expect((await getPayment(ws.liveKey, card.id)).status).toBe("pending");
    expect(await outboxTypes(ws.id)).toEqual(["payment.created"]);
    expect(await outcomeOf(completed.id)).toMatch(/unpaid/);

    const succeeded = fake.asyncPaymentSucceeded(card.sessionId, { livemode: true });
    const paid = await deliver(succeeded);
    expect(paid.statusCode, paid.body).toBe(200);
    expect(paid.json()).toEqual({ received: true });
    const read = await getPayment(ws.liveKey, card.id);
    expect(read.status).toBe("forwarded");
    const rows = await outboxRows(ws.id);
    expect(rows.map((r) => r.event_type)).toEqual(["payment.created", "payment.forwarded"]);
    expect(rows[1]?.payload).toMatchObject({ id: card.id, status: "forwarded" });
    expect(await outcomeOf(succeeded.id)).toBe("applied");

    // Replayed, it is a duplicate and changes nothing.
    expect((await deliver(succeeded)).json()).toEqual({ received: true, duplicate: true });
    expect(await outboxTypes(ws.id)).toEqual(["payment.created", "payment.forwarded"]);
  });

  it("fails the payment with payment.failed and a reason on async_payment_failed; nothing moves it afterwards", async () => {
    const ws = await createWorkspace(t);
    const card = await createLiveCard(ws);
    await deliver(fake.checkoutCompleted(card.sessionId, { livemode: true, paymentStatus: "unpaid" }));
    const failed = fake.asyncPaymentFailed(card.sessionId, { livemode: true });
    const res = await deliver(failed);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ received: true });

    const read = await getPayment(ws.liveKey, card.id);
    expect(read.status).toBe("failed");
    expect(read.failureReason).toMatch(/async_payment_failed/);
    const rows = await outboxRows(ws.id);
    expect(rows.map((r) => r.event_type)).toEqual(["payment.created", "payment.failed"]);
    expect(rows[1]?.payload).toMatchObject({
      id: card.id,
      status: "failed",
      failureReason: read.failureReason,
    });
    const verify = await t.request({
      method: "POST",
      url: "/api/v1/verify",
      headers: bearer(ws.liveKey),
      payload: { paymentId: card.id },
    });
    expect(verify.json().verified).toBe(false);

    // A late success (another event id) finds a final payment.
    const session = fake.session(card.sessionId);
    const late = fake.asyncPaymentSucceeded({ ...session }, { livemode: true });
    expect((await deliver(late)).json()).toEqual({ received: true });
    expect(await outcomeOf(late.id)).toBe("ignored: payment is failed");
    expect((await getPayment(ws.liveKey, card.id)).status).toBe("failed");
    expect(await outboxTypes(ws.id)).toEqual(["payment.created", "payment.failed"]);
  });

  it("is safe out of order: success before the unpaid completion forwards once; async events after expiry change nothing", async () => {
    const ws = await createWorkspace(t);
    const card = await createLiveCard(ws);
    const session = fake.session(card.sessionId);
    const completed = fake.checkoutCompleted({ ...session }, { livemode: true, paymentStatus: "unpaid" });
    const succeeded = fake.asyncPaymentSucceeded({ ...session }, { livemode: true });
    expect((await deliver(succeeded)).json()).toEqual({ received: true });
    expect((await deliver(completed)).json()).toEqual({ received: true });
    expect((await getPayment(ws.liveKey, card.id)).status).toBe("forwarded");
    expect(await outboxTypes(ws.id)).toEqual(["payment.created", "payment.forwarded"]);

    const other = await createLiveCard(ws);
    const otherSession = fake.session(other.sessionId);
    await deliver(fake.checkoutExpired(other.sessionId, { livemode: true }));
    for (const event of [
      fake.asyncPaymentSucceeded({ ...otherSession }, { livemode: true }),
      fake.asyncPaymentFailed({ ...otherSession }, { livemode: true }),
    ]) {
      expect((await deliver(event)).json()).toEqual({ received: true });
      expect(await outcomeOf(event.id)).toBe("ignored: payment is expired");
    }
    const read = await getPayment(ws.liveKey, other.id);
    expect(read.status).toBe("expired");
    expect(read.failureReason).toBeNull();
  });
});

describe("POST /api/webhooks/card — signatures", () => {
  it("refuses a bad signature with 400 Invalid signature and records nothing", async () => {
    const ws = await createWorkspace(t);
    const card = await createLiveCard(ws);
    const event = fake.checkoutCompleted(card.sessionId, { livemode: true });

    // Signed with another secret.
    const wrong = await deliver(event, "whsec_someone_elses_secret_0123456789");
    expectJsonError(wrong, 400, "Invalid signature");
    expect(wrong.json()).toEqual({ error: "Invalid signature" });

    // Signed correctly, then the body was altered in transit.
    const signed = fake.sign(event, LIVE_WHSEC);
    const tampered = await postWebhook(
      signed.payload.replace('"pending_webhooks": 1', '"pending_webhooks": 2'),
      signed.header,
    );
    expect(tampered.statusCode).toBe(400);
    expect(tampered.json()).toEqual({ error: "Invalid signature" });

    // A header that is not a signature at all.
    const garbage = await postWebhook(signed.payload, "not-a-signature");
    expect(garbage.statusCode).toBe(400);
    expect(garbage.json()).toEqual({ error: "Invalid signature" });

    expect(await cardEventRows(event.id)).toHaveLength(0);
    expect((await getPayment(ws.liveKey, card.id)).status).toBe("pending");
    expect(await outboxTypes(ws.id)).toEqual(["payment.created"]);

    // The very same event, properly signed, is then applied (it was not recorded as seen).
    const ok = await resend(signed);
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json()).toEqual({ received: true });
    expect((await getPayment(ws.liveKey, card.id)).status).toBe("forwarded");
  });

  it("refuses a request without the signature header with 400", async () => {
    const ws = await createWorkspace(t);
    const card = await createLiveCard(ws);
    const event = fake.checkoutCompleted(card.sessionId, { livemode: true });
    const res = await postWebhook(JSON.stringify(event), undefined);
    expectJsonError(res, 400, "Invalid signature");
    expect(await cardEventRows(event.id)).toHaveLength(0);
    expect((await getPayment(ws.liveKey, card.id)).status).toBe("pending");
  });

  it("refuses a signature older than 5 minutes and accepts one inside the tolerance", async () => {
    const ws = await createWorkspace(t);
    const card = await createLiveCard(ws);
    const event = fake.checkoutCompleted(card.sessionId, { livemode: true });
    const now = Math.floor(Date.now() / 1000);

    const stale = await deliver(event, LIVE_WHSEC, { timestamp: now - 6 * 60 });
    expectJsonError(stale, 400, "Invalid signature");
    expect(await cardEventRows(event.id)).toHaveLength(0);
    expect((await getPayment(ws.liveKey, card.id)).status).toBe("pending");

    const recent = await deliver(event, LIVE_WHSEC, { timestamp: now - 4 * 60 });
    expect(recent.statusCode, recent.body).toBe(200);
    expect((await getPayment(ws.liveKey, card.id)).status).toBe("forwarded");
  });

  it("answers 400 Card webhooks are not configured for an environment without a signing secret", async () => {
    // This app has a sandbox secret key but no sandbox webhook secret: a test-mode event.
    const ws = await createWorkspace(t);
    const card = await createLiveCard(ws);
    const event = fake.checkoutCompleted(card.sessionId, { livemode: false });
    const res = await deliver(event, SANDBOX_WHSEC);
    expectJsonError(res, 400, "Card webhooks are not configured");
    expect(res.json()).toEqual({ error: "Card webhooks are not configured" });
    expect(await cardEventRows(event.id)).toHaveLength(0);
    expect((await getPayment(ws.liveKey, card.id)).status).toBe("pending");
  });
});

describe("POST /api/webhooks/card — de-duplication and ordering", () => {
  it("answers a replayed event id with {received: true, duplicate: true} and applies it once", async () => {
    const ws = await createWorkspace(t);
    const card = await createLiveCard(ws);
    const event = fake.checkoutCompleted(card.sessionId, { livemode: true });
    const signed = fake.sign(event, LIVE_WHSEC);
    const first = await resend(signed);
    expect(first.json()).toEqual({ received: true });

    const again = await resend(signed);
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json()).toEqual({ received: true, duplicate: true });

    // The provider's own retry re-signs with a new timestamp: still the same event.
    const resigned = await deliver(event, LIVE_WHSEC, { timestamp: Math.floor(Date.now() / 1000) + 1 });
    expect(resigned.statusCode).toBe(200);
    expect(resigned.json()).toEqual({ received: true, duplicate: true });

    expect(await outboxTypes(ws.id)).toEqual(["payment.created", "payment.forwarded"]);
    expect(await cardEventRows(event.id)).toHaveLength(1);
  });

  it("applies one of 10 concurrent deliveries of an event; the others are duplicates", async () => {
    const ws = await createWorkspace(t);
    const card = await createLiveCard(ws);
    const signed = fake.sign(fake.checkoutCompleted(card.sessionId, { livemode: true }), LIVE_WHSEC);
    const responses = await Promise.all(Array.from({ length: 10 }, () => resend(signed)));
    for (const r of responses) expect(r.statusCode, r.body).toBe(200);
    const bodies = responses.map((r) => r.json());
    expect(bodies.filter((b) => b.duplicate === undefined)).toEqual([{ received: true }]);
    expect(bodies.filter((b) => b.duplicate === true)).toHaveLength(9);
    expect((await getPayment(ws.liveKey, card.id)).status).toBe("forwarded");
    expect(await outboxTypes(ws.id)).toEqual(["payment.created", "payment.forwarded"]);
  });

  it("keeps an expired payment expired when completed arrives after expired", async () => {
    const ws = await createWorkspace(t);
    const card = await createLiveCard(ws);
    const session = fake.session(card.sessionId);
    const expired = fake.checkoutExpired({ ...session }, { livemode: true });
    const completed = fake.checkoutCompleted({ ...session }, { livemode: true });

    expect((await deliver(expired)).json()).toEqual({ received: true });
    const late = await deliver(completed);
    expect(late.statusCode, late.body).toBe(200);
    expect(late.json().received).toBe(true);

    expect((await getPayment(ws.liveKey, card.id)).status).toBe("expired");
    expect(await outboxTypes(ws.id)).toEqual(["payment.created", "payment.expired"]);
  });

  it("acknowledges events for unknown sessions and payments with {received: true}", async () => {
    const ws = await createWorkspace(t);
    const card = await createLiveCard(ws);
    const foreign = fake.foreignSession({ metadata: { paymentId: card.id }, client_reference_id: card.id });
    const unknownSession = await deliver(fake.checkoutCompleted(foreign, { livemode: true }));
    expect(unknownSession.statusCode, unknownSession.body).toBe(200);
    expect(unknownSession.json()).toEqual({ received: true });

    const unknownPayment = await deliver(
      fake.paymentFailed("00000000-0000-4000-8000-000000000000", { livemode: true }),
    );
    expect(unknownPayment.statusCode, unknownPayment.body).toBe(200);
    expect(unknownPayment.json()).toEqual({ received: true });

    // A malformed id of UUID length (36 dashes) is acknowledged too, never a database error.
    const malformedId = await deliver(fake.paymentFailed("-".repeat(36), { livemode: true }));
    expect(malformedId.statusCode, malformedId.body).toBe(200);
    expect(malformedId.json()).toEqual({ received: true });

    // Neither touched the payment that exists.
    const read = await getPayment(ws.liveKey, card.id);
    expect(read.status).toBe("pending");
    expect(read.lastPaymentError).toBeNull();
    expect(await outboxTypes(ws.id)).toEqual(["payment.created"]);
  });
});

// ---- cancel ----------------------------------------------------------------------------------

describe("POST /api/v1/payments/{id}/cancel — live card", () => {
  it("expires the provider's session and cancels the payment; the session's expired event changes nothing", async () => {
    const ws = await createWorkspace(t);
    const card = await createLiveCard(ws);
    const res = await cancel(ws.liveKey, card.id);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().payment).toMatchObject({ id: card.id, status: "cancelled" });

    expect(fake.calls("expire", card.sessionId)).toHaveLength(1);
    expect(fake.calls("expire", card.sessionId)[0]?.stripeVersion).toBe(API_VERSION);
    expect(fake.session(card.sessionId).status).toBe("expired");
    expect((await getPayment(ws.liveKey, card.id)).status).toBe("cancelled");
    expect(await outboxTypes(ws.id)).toEqual(["payment.created", "payment.cancelled"]);

    // The provider then reports the session it expired.
    const event = await deliver(fake.checkoutExpired(card.sessionId, { livemode: true }));
    expect(event.statusCode).toBe(200);
    expect((await getPayment(ws.liveKey, card.id)).status).toBe("cancelled");
    expect(await outboxTypes(ws.id)).toEqual(["payment.created", "payment.cancelled"]);
  });

  it("refuses with 400 Payment cannot be cancelled when the payer already completed the checkout", async () => {
    const ws = await createWorkspace(t);
    const card = await createLiveCard(ws);
    fake.complete(card.sessionId); // paid at the provider; the event has not arrived yet

    const res = await cancel(ws.liveKey, card.id);
    expectJsonError(res, 400, "Payment cannot be cancelled");
    expect(fake.calls("expire", card.sessionId)).toHaveLength(1);
    expect(fake.session(card.sessionId).status).toBe("complete");
    expect((await getPayment(ws.liveKey, card.id)).status).toBe("pending");
    expect(await outboxTypes(ws.id)).toEqual(["payment.created"]);

    // The completed event then forwards it.
    const done = await deliver(fake.checkoutCompleted(card.sessionId, { livemode: true }));
    expect(done.json()).toEqual({ received: true });
    expect((await getPayment(ws.liveKey, card.id)).status).toBe("forwarded");
  });
});

// ---- expiry -------------------------------------------------------------------------------------

describe("live card expiry", () => {
  it("leaves no payable checkout behind a payment the service has expired", async () => {
    const ws = await createWorkspace(t);
    const res = await createPayment(ws.liveKey, {
      paymentMethod: "card",
      tokenSymbol: "USD",
      amount: "10.50",
      expiresInMinutes: 5,
    });
    if (res.statusCode !== 201) {
      // Refusing an expiry shorter than the provider allows is an acceptable alternative.
      expectJsonError(res, 400);
      return;
    }
    const id = res.json().payment.id as string;
    const sessionId = res.json().cardCheckoutSessionId as string;
    const expiresAt = new Date(res.json().payment.expiresAt as string);

    // The expiry job runs after the payment's expiry.
    await expireDuePayments(t.app.ctx.db, new Date(expiresAt.getTime() + 60_000));
    expect((await getPayment(ws.liveKey, id)).status).toBe("expired");

    // The payer must not be able to pay a payment that is already final (D5: expired never moves).
    const session = fake.session(sessionId);
    const payableUntil = session.status === "open" ? session.expires_at * 1000 : 0;
    expect(payableUntil, "provider session still payable after the payment expired").toBeLessThanOrEqual(
      expiresAt.getTime(),
    );
  });
});

// ---- outbound webhooks ------------------------------------------------------------------------

describe("outbound webhooks for card payments", () => {
  it("delivers payment.forwarded for a live card payment exactly as for a crypto payment", async () => {
    const receiver = new WebhookReceiver();
    await receiver.start();
    const dispatcher = new WebhookDispatcher(t.app.ctx, { pollIntervalMs: 50 });
    try {
      const ws = await createWorkspace(t);
      const register = async (key: string) => {
        const res = await t.request({
          method: "POST",
          url: "/api/v1/webhooks",
          headers: bearer(key),
          payload: { url: receiver.url, events: ["payment.created", "payment.forwarded"] },
        });
        expect(res.statusCode, res.body).toBe(201);
        return res.json().webhook.signingSecret as string;
      };
      const liveSecret = await register(ws.liveKey);
      await register(ws.testKey);
      dispatcher.start();

      // A crypto payment (sandbox completes at once) for comparison.
      const crypto = await createPayment(ws.testKey, { tokenSymbol: "USDC", amount: "10.50" });
      expect(crypto.statusCode, crypto.body).toBe(201);
      const cryptoId = crypto.json().payment.id as string;

      const card = await createLiveCard(ws);
      expect((await deliver(fake.checkoutCompleted(card.sessionId, { livemode: true }))).json()).toEqual({
        received: true,
      });

      const forwardedOf = (id: string) => (r: { json: Json }) =>
        r.json.event === "payment.forwarded" && (r.json.data as Json | undefined)?.id === id;
      const [cardDelivery] = await receiver.waitFor(1, forwardedOf(card.id));
      const [cryptoDelivery] = await receiver.waitFor(1, forwardedOf(cryptoId));
      if (!cardDelivery || !cryptoDelivery) throw new Error("deliveries missing");
      await receiver.waitFor(
        1,
        (r) => r.json.event === "payment.created" && (r.json.data as Json).id === card.id,
      );

      // Exactly {event, data}, signed with the registration's secret, with the usual headers.
      expect(Object.keys(cardDelivery.json).sort()).toEqual(["data", "event"]);
      expect(cardDelivery.headers["x-service-event"]).toBe("payment.forwarded");
      expect(cardDelivery.headers["x-service-delivery"]).toMatch(UUID);
      const expected = createHmac("sha256", Buffer.from(liveSecret, "utf8"))
        .update(cardDelivery.rawBody)
        .digest();
      const given = Buffer.from(String(cardDelivery.headers["x-service-signature"]), "hex");
      expect(given.length === expected.length && timingSafeEqual(given, expected)).toBe(true);

      // data is the payment as GET returns it, with the very same keys as a crypto payment's.
      const read = await getPayment(ws.liveKey, card.id);
      const data = cardDelivery.json.data as Json;
      expect(Object.keys(data).sort()).toEqual(Object.keys(read).sort());
      expect(data).toEqual(read);
      expect(data).toMatchObject({ status: "forwarded", paymentProvider: "card", environment: "live" });
      expect(Object.keys(data).sort()).toEqual(Object.keys(cryptoDelivery.json.data as Json).sort());
      expect(Object.keys(cryptoDelivery.json).sort()).toEqual(["data", "event"]);

      await dispatcher.drain();
    } finally {
      await receiver.stop();
      await dispatcher.stop();
    }
  });
});

// ---- configuration ------------------------------------------------------------------------------

describe("card rail configuration", () => {
  it("answers 503 for live card payments and 400 for card webhooks when no provider is configured", async () => {
    const bare = await startTestApp({ ...RATE_LIMITS });
    try {
      const ws = await createWorkspace(bare);
      const requestsBefore = fake.requests.length;
      const res = await createPayment(
        ws.liveKey,
        { paymentMethod: "card", tokenSymbol: "USD", amount: "10.50" },
        {},
        bare,
      );
      expectJsonError(res, 503, "Card payments are not configured for live");
      expect(await paymentRows(ws.id, bare)).toHaveLength(0);
      expect(fake.requests.length).toBe(requestsBefore);

      // Sandbox card payments need no provider.
      const sandbox = await createPayment(
        ws.testKey,
        { paymentMethod: "card", tokenSymbol: "USD", amount: "10.50" },
        {},
        bare,
      );
      expect(sandbox.statusCode, sandbox.body).toBe(201);
      expect(sandbox.json().payment.status).toBe("forwarded");

      const event = fake.checkoutCompleted(fake.foreignSession(), { livemode: true });
      const hook = await deliver(event, LIVE_WHSEC, { app: bare });
      expectJsonError(hook, 400, "Card webhooks are not configured");
      expect(await cardEventRows(event.id, bare)).toHaveLength(0);
    } finally {
      await bare.close();
    }
  });

  it("verifies each environment's events with that environment's own signing secret", async () => {
    const both = await startTestApp({
      ...RATE_LIMITS,
      CARD_SECRET_KEY_LIVE: LIVE_SK,
      CARD_WEBHOOK_SECRET_LIVE: LIVE_WHSEC,
      CARD_SECRET_KEY_SANDBOX: SANDBOX_SK,
      CARD_WEBHOOK_SECRET_SANDBOX: SANDBOX_WHSEC,
      CARD_API_BASE: fake.url,
    });
    try {
      const ws = await createWorkspace(both);
      const res = await createPayment(
        ws.liveKey,
        { paymentMethod: "card", tokenSymbol: "USD", amount: "10.50" },
        {},
        both,
      );
      expect(res.statusCode, res.body).toBe(201);
      const id = res.json().payment.id as string;
      const sessionId = res.json().cardCheckoutSessionId as string;

      // A live event signed with the sandbox destination's secret is refused.
      const live = fake.checkoutCompleted(sessionId, { livemode: true });
      const crossed = await deliver(live, SANDBOX_WHSEC, { app: both });
      expectJsonError(crossed, 400, "Invalid signature");
      // A sandbox event (properly signed) never touches a live payment.
      const sandboxEvent = fake.checkoutCompleted(sessionId, { livemode: false });
      const sandboxRes = await deliver(sandboxEvent, SANDBOX_WHSEC, { app: both });
      expect(sandboxRes.statusCode, sandboxRes.body).toBe(200);
      expect(sandboxRes.json()).toEqual({ received: true });
      expect((await getPayment(ws.liveKey, id, both)).status).toBe("pending");

      const ok = await deliver(live, LIVE_WHSEC, { app: both });
      expect(ok.statusCode, ok.body).toBe(200);
      expect(ok.json()).toEqual({ received: true });
      expect((await getPayment(ws.liveKey, id, both)).status).toBe("forwarded");
    } finally {
      await both.close();
    }
  });
});
