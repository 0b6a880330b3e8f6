import { randomUUID } from "node:crypto";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { CARD_PROVIDER_FAILED } from "../../src/modules/card/provider.ts";
import { expireDuePayments } from "../../src/modules/payments/expiry.ts";
import { createWorkspace, startTestApp } from "../support/app.ts";
import {
  API_VERSION,
  BASE,
  cancel,
  cardEventRows,
  createLiveCard,
  createPayment,
  createsFor,
  deliver,
  expectJsonError,
  fake,
  getPayment,
  type Json,
  LIVE_SK,
  LIVE_WHSEC,
  outboxRows,
  outboxTypes,
  paymentRows,
  RATE_LIMITS,
  SANDBOX_SK,
  SANDBOX_WHSEC,
  t,
  UUID,
  useCardRailApp,
} from "../support/card-payments.ts";
import { SESSION_MAX_SECONDS, SESSION_MIN_SECONDS } from "../support/fake-card-provider.ts";

// Live card payments through the API: creation, cancel, expiry, configuration. The provider's
// inbound webhooks and our outbound events: webhooks.test.ts; shared helpers: support/card-payments.ts.

useCardRailApp();

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

    // The response of part 4.1 for the live card payment method.
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
          networks: null,
          x402: null,
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

describe("card payment method configuration", () => {
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
