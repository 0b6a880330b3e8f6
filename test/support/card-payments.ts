// What the live card payment method suites (test/card/payments.test.ts, webhooks.test.ts) share.

import type { LightMyRequestResponse } from "fastify";
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import { bearer, type CreatedWorkspace, startTestApp, type TestApp } from "./app.ts";
import { type CardEvent, FakeCardProvider, type SignedDelivery } from "./fake-card-provider.ts";

// Integration tests of the card payment method (interface parts 3, 4.1, 4.4, 4.9, 6; decisions D5, D13):
// the real app on a real database talks through the official stripe SDK to a local fake
// provider (CARD_API_BASE), and inbound events are signed with the SDK's own test helper.

export type Json = Record<string, unknown>;

export const LIVE_WHSEC = "whsec_live_destination_secret_0123456789abcdef";
export const SANDBOX_WHSEC = "whsec_sandbox_destination_secret_0123456789ab";
export const LIVE_SK = "sk_test_liveEnvironmentKey0123456789";
export const SANDBOX_SK = "sk_test_sandboxEnvironmentKey0123456789";
export const API_VERSION = "2026-05-27.dahlia";
export const RATE_LIMITS = { RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" };
export const BASE = "http://pay.test";
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const fake = new FakeCardProvider();
export let t: TestApp;

// ---- helpers -------------------------------------------------------------------------------

export function createPayment(
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

export interface LiveCard {
  body: Json;
  payment: Json;
  id: string;
  sessionId: string;
}

export async function createLiveCard(
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

export async function getPayment(key: string, id: string, app: TestApp = t): Promise<Json> {
  const res = await app.request({ method: "GET", url: `/api/v1/payments/${id}`, headers: bearer(key) });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().payment as Json;
}

export function cancel(key: string, id: string): Promise<LightMyRequestResponse> {
  return t.request({ method: "POST", url: `/api/v1/payments/${id}/cancel`, headers: bearer(key) });
}

export function postWebhook(
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
export function deliver(
  event: CardEvent,
  secret = LIVE_WHSEC,
  options: { timestamp?: number; app?: TestApp } = {},
): Promise<LightMyRequestResponse> {
  const signed = fake.sign(event, secret, { timestamp: options.timestamp });
  return postWebhook(signed.payload, signed.header, options.app);
}

export function resend(signed: SignedDelivery): Promise<LightMyRequestResponse> {
  return postWebhook(signed.payload, signed.header);
}

export async function outboxRows(workspaceId: string, environment: "sandbox" | "live" = "live") {
  return t.database.db
    .selectFrom("outbox_events")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .where("environment", "=", environment)
    .orderBy("id", "asc")
    .execute();
}

export async function outboxTypes(workspaceId: string, environment: "sandbox" | "live" = "live") {
  return (await outboxRows(workspaceId, environment)).map((r) => r.event_type);
}

export async function cardEventRows(eventId: string, app: TestApp = t) {
  return app.database.db.selectFrom("card_events").selectAll().where("event_id", "=", eventId).execute();
}

export async function paymentRows(workspaceId: string, app: TestApp = t) {
  return app.database.db.selectFrom("payments").selectAll().where("workspace_id", "=", workspaceId).execute();
}

export const createsFor = (paymentId: string) =>
  fake.calls("create").filter((r) => r.form.client_reference_id === paymentId);

export function expectJsonError(res: LightMyRequestResponse, status: number, error?: string): Json {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers["content-type"]).toMatch(/^application\/json/);
  const body = res.json() as Json;
  expect(typeof body.error).toBe("string");
  if (error !== undefined) expect(body.error).toBe(error);
  return body;
}

// ---- create ----------------------------------------------------------------------------------

/** One app with both environments' card secrets for the file; the fake provider reset after each test. */
export function useCardRailApp(): void {
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
}
