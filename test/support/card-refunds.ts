import type { LightMyRequestResponse } from "fastify";
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import { bearer, type CreatedWorkspace, startTestApp, type TestApp } from "./app.ts";
import type { CardEvent, FakeCardProvider } from "./fake-card-provider.ts";

// What the integration tests of the card refund rail (D19, with D5/D13's inbound card webhooks)
// share: the real app on a real database, refunding card payments at a local fake provider through
// the official stripe SDK (the provider's refund events are signed with the SDK's own test
// helper); the constants they expect, and their requests and reads.

export type Json = Record<string, unknown>;

export const LIVE_WHSEC = "whsec_live_refunds_secret_0123456789abcdef";
export const LIVE_SK = "sk_test_liveRefundsKey0123456789";
export const API_VERSION = "2026-05-27.dahlia";
export const RATE_LIMITS = { RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" };
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const NOT_FOR_CARDS = "is not used for card payments: the money goes back to the card";

/** Starts the fake provider, then the app with the live card environment configured on it. */
export async function startCardRefundsApp(fake: FakeCardProvider): Promise<TestApp> {
  await fake.start();
  return startTestApp({
    ...RATE_LIMITS,
    WEBHOOK_ALLOW_PRIVATE: "true",
    CARD_SECRET_KEY_LIVE: LIVE_SK,
    CARD_WEBHOOK_SECRET_LIVE: LIVE_WHSEC,
    CARD_API_BASE: fake.url,
  });
}

/**
 * Registers the file's hooks: before all, `fake` and the app on it (handed to `started`); after
 * each test, the fake's refund answers and the app's clock reset; after all, both stopped.
 */
export function useCardRefundsApp(fake: FakeCardProvider, started: (app: TestApp) => void): void {
  let app: TestApp | undefined;
  beforeAll(async () => {
    app = await startCardRefundsApp(fake);
    started(app);
  });
  afterEach(() => {
    fake.resetRefundAnswers();
    app?.setNow(undefined);
  });
  afterAll(async () => {
    await app?.close();
    await fake.stop();
  });
}

export interface ForwardedCard {
  id: string;
  sessionId: string;
  paymentIntent: string;
}

export function expectJsonError(res: LightMyRequestResponse, status: number, error: string): Json {
  expect(res.statusCode, res.body).toBe(status);
  const body = res.json() as Json;
  expect(body.error).toBe(error);
  return body;
}

/**
 * The requests and reads of the card refund tests, against the app `app()` answers (set in
 * beforeAll) and the fake provider `fake`.
 */
export function cardRefundHelpers(app: () => TestApp, fake: FakeCardProvider) {
  function deliver(event: CardEvent, secret = LIVE_WHSEC): Promise<LightMyRequestResponse> {
    const signed = fake.sign(event, secret);
    return app().request({
      method: "POST",
      url: "/api/webhooks/card",
      headers: { "content-type": "application/json", "stripe-signature": signed.header },
      payload: signed.payload,
    });
  }

  async function pendingCard(
    ws: CreatedWorkspace,
    amount = "10.50",
  ): Promise<{ id: string; sessionId: string }> {
    const res = await app().request({
      method: "POST",
      url: "/api/v1/payments",
      headers: bearer(ws.liveKey),
      payload: { paymentMethod: "card", tokenSymbol: "USD", amount },
    });
    expect(res.statusCode, res.body).toBe(201);
    return { id: res.json().payment.id as string, sessionId: res.json().cardCheckoutSessionId as string };
  }

  /** A live card payment the payer paid: forwarded by its signed checkout.session.completed. */
  async function forwardedCard(ws: CreatedWorkspace, amount = "10.50"): Promise<ForwardedCard> {
    const card = await pendingCard(ws, amount);
    const res = await deliver(fake.checkoutCompleted(card.sessionId, { livemode: true }));
    expect(res.json()).toEqual({ received: true });
    expect((await getPayment(ws, card.id)).status).toBe("forwarded");
    const paymentIntent = fake.session(card.sessionId).payment_intent;
    if (!paymentIntent) throw new Error("the completed session has no payment intent");
    return { ...card, paymentIntent };
  }

  function refund(
    key: string,
    paymentId: string,
    body: Json = {},
    headers: Record<string, string> = {},
    target: TestApp = app(),
  ): Promise<LightMyRequestResponse> {
    return target.request({
      method: "POST",
      url: `/api/v1/payments/${paymentId}/refunds`,
      headers: { ...bearer(key), ...headers },
      payload: body,
    });
  }

  /** Refunds and expects 201; the refund. */
  async function refunded(ws: CreatedWorkspace, paymentId: string, body: Json = {}): Promise<Json> {
    const res = await refund(ws.liveKey, paymentId, body);
    expect(res.statusCode, res.body).toBe(201);
    return res.json().refund as Json;
  }

  async function getPayment(ws: CreatedWorkspace, id: string): Promise<Json> {
    const res = await app().request({
      method: "GET",
      url: `/api/v1/payments/${id}`,
      headers: bearer(ws.liveKey),
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().payment as Json;
  }

  async function listRefunds(
    ws: CreatedWorkspace,
    paymentId: string,
  ): Promise<{ refunds: Json[]; total: number }> {
    const res = await app().request({
      method: "GET",
      url: `/api/v1/payments/${paymentId}/refunds`,
      headers: bearer(ws.liveKey),
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  }

  async function refundRow(id: string) {
    return app()
      .database.db.selectFrom("card_refunds")
      .selectAll()
      .where("id", "=", id)
      .executeTakeFirstOrThrow();
  }

  async function refundRowsOf(paymentId: string) {
    return app()
      .database.db.selectFrom("card_refunds")
      .selectAll()
      .where("payment_id", "=", paymentId)
      .execute();
  }

  async function refundEvents(ws: CreatedWorkspace) {
    const rows = await app()
      .database.db.selectFrom("outbox_events")
      .selectAll()
      .where("workspace_id", "=", ws.id)
      .where("event_type", "like", "refund.%")
      .orderBy("id", "asc")
      .execute();
    return rows.map((r) => ({ type: r.event_type, data: r.payload as Json }));
  }

  const createsFor = (paymentIntent: string) =>
    fake.refundCalls("create").filter((r) => r.form.payment_intent === paymentIntent);

  /** Moves the service's clock past the reconciler's grace and runs it. */
  async function reconcileLater(): Promise<number> {
    const t = app();
    t.setNow(new Date(Date.now() + 60_000));
    return t.app.services.cardRefunds.reconcile();
  }

  return {
    deliver,
    pendingCard,
    forwardedCard,
    refund,
    refunded,
    getPayment,
    listRefunds,
    refundRow,
    refundRowsOf,
    refundEvents,
    createsFor,
    reconcileLater,
  };
}
