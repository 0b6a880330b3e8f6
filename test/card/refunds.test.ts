import { describe, expect, it } from "vitest";
import { bearer, createWorkspace, startTestApp, type TestApp } from "../support/app.ts";
import {
  API_VERSION,
  cardRefundHelpers,
  expectJsonError,
  type Json,
  LIVE_SK,
  NOT_FOR_CARDS,
  RATE_LIMITS,
  UUID,
  useCardRefundsApp,
} from "../support/card-refunds.ts";
import { FakeCardProvider } from "../support/fake-card-provider.ts";

// Integration tests of the card refund rail (D19): the real app on a real database refunds card
// payments at a local fake provider through the official stripe SDK. This file refunds through the
// API; the provider's inbound refund events are in refund-events.test.ts, the reconciler in
// refund-reconciler.test.ts, what they share in support/card-refunds.ts.

const fake = new FakeCardProvider();
let t: TestApp;
useCardRefundsApp(fake, (app) => {
  t = app;
});

const {
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
} = cardRefundHelpers(() => t, fake);

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
      network: null,
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
