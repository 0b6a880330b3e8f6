import type { LightMyRequestResponse } from "fastify";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { WebhookDispatcher } from "../src/modules/webhooks/dispatcher.ts";
import { bearer, type CreatedWorkspace, createWorkspace, startTestApp, type TestApp } from "./support/app.ts";
import { type CardEvent, FakeCardProvider } from "./support/fake-card-provider.ts";
import { WebhookReceiver } from "./support/receiver.ts";

// Integration tests of the card refund rail (D19, with D5/D13's inbound card webhooks): the real
// app on a real database refunds card payments at a local fake provider through the official
// stripe SDK; the provider's refund events are signed with the SDK's own test helper.

type Json = Record<string, unknown>;

const LIVE_WHSEC = "whsec_live_refunds_secret_0123456789abcdef";
const LIVE_SK = "sk_test_liveRefundsKey0123456789";
const API_VERSION = "2026-05-27.dahlia";
const RATE_LIMITS = { RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" };
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const NOT_FOR_CARDS = "is not used for card payments: the money goes back to the card";

const fake = new FakeCardProvider();
let t: TestApp;

beforeAll(async () => {
  await fake.start();
  t = await startTestApp({
    ...RATE_LIMITS,
    WEBHOOK_ALLOW_PRIVATE: "true",
    CARD_SECRET_KEY_LIVE: LIVE_SK,
    CARD_WEBHOOK_SECRET_LIVE: LIVE_WHSEC,
    CARD_API_BASE: fake.url,
  });
});

afterEach(() => {
  fake.resetRefundAnswers();
  t?.setNow(undefined);
});

afterAll(async () => {
  await t?.close();
  await fake.stop();
});

// ---- helpers -------------------------------------------------------------------------------

interface ForwardedCard {
  id: string;
  sessionId: string;
  paymentIntent: string;
}

function deliver(event: CardEvent, secret = LIVE_WHSEC): Promise<LightMyRequestResponse> {
  const signed = fake.sign(event, secret);
  return t.request({
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
  const res = await t.request({
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
  app: TestApp = t,
): Promise<LightMyRequestResponse> {
  return app.request({
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
  const res = await t.request({ method: "GET", url: `/api/v1/payments/${id}`, headers: bearer(ws.liveKey) });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().payment as Json;
}

async function listRefunds(
  ws: CreatedWorkspace,
  paymentId: string,
): Promise<{ refunds: Json[]; total: number }> {
  const res = await t.request({
    method: "GET",
    url: `/api/v1/payments/${paymentId}/refunds`,
    headers: bearer(ws.liveKey),
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

async function refundRow(id: string) {
  return t.database.db.selectFrom("card_refunds").selectAll().where("id", "=", id).executeTakeFirstOrThrow();
}

async function refundRowsOf(paymentId: string) {
  return t.database.db.selectFrom("card_refunds").selectAll().where("payment_id", "=", paymentId).execute();
}

async function refundEvents(ws: CreatedWorkspace) {
  const rows = await t.database.db
    .selectFrom("outbox_events")
    .selectAll()
    .where("workspace_id", "=", ws.id)
    .where("event_type", "like", "refund.%")
    .orderBy("id", "asc")
    .execute();
  return rows.map((r) => ({ type: r.event_type, data: r.payload as Json }));
}

const createsFor = (paymentIntent: string) =>
  fake.refundCalls("create").filter((r) => r.form.payment_intent === paymentIntent);

function expectJsonError(res: LightMyRequestResponse, status: number, error: string): Json {
  expect(res.statusCode, res.body).toBe(status);
  const body = res.json() as Json;
  expect(body.error).toBe(error);
  return body;
}

/** Moves the service's clock past the reconciler's grace and runs it. */
async function reconcileLater(): Promise<number> {
  t.setNow(new Date(Date.now() + 60_000));
  return t.app.services.cardRefunds.reconcile();
}

// ---- refunding ---------------------------------------------------------------------------------

describe("POST /api/v1/payments/{id}/refunds — card", () => {
  it("refunds the whole payment at the provider on the session's payment intent, in cents, under the refund's key", async () => {
    const ws = await createWorkspace(t);
    const card = await forwardedCard(ws);
    const res = await refund(ws.liveKey, card.id, { reason: "customer asked" });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json() as { refund: Json };
    const [providerRefund] = fake.refundsOf(card.paymentIntent);
    if (!providerRefund) throw new Error("no refund at the provider");
    expect(body.refund).toEqual({
      id: expect.stringMatching(UUID),
      paymentId: card.id,
      amount: "10.50",
      tokenSymbol: "USD",
      destinationAddress: null,
      status: "completed",
      txHash: providerRefund.id,
      reason: "customer asked",
      createdAt: expect.any(String),
    });
    const id = body.refund.id as string;

    const [create] = createsFor(card.paymentIntent);
    expect(createsFor(card.paymentIntent)).toHaveLength(1);
    expect(create?.form).toMatchObject({
      payment_intent: card.paymentIntent,
      amount: "1050",
      "metadata[refundId]": id,
      "metadata[paymentId]": card.id,
    });
    expect(create?.idempotencyKey).toBe(`refund-${id}`);
    expect(create?.stripeVersion).toBe(API_VERSION);
    expect(create?.secretKey).toBe(LIVE_SK);
    expect(providerRefund).toMatchObject({ amount: 1050, status: "succeeded" });

    expect((await getPayment(ws, card.id)).refundedAmount).toBe("10.50");
    expect(await listRefunds(ws, card.id)).toEqual({
      refunds: [body.refund],
      total: 1,
      limit: 50,
      offset: 0,
    });
    expect(await refundEvents(ws)).toEqual([{ type: "refund.completed", data: body.refund }]);
  });

  it("refunds in parts up to the gross, then answers 400 with what is refundable", async () => {
    const ws = await createWorkspace(t);
    const card = await forwardedCard(ws);
    const first = await refunded(ws, card.id, { amount: "3.00" });
    expect(first).toMatchObject({ amount: "3.00", status: "completed" });
    expect((await getPayment(ws, card.id)).refundedAmount).toBe("3.00");

    const tooMuch = await refund(ws.liveKey, card.id, { amount: "7.51" });
    expect(expectJsonError(tooMuch, 400, "Refund exceeds the refundable amount").refundable).toBe("7.50");

    const second = await refunded(ws, card.id, { amount: "7.50" });
    expect(second).toMatchObject({ amount: "7.50", status: "completed" });
    expect((await getPayment(ws, card.id)).refundedAmount).toBe("10.50");

    const more = await refund(ws.liveKey, card.id, { amount: "0.01" });
    expect(expectJsonError(more, 400, "Refund exceeds the refundable amount").refundable).toBe("0.00");
    const rest = await refund(ws.liveKey, card.id);
    expect(expectJsonError(rest, 400, "Refund exceeds the refundable amount").refundable).toBe("0.00");

    expect(createsFor(card.paymentIntent).map((r) => r.form.amount)).toEqual(["300", "750"]);
    expect(fake.refundsOf(card.paymentIntent).map((r) => r.amount)).toEqual([750, 300]);
    const listed = await listRefunds(ws, card.id);
    expect(listed.total).toBe(2);
    expect(listed.refunds.map((r) => r.id)).toEqual([first.id, second.id]);
  });

  it("refuses a card payment that is not forwarded, without asking the provider", async () => {
    const ws = await createWorkspace(t);
    const card = await pendingCard(ws);
    const before = fake.refundCalls("create").length;
    const res = await refund(ws.liveKey, card.id);
    expect(expectJsonError(res, 400, "Only forwarded payments can be refunded").status).toBe("pending");
    expect(fake.refundCalls("create")).toHaveLength(before);
    expect(await refundRowsOf(card.id)).toHaveLength(0);
  });

  it("refuses destinationAddress and walletType: the money goes back to the card; nothing is recorded or taken", async () => {
    const ws = await createWorkspace(t);
    const card = await forwardedCard(ws);
    const address = await refund(ws.liveKey, card.id, {
      destinationAddress: "0x2222222222222222222222222222222222222222",
    });
    expectJsonError(address, 400, `destinationAddress ${NOT_FOR_CARDS}`);
    const wallet = await refund(ws.liveKey, card.id, { walletType: "eoa" });
    expectJsonError(wallet, 400, `walletType ${NOT_FOR_CARDS}`);

    expect(createsFor(card.paymentIntent)).toHaveLength(0);
    expect(await refundRowsOf(card.id)).toHaveLength(0);
    expect((await getPayment(ws, card.id)).refundedAmount).toBe("0.00");
    // The refusals took nothing: the whole amount can still be refunded.
    expect(await refunded(ws, card.id)).toMatchObject({ amount: "10.50", status: "completed" });
  });

  it("replays an Idempotency-Key with the same refund and asks the provider once", async () => {
    const ws = await createWorkspace(t);
    const card = await forwardedCard(ws);
    const headers = { "idempotency-key": `refund-key-${card.id}` };
    const first = await refund(ws.liveKey, card.id, { amount: "5.00" }, headers);
    expect(first.statusCode, first.body).toBe(201);
    const again = await refund(ws.liveKey, card.id, { amount: "5.00" }, headers);
    expect(again.statusCode, again.body).toBe(201);
    expect(again.headers["idempotent-replayed"]).toBe("true");
    expect(again.json().refund).toEqual(first.json().refund);

    const other = await refund(ws.liveKey, card.id, { amount: "4.00" }, headers);
    expectJsonError(other, 409, "Idempotency key already used");

    expect(createsFor(card.paymentIntent)).toHaveLength(1);
    expect(fake.refundsOf(card.paymentIntent)).toHaveLength(1);
    expect((await getPayment(ws, card.id)).refundedAmount).toBe("5.00");
    expect(await refundRowsOf(card.id)).toHaveLength(1);
  });

  it("gives the amount back when the provider answers failed, with refund.failed and its reason", async () => {
    const ws = await createWorkspace(t);
    const card = await forwardedCard(ws);
    fake.answerNextRefunds("failed");
    const failed = await refunded(ws, card.id, { amount: "4.00" });
    const [providerRefund] = fake.refundsOf(card.paymentIntent);
    expect(failed).toMatchObject({ status: "failed", amount: "4.00", txHash: providerRefund?.id });
    expect((await getPayment(ws, card.id)).refundedAmount).toBe("0.00");
    const events = await refundEvents(ws);
    expect(events).toHaveLength(1);
    expect(events[0]?.type).toBe("refund.failed");
    expect(events[0]?.data).toMatchObject({
      ...failed,
      error: expect.stringContaining("expired_or_canceled_card"),
    });
    expect((await refundRow(failed.id as string)).error).toContain("failed");

    // What was given back can be refunded again.
    expect(await refunded(ws, card.id)).toMatchObject({ amount: "10.50", status: "completed" });
    expect((await getPayment(ws, card.id)).refundedAmount).toBe("10.50");
  });

  it("fails a refund the provider refuses (already refunded there) with the provider's message", async () => {
    const ws = await createWorkspace(t);
    const card = await forwardedCard(ws);
    // Refunded at the provider's dashboard, outside the service.
    const outside = await fetch(`${fake.url}/v1/refunds`, {
      method: "POST",
      headers: { authorization: `Bearer ${LIVE_SK}`, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ payment_intent: card.paymentIntent }).toString(),
    });
    expect(outside.status).toBe(200);

    const failed = await refunded(ws, card.id);
    expect(failed).toMatchObject({ status: "failed", txHash: null, amount: "10.50" });
    expect((await getPayment(ws, card.id)).refundedAmount).toBe("0.00");
    const [event] = await refundEvents(ws);
    expect(event?.type).toBe("refund.failed");
    expect(event?.data.error).toMatch(/has already been refunded/);
    expect(fake.refundsOf(card.paymentIntent)).toHaveLength(1);
  });

  it("completes a sandbox card refund at once, without the provider (sandbox payments settle at creation, D5)", async () => {
    const ws = await createWorkspace(t);
    const created = await t.request({
      method: "POST",
      url: "/api/v1/payments",
      headers: bearer(ws.testKey),
      payload: { paymentMethod: "card", tokenSymbol: "USD", amount: "20.00" },
    });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().payment.id as string;
    const before = fake.requests.length;
    const res = await refund(ws.testKey, id, { amount: "5.25" });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().refund).toMatchObject({ status: "completed", amount: "5.25", txHash: null });
    expect(fake.requests.length).toBe(before);
    const read = await t.request({
      method: "GET",
      url: `/api/v1/payments/${id}`,
      headers: bearer(ws.testKey),
    });
    expect(read.json().payment.refundedAmount).toBe("5.25");
  });

  it("answers 503 when the environment has no card provider, and records nothing", async () => {
    const ws = await createWorkspace(t);
    const card = await forwardedCard(ws);
    // The same database, served by an instance without the card provider configured.
    const bare = await startTestApp({ ...RATE_LIMITS }, { database: t.database });
    try {
      const res = await refund(ws.liveKey, card.id, {}, {}, bare);
      expectJsonError(res, 503, "Card payments are not configured for live");
    } finally {
      await bare.close(true);
    }
    expect(await refundRowsOf(card.id)).toHaveLength(0);
    expect((await getPayment(ws, card.id)).refundedAmount).toBe("0.00");
  });
});

// ---- inbound refund events -----------------------------------------------------------------------

describe("POST /api/webhooks/card — refund events", () => {
  it("completes a refund pending at the provider on refund.updated succeeded and delivers refund.completed", async () => {
    const receiver = new WebhookReceiver();
    await receiver.start();
    const dispatcher = new WebhookDispatcher(t.app.ctx, { pollIntervalMs: 25 });
    try {
      const ws = await createWorkspace(t);
      const hook = await t.request({
        method: "POST",
        url: "/api/v1/webhooks",
        headers: bearer(ws.liveKey),
        // "*": covers refund.* (D20), which the registration's list of kinds does not name yet.
        payload: { url: receiver.url, events: ["*"] },
      });
      expect(hook.statusCode, hook.body).toBe(201);
      dispatcher.start();

      const card = await forwardedCard(ws);
      fake.answerNextRefunds("pending");
      const pending = await refunded(ws, card.id, { amount: "6.00" });
      const [providerRefund] = fake.refundsOf(card.paymentIntent);
      if (!providerRefund) throw new Error("no refund at the provider");
      expect(pending).toMatchObject({ status: "pending", txHash: providerRefund.id });
      // A refund on its way back holds its amount.
      expect((await getPayment(ws, card.id)).refundedAmount).toBe("6.00");
      expect(await refundEvents(ws)).toEqual([]);

      const res = await deliver(
        fake.refundUpdated(providerRefund.id, { livemode: true, status: "succeeded" }),
      );
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toEqual({ received: true });

      const [listed] = (await listRefunds(ws, card.id)).refunds;
      expect(listed).toEqual({ ...pending, status: "completed" });
      const [delivery] = await receiver.waitFor(1, (r) => r.json.event === "refund.completed");
      expect(delivery?.json).toEqual({ event: "refund.completed", data: listed });
      expect(delivery?.headers["x-service-event"]).toBe("refund.completed");
      expect((await getPayment(ws, card.id)).refundedAmount).toBe("6.00");

      // A later report that it is pending again changes nothing.
      const late = await deliver(
        fake.refundUpdated(providerRefund.id, { livemode: true, status: "pending" }),
      );
      expect(late.json()).toEqual({ received: true });
      expect((await refundRow(pending.id as string)).status).toBe("completed");
      expect((await refundEvents(ws)).map((e) => e.type)).toEqual(["refund.completed"]);
      await dispatcher.drain();
      expect(receiver.received.filter((r) => r.json.event === "refund.completed")).toHaveLength(1);
    } finally {
      await dispatcher.stop();
      await receiver.stop();
    }
  });

  it("fails a completed refund the provider later reports failed, giving its amount back", async () => {
    const ws = await createWorkspace(t);
    const card = await forwardedCard(ws);
    const done = await refunded(ws, card.id, { amount: "2.50" });
    expect(done.status).toBe("completed");
    const res = await deliver(
      fake.refundUpdated(done.txHash as string, {
        livemode: true,
        status: "failed",
        failureReason: "lost_or_stolen_card",
      }),
    );
    expect(res.json()).toEqual({ received: true });
    expect((await refundRow(done.id as string)).status).toBe("failed");
    expect((await getPayment(ws, card.id)).refundedAmount).toBe("0.00");
    const events = await refundEvents(ws);
    expect(events.map((e) => e.type)).toEqual(["refund.completed", "refund.failed"]);
    expect(events[1]?.data).toMatchObject({
      id: done.id,
      status: "failed",
      error: expect.stringContaining("lost_or_stolen_card"),
    });

    // Succeeded after failed (out of order) moves nothing.
    const late = await deliver(
      fake.refundUpdated(done.txHash as string, { livemode: true, status: "succeeded" }),
    );
    expect(late.json()).toEqual({ received: true });
    expect((await refundRow(done.id as string)).status).toBe("failed");
    expect((await getPayment(ws, card.id)).refundedAmount).toBe("0.00");
    expect(await refundEvents(ws)).toHaveLength(2);
  });

  it("refuses a forged signature with 400 and changes nothing", async () => {
    const ws = await createWorkspace(t);
    const card = await forwardedCard(ws);
    fake.answerNextRefunds("pending");
    const pending = await refunded(ws, card.id);
    const event = fake.refundUpdated(pending.txHash as string, { livemode: true, status: "succeeded" });
    const forged = await deliver(event, "whsec_not_the_providers_secret_0123456789");
    expectJsonError(forged, 400, "Invalid signature");
    expect((await refundRow(pending.id as string)).status).toBe("pending");
    const claimed = await t.database.db
      .selectFrom("card_events")
      .selectAll()
      .where("event_id", "=", event.id)
      .execute();
    expect(claimed).toHaveLength(0);
    expect(await refundEvents(ws)).toEqual([]);

    // The genuine delivery of the same event still applies.
    expect((await deliver(event)).json()).toEqual({ received: true });
    expect((await refundRow(pending.id as string)).status).toBe("completed");
  });

  it("answers a replayed event id as a duplicate and applies it once", async () => {
    const ws = await createWorkspace(t);
    const card = await forwardedCard(ws);
    const done = await refunded(ws, card.id, { amount: "1.00" });
    const event = fake.refundUpdated(done.txHash as string, { livemode: true, status: "failed" });
    const signed = fake.sign(event, LIVE_WHSEC);
    const post = () =>
      t.request({
        method: "POST",
        url: "/api/webhooks/card",
        headers: { "content-type": "application/json", "stripe-signature": signed.header },
        payload: signed.payload,
      });
    expect((await post()).json()).toEqual({ received: true });
    expect((await post()).json()).toEqual({ received: true, duplicate: true });
    const concurrent = await Promise.all(Array.from({ length: 5 }, post));
    expect(concurrent.map((r) => r.json())).toEqual(Array(5).fill({ received: true, duplicate: true }));

    expect((await refundEvents(ws)).map((e) => e.type)).toEqual(["refund.completed", "refund.failed"]);
    // Given back once, not once per delivery.
    expect((await getPayment(ws, card.id)).refundedAmount).toBe("0.00");
    const [claimed] = await t.database.db
      .selectFrom("card_events")
      .selectAll()
      .where("event_id", "=", event.id)
      .execute();
    expect(claimed).toMatchObject({ payment_id: card.id, outcome: "applied: failed" });
  });

  it("applies each refund a charge.refunded lists; one that lists none is acknowledged and ignored", async () => {
    const ws = await createWorkspace(t);
    const card = await forwardedCard(ws);
    fake.answerNextRefunds("pending", "pending");
    const a = await refunded(ws, card.id, { amount: "4.00" });
    const b = await refunded(ws, card.id, { amount: "5.00" });
    expect([a.status, b.status]).toEqual(["pending", "pending"]);
    fake.settleRefund(a.txHash as string, "succeeded");
    fake.settleRefund(b.txHash as string, "succeeded");

    const bare = fake.chargeRefunded(card.paymentIntent, { livemode: true, withRefunds: false });
    expect((await deliver(bare)).json()).toEqual({ received: true });
    expect((await refundRow(a.id as string)).status).toBe("pending");
    const [ignored] = await t.database.db
      .selectFrom("card_events")
      .selectAll()
      .where("event_id", "=", bare.id)
      .execute();
    expect(ignored?.outcome).toMatch(/^ignored/);

    const listing = fake.chargeRefunded(card.paymentIntent, { livemode: true });
    expect((await deliver(listing)).json()).toEqual({ received: true });
    expect((await refundRow(a.id as string)).status).toBe("completed");
    expect((await refundRow(b.id as string)).status).toBe("completed");
    expect((await refundEvents(ws)).map((e) => [e.type, e.data.id])).toEqual(
      expect.arrayContaining([
        ["refund.completed", a.id],
        ["refund.completed", b.id],
      ]),
    );
    expect(await refundEvents(ws)).toHaveLength(2);
    expect((await getPayment(ws, card.id)).refundedAmount).toBe("9.00");
  });

  it("acknowledges a refund event for a refund that is not ours and changes nothing", async () => {
    const ws = await createWorkspace(t);
    const card = await forwardedCard(ws);
    const outside = await fetch(`${fake.url}/v1/refunds`, {
      method: "POST",
      headers: { authorization: `Bearer ${LIVE_SK}`, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ payment_intent: card.paymentIntent, amount: "100" }).toString(),
    });
    const foreign = (await outside.json()) as { id: string };
    const event = fake.refundUpdated(foreign.id, { livemode: true, status: "failed" });
    expect((await deliver(event)).json()).toEqual({ received: true });
    const [claimed] = await t.database.db
      .selectFrom("card_events")
      .selectAll()
      .where("event_id", "=", event.id)
      .execute();
    expect(claimed?.outcome).toMatch(/not one of ours/);
    expect((await getPayment(ws, card.id)).refundedAmount).toBe("0.00");
    expect(await refundEvents(ws)).toEqual([]);
  });
});

// ---- crash recovery ------------------------------------------------------------------------------

describe("card refunds reconciler", () => {
  it("leaves a refund pending when the provider answers 500, and finishes it later under the same key", async () => {
    const ws = await createWorkspace(t);
    const card = await forwardedCard(ws);
    fake.answerNextRefunds("error");
    const pending = await refunded(ws, card.id, { amount: "7.00" });
    expect(pending).toMatchObject({ status: "pending", txHash: null });
    expect((await getPayment(ws, card.id)).refundedAmount).toBe("7.00");
    expect(fake.refundsOf(card.paymentIntent)).toHaveLength(0);

    // Inside the grace a request may still be in flight: the reconciler leaves it.
    await t.app.services.cardRefunds.reconcile();
    expect(createsFor(card.paymentIntent)).toHaveLength(1);
    expect((await refundRow(pending.id as string)).status).toBe("pending");

    expect(await reconcileLater()).toBeGreaterThanOrEqual(1);
    const creates = createsFor(card.paymentIntent);
    expect(creates).toHaveLength(2);
    expect(creates.map((r) => r.idempotencyKey)).toEqual([`refund-${pending.id}`, `refund-${pending.id}`]);
    const providerRefunds = fake.refundsOf(card.paymentIntent);
    expect(providerRefunds).toHaveLength(1);
    const row = await refundRow(pending.id as string);
    expect(row).toMatchObject({ status: "completed", provider_refund_id: providerRefunds[0]?.id });
    expect((await refundEvents(ws)).map((e) => e.type)).toEqual(["refund.completed"]);
    expect((await getPayment(ws, card.id)).refundedAmount).toBe("7.00");
  });

  it("finds a refund whose creation answer was lost instead of making a second one", async () => {
    const ws = await createWorkspace(t);
    const card = await forwardedCard(ws);
    fake.answerNextRefunds("lost");
    const pending = await refunded(ws, card.id);
    expect(pending).toMatchObject({ status: "pending", txHash: null });
    expect(fake.refundsOf(card.paymentIntent)).toHaveLength(1);

    await reconcileLater();
    const [only] = fake.refundsOf(card.paymentIntent);
    expect(fake.refundsOf(card.paymentIntent)).toHaveLength(1);
    expect(createsFor(card.paymentIntent)).toHaveLength(1);
    expect(await refundRow(pending.id as string)).toMatchObject({
      status: "completed",
      provider_refund_id: only?.id,
    });
    expect((await refundEvents(ws)).map((e) => e.type)).toEqual(["refund.completed"]);
  });

  it("reads back a refund pending at the provider and applies its outcome", async () => {
    const ws = await createWorkspace(t);
    const card = await forwardedCard(ws);
    fake.answerNextRefunds("requires_action");
    const pending = await refunded(ws, card.id, { amount: "3.00" });
    expect(pending.status).toBe("pending");

    await reconcileLater();
    expect((await refundRow(pending.id as string)).status).toBe("pending");

    fake.settleRefund(pending.txHash as string, "canceled");
    const reads = fake.refundCalls("retrieve").length;
    await reconcileLater();
    expect(fake.refundCalls("retrieve").length).toBeGreaterThan(reads);
    expect((await refundRow(pending.id as string)).status).toBe("failed");
    expect((await getPayment(ws, card.id)).refundedAmount).toBe("0.00");
    expect((await refundEvents(ws)).map((e) => e.type)).toEqual(["refund.failed"]);
    expect(createsFor(card.paymentIntent)).toHaveLength(1);
  });
});
