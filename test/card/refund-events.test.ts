import { describe, expect, it } from "vitest";
import { WebhookDispatcher } from "../../src/modules/webhooks/dispatcher.ts";
import { bearer, createWorkspace, type TestApp } from "../support/app.ts";
import {
  cardRefundHelpers,
  expectJsonError,
  LIVE_SK,
  LIVE_WHSEC,
  useCardRefundsApp,
} from "../support/card-refunds.ts";
import { FakeCardProvider } from "../support/fake-card-provider.ts";
import { WebhookReceiver } from "../support/receiver.ts";

// Integration tests of the card refund rail (D19, with D5/D13's inbound card webhooks): the
// provider's refund events (refund.updated, charge.refunded), signed with the stripe SDK's own
// test helper, applied by the real app on a real database to the refunds it made at a local fake
// provider. The helpers are in support/card-refunds.ts.

const fake = new FakeCardProvider();
let t: TestApp;
useCardRefundsApp(fake, (app) => {
  t = app;
});

const { deliver, forwardedCard, refunded, getPayment, listRefunds, refundRow, refundEvents } =
  cardRefundHelpers(() => t, fake);

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
});

// ---- refunds made in the provider's own dashboard (issue 39, item 4) ------------------------------

/** A refund made at the provider without the service (its dashboard): no metadata of ours. */
async function dashboardRefund(paymentIntent: string, cents: number): Promise<string> {
  const res = await fetch(`${fake.url}/v1/refunds`, {
    method: "POST",
    headers: { authorization: `Bearer ${LIVE_SK}`, "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ payment_intent: paymentIntent, amount: String(cents) }).toString(),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { id: string }).id;
}

describe("POST /api/webhooks/card — refunds made in the provider's dashboard", () => {
  it("records one on its payment once: refundedAmount moves, refund.completed says source provider", async () => {
    const ws = await createWorkspace(t);
    const card = await forwardedCard(ws);
    const outside = await dashboardRefund(card.paymentIntent, 300);
    // refund.created, then charge.refunded listing it, then a redelivery: one refund, counted once.
    const created = fake.refundUpdated(outside, { livemode: true, type: "refund.created" });
    expect((await deliver(created)).json()).toEqual({ received: true });
    expect((await deliver(fake.chargeRefunded(card.paymentIntent, { livemode: true }))).json()).toEqual({
      received: true,
    });
    expect((await deliver(created)).json()).toEqual({ received: true, duplicate: true });

    expect((await getPayment(ws, card.id)).refundedAmount).toBe("3.00");
    const { refunds, total } = await listRefunds(ws, card.id);
    expect(total).toBe(1);
    expect(refunds[0]).toMatchObject({
      paymentId: card.id,
      amount: "3.00",
      status: "completed",
      txHash: outside,
      source: "provider",
    });
    expect((await refundEvents(ws)).map((e) => [e.type, e.data.txHash, e.data.source])).toEqual([
      ["refund.completed", outside, "provider"],
    ]);
    const [claimed] = await t.database.db
      .selectFrom("card_events")
      .selectAll()
      .where("event_id", "=", created.id)
      .execute();
    expect(claimed).toMatchObject({ payment_id: card.id, outcome: expect.stringMatching(/^recorded/) });
  });

  it("is never double-counted with ours: both refunds are recorded, each once, and the payment is refunded in full", async () => {
    const ws = await createWorkspace(t);
    const card = await forwardedCard(ws, "10.00");
    const ours = await refunded(ws, card.id, { amount: "4.00" });
    expect(ours.status).toBe("completed");
    const outside = await dashboardRefund(card.paymentIntent, 600);
    expect((await deliver(fake.chargeRefunded(card.paymentIntent, { livemode: true }))).json()).toEqual({
      received: true,
    });
    expect((await getPayment(ws, card.id)).refundedAmount).toBe("10.00");
    const { refunds } = await listRefunds(ws, card.id);
    expect(refunds.map((r) => [r.amount, r.txHash, r.source ?? "service"])).toEqual([
      ["4.00", ours.txHash, "service"],
      ["6.00", outside, "provider"],
    ]);
    // Nothing is left to refund through the API either.
    const more = await t.request({
      method: "POST",
      url: `/api/v1/payments/${card.id}/refunds`,
      headers: bearer(ws.liveKey),
      payload: { amount: "0.01" },
    });
    expect(more.statusCode, more.body).toBe(400);
  });

  it("one pending at the provider holds its amount and completes on its refund.updated; one that failed records nothing", async () => {
    const ws = await createWorkspace(t);
    const card = await forwardedCard(ws);
    fake.answerNextRefunds("pending");
    const outside = await dashboardRefund(card.paymentIntent, 150);
    expect(
      (await deliver(fake.refundUpdated(outside, { livemode: true, type: "refund.created" }))).json(),
    ).toEqual({
      received: true,
    });
    expect((await getPayment(ws, card.id)).refundedAmount).toBe("1.50");
    expect((await listRefunds(ws, card.id)).refunds[0]).toMatchObject({
      status: "pending",
      source: "provider",
    });
    expect(await refundEvents(ws)).toEqual([]);
    await deliver(fake.refundUpdated(outside, { livemode: true, status: "succeeded" }));
    expect((await listRefunds(ws, card.id)).refunds[0]).toMatchObject({ status: "completed" });
    expect((await refundEvents(ws)).map((e) => e.type)).toEqual(["refund.completed"]);

    fake.answerNextRefunds("failed");
    const failed = await dashboardRefund(card.paymentIntent, 100);
    const event = fake.refundUpdated(failed, { livemode: true, type: "refund.failed" });
    expect((await deliver(event)).json()).toEqual({ received: true });
    expect((await getPayment(ws, card.id)).refundedAmount).toBe("1.50");
    expect((await listRefunds(ws, card.id)).total).toBe(1);
    const [claimed] = await t.database.db
      .selectFrom("card_events")
      .selectAll()
      .where("event_id", "=", event.id)
      .execute();
    expect(claimed?.outcome).toMatch(/not one of ours/);
  });
});
