import { createHmac, timingSafeEqual } from "node:crypto";
import { describe, expect, it } from "vitest";
import { WebhookDispatcher } from "../../src/modules/webhooks/dispatcher.ts";
import { bearer, createWorkspace } from "../support/app.ts";
import {
  cardEventRows,
  createLiveCard,
  createPayment,
  deliver,
  expectJsonError,
  fake,
  getPayment,
  type Json,
  LIVE_WHSEC,
  outboxRows,
  outboxTypes,
  postWebhook,
  resend,
  SANDBOX_WHSEC,
  t,
  UUID,
  useCardRailApp,
} from "../support/card-payments.ts";
import { WebhookReceiver } from "../support/receiver.ts";

// The card provider's webhooks (lifecycle, delayed methods, signatures, de-duplication) and the
// outbound events of card payments; creation and the rest: payments.test.ts; helpers: support/card-payments.ts.

useCardRailApp();

/** The time the payment's receipt shows (its <time datetime>), or null when there is no receipt. */
async function receiptTime(id: string): Promise<string | null> {
  const res = await t.request({ method: "GET", url: `/pay/${id}/receipt` });
  if (res.statusCode === 404) return null;
  expect(res.statusCode).toBe(200);
  expect(res.body).not.toContain("data-tx-hash");
  return /<time datetime="([^"]+)"/.exec(res.body)?.[1] ?? "no time on the receipt";
}

async function confirmedAt(id: string): Promise<string | null> {
  const row = await t.database.db
    .selectFrom("payments")
    .select("confirmed_at")
    .where("id", "=", id)
    .executeTakeFirstOrThrow();
  return row.confirmed_at?.toISOString() ?? null;
}

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
    // Paid by its checkout: the payer's receipt (D25) shows when, and no transaction hash.
    expect(await receiptTime(card.id)).toBe(await confirmedAt(card.id));
    expect(await confirmedAt(card.id)).not.toBeNull();

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
    expect(await receiptTime(card.id)).toBeNull(); // not paid yet: no receipt

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
    expect(await receiptTime(card.id)).toBe(await confirmedAt(card.id));

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
