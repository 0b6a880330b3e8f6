import { describe, expect, it } from "vitest";
import { createWorkspace, type TestApp } from "../support/app.ts";
import { cardRefundHelpers, useCardRefundsApp } from "../support/card-refunds.ts";
import { FakeCardProvider } from "../support/fake-card-provider.ts";

// Integration tests of the card refund rail (D19): the reconciler that finishes card refunds left
// pending (a 500, a lost answer, a refund pending at the provider) under the same key, with the
// real app on a real database and a local fake provider. The helpers are in support/card-refunds.ts.

const fake = new FakeCardProvider();
let t: TestApp;
useCardRefundsApp(fake, (app) => {
  t = app;
});

const { forwardedCard, refunded, getPayment, refundRow, refundEvents, createsFor, reconcileLater } =
  cardRefundHelpers(() => t, fake);

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
