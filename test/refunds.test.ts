import { createHmac, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import type { InjectOptions, LightMyRequestResponse } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebhookDispatcher } from "../src/modules/webhooks/dispatcher.ts";
import { bearer, type CreatedWorkspace, createWorkspace, startTestApp, type TestApp } from "./support/app.ts";
import { FakeCardProvider } from "./support/fake-card-provider.ts";
import { type ReceivedRequest, WebhookReceiver } from "./support/receiver.ts";

// Refunds of payments and returns of unmatched transfers (decision D19; D6 and D13 for the payout
// rules they share, D20 for their events) against the real app on a real database (PGlite, or
// the PostgreSQL server of DATABASE_URL). Money moves on the simulated ledger: a sandbox crypto
// payment of G credits its net (G − 1.5 %) to the workspace wallet, the faucet adds to it, a
// refund is a transfer from it to the destination. Every expected balance is computed by hand in
// the comment beside it.

type Json = Record<string, unknown>;

const FAILURE_ADDRESS = "0x000000000000000000000000000000000000dEaD";
/** The sender of a sandbox incoming transfer that names none (unmatched.ts). */
const SANDBOX_PAYER = "0x000000000000000000000000000000000000bEEF";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const TX = /^0x[0-9a-f]{64}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const REFUND_KEYS = [
  "amount",
  "createdAt",
  "destinationAddress",
  "id",
  "paymentId",
  "reason",
  "status",
  "tokenSymbol",
  "txHash",
];
const MSG = {
  amount: "Amount must be a positive number",
  exceeded: "Refund exceeds the refundable amount",
  notForwarded: "Only forwarded payments can be refunded",
  notFound: "Payment not found",
  transferNotFound: "Unmatched transfer not found",
  destination: "Invalid destinationAddress format",
  walletType: "Invalid walletType: use eoa or smart_wallet",
  reason: "reason must be a string of at most 500 characters",
  notObject: "Request body must be a JSON object",
  key: "Idempotency-Key must be 1 to 255 characters",
  keyUsed: "Idempotency key already used",
  insufficient: "Insufficient balance",
  paused: "Payouts are paused for this workspace by the circuit breaker",
  noPayer: "destinationAddress is required: the payment has no payerAddress to refund to",
} as const;

const LIVE_SK = "sk_test_refundsLiveEnvironmentKey0123";
const LIVE_WHSEC = "whsec_refunds_live_secret_0123456789abcdef";

/** A fresh address (lower case), so each test's balances start at zero. */
const address = () => `0x${randomBytes(20).toString("hex")}`;

const card = new FakeCardProvider();
let t: TestApp;

beforeAll(async () => {
  await card.start();
  t = await startTestApp({
    RATE_LIMIT_SANDBOX: "100000",
    RATE_LIMIT_LIVE: "100000",
    CARD_SECRET_KEY_LIVE: LIVE_SK,
    CARD_WEBHOOK_SECRET_LIVE: LIVE_WHSEC,
    CARD_API_BASE: card.url,
  });
});

afterAll(async () => {
  await t?.close();
  await card.stop();
});

// ---- helpers -----------------------------------------------------------------------------------

function post(key: string, url: string, payload?: unknown, headers: Record<string, string> = {}) {
  return t.request({
    method: "POST",
    url,
    headers: { ...bearer(key), ...headers },
    ...(payload === undefined ? {} : { payload: payload as InjectOptions["payload"] }),
  });
}

function get(key: string, url: string) {
  return t.request({ method: "GET", url, headers: bearer(key) });
}

async function getOk(key: string, url: string): Promise<Json> {
  const res = await get(key, url);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

const refund = (key: string, paymentId: string, body?: unknown, headers: Record<string, string> = {}) =>
  post(key, `/api/v1/payments/${paymentId}/refunds`, body, headers);

const returnTransfer = (key: string, id: string, body?: unknown, headers: Record<string, string> = {}) =>
  post(key, `/api/v1/transfers/unmatched/${id}/return`, body, headers);

/** A 201 refund: its body, checked to be exactly the refund object of D19. */
async function refundOk(
  key: string,
  paymentId: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Json> {
  const res = await refund(key, paymentId, body, headers);
  expect(res.statusCode, res.body).toBe(201);
  expect(res.headers["idempotent-replayed"]).toBeUndefined();
  const json = res.json();
  expect(Object.keys(json)).toEqual(["refund"]);
  expect(Object.keys(json.refund).sort()).toEqual(REFUND_KEYS);
  expect(json.refund.id).toMatch(UUID);
  expect(json.refund.createdAt).toMatch(ISO);
  return json.refund;
}

function expectError(res: LightMyRequestResponse, status: number, body: Json) {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers["content-type"]).toMatch(/^application\/json/);
  expect(res.json()).toEqual(body);
}

/** A sandbox crypto payment (forwarded at creation, its net credited to the workspace wallet). */
async function pay(ws: CreatedWorkspace, amount: string, tokenSymbol = "USDC"): Promise<Json> {
  const res = await post(ws.testKey, "/api/v1/payments", { tokenSymbol, amount });
  expect(res.statusCode, res.body).toBe(201);
  const payment = res.json().payment as Json;
  expect(payment.status).toBe("forwarded");
  return payment;
}

async function faucet(ws: CreatedWorkspace, amount: string, tokenSymbol = "USDC") {
  const res = await post(ws.testKey, "/api/v1/sandbox/faucet", { tokenSymbol, amount });
  expect(res.statusCode, res.body).toBe(200);
}

async function payment(ws: CreatedWorkspace, id: string, key = ws.testKey): Promise<Json> {
  return (await getOk(key, `/api/v1/payments/${id}`)).payment as Json;
}

async function refundsOf(ws: CreatedWorkspace, id: string, query = ""): Promise<Json> {
  return getOk(ws.testKey, `/api/v1/payments/${id}/refunds${query}`);
}

/** The workspace EOA's balance of `token` as GET /api/v1/wallet/balance shows it. */
async function wallet(ws: CreatedWorkspace, token = "USDC"): Promise<string> {
  const res = await get(ws.testKey, "/api/v1/wallet/balance");
  expect(res.statusCode, res.body).toBe(200);
  return res.json().eoa.balances[token];
}

/** An address's balance on the simulated ledger, in smallest units. */
async function ledger(addr: string, token = "USDC"): Promise<bigint> {
  const rows = await t.database.db
    .selectFrom("ledger_entries")
    .select("amount")
    .where("address", "=", addr.toLowerCase())
    .where("token_symbol", "=", token)
    .execute();
  return rows.reduce((sum, row) => sum + BigInt(row.amount), 0n);
}

async function payoutState(ws: CreatedWorkspace): Promise<Json> {
  return getOk(ws.testKey, `/api/v1/workspaces/${ws.id}/payout-state`);
}

function outbox(ws: CreatedWorkspace, type: string) {
  return t.database.db
    .selectFrom("outbox_events")
    .select(["payload"])
    .where("workspace_id", "=", ws.id)
    .where("event_type", "=", type)
    .orderBy("id")
    .execute();
}

async function incoming(ws: CreatedWorkspace, body: Json): Promise<Json> {
  const res = await post(ws.testKey, "/api/v1/sandbox/incoming-transfer", body);
  expect(res.statusCode, res.body).toBe(201);
  expect(Object.keys(res.json())).toEqual(["transfer"]);
  return res.json().transfer as Json;
}

async function unmatched(ws: CreatedWorkspace, id: string): Promise<Json | undefined> {
  const list = await getOk(ws.testKey, "/api/v1/transfers/unmatched?limit=100");
  return (list.transfers as Json[]).find((x) => x.id === id);
}

// ---- refunds that complete ---------------------------------------------------------------------

describe("POST /api/v1/payments/{id}/refunds: partial and multiple refunds", () => {
  it("refunds in parts up to the gross, moving exactly the amounts from the wallet to each destination", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    // gross 10.00, fee 0.15, net 9.85 credited to the wallet; the faucet adds 5.00 → 14.85.
    expect(p).toMatchObject({ grossAmount: "10.00", refundedAmount: "0.00", amountReceived: null });
    await faucet(ws, "5");
    expect(await wallet(ws)).toBe("14.85");
    const [a, b] = [address(), address()];

    const first = await refundOk(ws.testKey, p.id as string, {
      amount: "2.5",
      destinationAddress: a,
      reason: "damaged item",
    });
    expect(first).toEqual({
      id: first.id,
      paymentId: p.id,
      amount: "2.50",
      tokenSymbol: "USDC",
      destinationAddress: a,
      status: "completed",
      txHash: expect.stringMatching(TX),
      reason: "damaged item",
      createdAt: first.createdAt,
    });
    // 14.85 − 2.50 = 12.35
    expect(await wallet(ws)).toBe("12.35");
    expect(await ledger(a)).toBe(2_500_000n);
    expect((await payment(ws, p.id as string)).refundedAmount).toBe("2.50");

    const second = await refundOk(ws.testKey, p.id as string, { amount: "3.25", destinationAddress: b });
    expect(second).toMatchObject({
      amount: "3.25",
      destinationAddress: b,
      status: "completed",
      reason: null,
    });
    // 12.35 − 3.25 = 9.10
    expect(await wallet(ws)).toBe("9.10");
    expect(await ledger(b)).toBe(3_250_000n);
    expect((await payment(ws, p.id as string)).refundedAmount).toBe("5.75");

    // 10.00 − 5.75 = 4.25 left: one unit more is refused, with exactly what is left.
    expectError(
      await refund(ws.testKey, p.id as string, { amount: "4.250001", destinationAddress: a }),
      400,
      {
        error: MSG.exceeded,
        refundable: "4.25",
      },
    );
    expect(await wallet(ws)).toBe("9.10");

    // No amount: the rest.
    const rest = await refundOk(ws.testKey, p.id as string, { destinationAddress: a });
    expect(rest).toMatchObject({ amount: "4.25", status: "completed", destinationAddress: a });
    // 9.10 − 4.25 = 4.85; a received 2.50 + 4.25 = 6.75
    expect(await wallet(ws)).toBe("4.85");
    expect(await ledger(a)).toBe(6_750_000n);
    expect(await ledger(b)).toBe(3_250_000n);
    expect(await ledger(ws.eoaAddress)).toBe(4_850_000n);
    const after = await payment(ws, p.id as string);
    expect(after).toMatchObject({ status: "forwarded", grossAmount: "10.00", refundedAmount: "10.00" });

    // Nothing is left: any amount, or none, is refused with refundable 0.00, and nothing moves.
    for (const body of [{ amount: "0.000001", destinationAddress: a }, { destinationAddress: a }]) {
      expectError(await refund(ws.testKey, p.id as string, body), 400, {
        error: MSG.exceeded,
        refundable: "0.00",
      });
    }
    expect(await wallet(ws)).toBe("4.85");

    // The list, oldest first, shows the three as they were answered; each txHash is the ledger's.
    const list = await refundsOf(ws, p.id as string);
    expect(list).toEqual({ refunds: [first, second, rest], total: 3, limit: expect.any(Number), offset: 0 });
    const page = await refundsOf(ws, p.id as string, "?limit=1&offset=1");
    expect(page).toEqual({ refunds: [second], total: 3, limit: 1, offset: 1 });
    const transfers = await t.database.db
      .selectFrom("ledger_transactions")
      .select(["tx_hash", "to_address", "amount", "status"])
      .where("from_address", "=", ws.eoaAddress.toLowerCase())
      .execute();
    expect(transfers.map((x) => [x.tx_hash, x.to_address, String(x.amount), x.status]).sort()).toEqual(
      [
        [first.txHash, a, "2500000", "success"],
        [second.txHash, b, "3250000", "success"],
        [rest.txHash, a, "4250000", "success"],
      ].sort(),
    );
    // Successful refunds are not failures: the breaker is untouched.
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });
  });

  it("refunds the whole gross by default in one go", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "20");
    // net 19.70 in the wallet; the 0.30 fee is topped up by the faucet → 20.00
    await faucet(ws, "0.30");
    const a = address();
    const all = await refundOk(ws.testKey, p.id as string, { destinationAddress: a });
    expect(all).toMatchObject({ amount: "20.00", status: "completed" });
    expect(await wallet(ws)).toBe("0.00");
    expect(await ledger(a)).toBe(20_000_000n);
    expect((await payment(ws, p.id as string)).refundedAmount).toBe("20.00");
  });

  it("formats amounts of an 18-decimal token and refunds to a checksummed address", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "1", "ETH");
    await faucet(ws, "1", "ETH");
    const checksummed = "0x52908400098527886E0F7030069857D2E4169EE7";
    const r = await refundOk(ws.testKey, p.id as string, {
      amount: "0.000000000000000001",
      destinationAddress: checksummed,
    });
    expect(r).toMatchObject({ amount: "0.000000000000000001", tokenSymbol: "ETH", status: "completed" });
    expect(await ledger(checksummed, "ETH")).toBe(1n);
    expect((await payment(ws, p.id as string)).refundedAmount).toBe("0.000000000000000001");
    expectError(
      await refund(ws.testKey, p.id as string, {
        amount: "1.0000000000000000001",
        destinationAddress: checksummed,
      }),
      400,
      {
        error: MSG.amount,
      },
    );
  });
});

// ---- validation ---------------------------------------------------------------------------------

describe("POST /api/v1/payments/{id}/refunds: validation", () => {
  it("answers each malformed field with its 400 message, never a 500, and records nothing", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    await faucet(ws, "5");
    const a = address();
    const id = p.id as string;
    const cases: Array<[string, unknown, string]> = [
      ["amount as a number", { amount: 5, destinationAddress: a }, MSG.amount],
      ["an exponent", { amount: "1e3", destinationAddress: a }, MSG.amount],
      ["a negative amount", { amount: "-1", destinationAddress: a }, MSG.amount],
      ["a plus sign", { amount: "+1", destinationAddress: a }, MSG.amount],
      ["zero", { amount: "0", destinationAddress: a }, MSG.amount],
      ["0.00", { amount: "0.00", destinationAddress: a }, MSG.amount],
      ["more decimals than USDC has", { amount: "1.0000001", destinationAddress: a }, MSG.amount],
      ["hex", { amount: "0x10", destinationAddress: a }, MSG.amount],
      ["spaces", { amount: " 1", destinationAddress: a }, MSG.amount],
      ["empty", { amount: "", destinationAddress: a }, MSG.amount],
      ["amount as an object", { amount: { value: "1" }, destinationAddress: a }, MSG.amount],
      ["a short address", { amount: "1", destinationAddress: "0x1234" }, MSG.destination],
      ["a non-hex address", { amount: "1", destinationAddress: `0x${"g".repeat(40)}` }, MSG.destination],
      ["an address as a number", { amount: "1", destinationAddress: 12 }, MSG.destination],
      [
        "walletType workspace",
        { amount: "1", destinationAddress: a, walletType: "workspace" },
        MSG.walletType,
      ],
      ["walletType as a number", { amount: "1", destinationAddress: a, walletType: 1 }, MSG.walletType],
      [
        "a reason of 501 characters",
        { amount: "1", destinationAddress: a, reason: "r".repeat(501) },
        MSG.reason,
      ],
      ["a reason as a number", { amount: "1", destinationAddress: a, reason: 7 }, MSG.reason],
    ];
    for (const [what, body, message] of cases) {
      const res = await refund(ws.testKey, id, body);
      expect(res.statusCode, `${what}: ${res.body}`).toBe(400);
      expect(res.headers["content-type"], what).toMatch(/^application\/json/);
      expect(res.json(), what).toEqual({ error: message });
    }

    for (const raw of ["[1,2]", '"refund"', "42", "true"]) {
      const res = await t.request({
        method: "POST",
        url: `/api/v1/payments/${id}/refunds`,
        headers: { ...bearer(ws.testKey), "content-type": "application/json" },
        payload: raw,
      });
      expect(res.statusCode, `${raw}: ${res.body}`).toBe(400);
      expect(res.json(), raw).toEqual({ error: MSG.notObject });
    }
    const broken = await t.request({
      method: "POST",
      url: `/api/v1/payments/${id}/refunds`,
      headers: { ...bearer(ws.testKey), "content-type": "application/json" },
      payload: "{not json",
    });
    expect(broken.statusCode, broken.body).toBe(400);
    expect(broken.json()).toEqual({ error: "Invalid JSON body" });

    const longKey = await refund(
      ws.testKey,
      id,
      { amount: "1", destinationAddress: a },
      {
        "idempotency-key": "k".repeat(256),
      },
    );
    expectError(longKey, 400, { error: MSG.key });
    const emptyKey = await refund(
      ws.testKey,
      id,
      { amount: "1", destinationAddress: a },
      { "idempotency-key": "" },
    );
    expectError(emptyKey, 400, { error: MSG.key });

    // The sandbox payment has no payer to send back to: destinationAddress is required.
    expectError(await refund(ws.testKey, id, { amount: "1" }), 400, { error: MSG.noPayer });
    expectError(await refund(ws.testKey, id), 400, { error: MSG.noPayer });

    // Nothing was refunded, nothing moved, nothing counted.
    expect((await payment(ws, id)).refundedAmount).toBe("0.00");
    expect(await refundsOf(ws, id)).toMatchObject({ refunds: [], total: 0 });
    expect(await wallet(ws)).toBe("14.85");
    expect(await ledger(a)).toBe(0n);
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });

    // The edges that are valid: a key of 255 characters, a reason of 500.
    const ok = await refundOk(
      ws.testKey,
      id,
      { amount: "1", destinationAddress: a, reason: "r".repeat(500), walletType: "eoa" },
      { "idempotency-key": "k".repeat(255) },
    );
    expect(ok).toMatchObject({ amount: "1.00", reason: "r".repeat(500), status: "completed" });
    expect(await ledger(a)).toBe(1_000_000n);
  });

  it("refuses a smart_wallet refund for a workspace without a smart wallet with a 400, recording nothing", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    const res = await refund(ws.testKey, p.id as string, {
      amount: "1",
      destinationAddress: address(),
      walletType: "smart_wallet",
    });
    expectError(res, 400, {
      error: "No smart wallet for this workspace: create one with POST /api/v1/workspaces/{id}/smart-wallet",
    });
    expect((await payment(ws, p.id as string)).refundedAmount).toBe("0.00");
    expect(await refundsOf(ws, p.id as string)).toMatchObject({ total: 0 });
  });
});

// ---- which payments ---------------------------------------------------------------------------

describe("POST /api/v1/payments/{id}/refunds: which payments", () => {
  it("refuses a pending and a cancelled payment with 400 and their status", async () => {
    const ws = await createWorkspace(t);
    // A live card payment stays pending until the provider says it was paid.
    const created = await post(ws.liveKey, "/api/v1/payments", {
      paymentMethod: "card",
      tokenSymbol: "USD",
      amount: "12.00",
    });
    expect(created.statusCode, created.body).toBe(201);
    const pending = created.json().payment as Json;
    expect(pending.status).toBe("pending");
    expectError(await refund(ws.liveKey, pending.id as string, { amount: "1.00" }), 400, {
      error: MSG.notForwarded,
      status: "pending",
    });

    const cancelled = await post(ws.liveKey, `/api/v1/payments/${pending.id}/cancel`);
    expect(cancelled.statusCode, cancelled.body).toBe(200);
    expect(cancelled.json().payment.status).toBe("cancelled");
    expectError(await refund(ws.liveKey, pending.id as string), 400, {
      error: MSG.notForwarded,
      status: "cancelled",
    });
    const after = await payment(ws, pending.id as string, ws.liveKey);
    expect(after).toMatchObject({ status: "cancelled", refundedAmount: "0.00" });
    // Its refunds list is empty.
    const list = await get(ws.liveKey, `/api/v1/payments/${pending.id}/refunds`);
    expect(list.statusCode, list.body).toBe(200);
    expect(list.json()).toMatchObject({ refunds: [], total: 0 });
  });

  it("answers 404 for an unknown payment, another workspace's, and the other environment's key", async () => {
    const ws = await createWorkspace(t);
    const other = await createWorkspace(t);
    const p = await pay(ws, "10");
    await faucet(ws, "5");
    await faucet(other, "20");
    const a = address();
    const body = { amount: "1", destinationAddress: a };
    const notFound = { error: MSG.notFound };

    expectError(await refund(ws.testKey, randomUUID(), body), 404, notFound);
    expectError(await refund(ws.testKey, "not-a-uuid", body), 404, notFound);
    // Tenant isolation: the other workspace's key, with money in its own wallet.
    expectError(await refund(other.testKey, p.id as string, body), 404, notFound);
    expectError(
      await refund(other.testKey, p.id as string, body, { "idempotency-key": "iso-1" }),
      404,
      notFound,
    );
    // Environment isolation: the same workspace's live key.
    expectError(await refund(ws.liveKey, p.id as string, body), 404, notFound);
    for (const key of [other.testKey, ws.liveKey]) {
      expectError(await get(key, `/api/v1/payments/${p.id}/refunds`), 404, notFound);
    }
    expectError(await get(ws.testKey, `/api/v1/payments/${randomUUID()}/refunds`), 404, notFound);

    expect((await payment(ws, p.id as string)).refundedAmount).toBe("0.00");
    expect(await ledger(a)).toBe(0n);
    expect(await wallet(other)).toBe("20.00");
    expect(await wallet(ws)).toBe("14.85");
    // The key the other workspace sent named nothing of its own: it can use it for itself.
    const mine = await pay(other, "1");
    const r = await refundOk(other.testKey, mine.id as string, body, { "idempotency-key": "iso-1" });
    expect(r).toMatchObject({ paymentId: mine.id, amount: "1.00", status: "completed" });
  });
});

// ---- balance --------------------------------------------------------------------------------------

describe("POST /api/v1/payments/{id}/refunds: the wallet's balance", () => {
  it("answers 400 Insufficient balance and records nothing: refundedAmount unchanged, the key still free", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    const a = address();
    const id = p.id as string;
    // The wallet holds the net, 9.85: the gross cannot be sent back.
    const short = await refund(
      ws.testKey,
      id,
      { amount: "10", destinationAddress: a },
      { "idempotency-key": "short-1" },
    );
    expectError(short, 400, {
      error: MSG.insufficient,
      available: "9.85",
      requested: "10.00",
      tokenSymbol: "USDC",
    });
    expect((await payment(ws, id)).refundedAmount).toBe("0.00");
    expect(await refundsOf(ws, id)).toMatchObject({ refunds: [], total: 0 });
    expect(await wallet(ws)).toBe("9.85");
    expect(await ledger(a)).toBe(0n);
    // A balance pre-check is not a failed transfer (D13).
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });
    expect(await outbox(ws, "refund.failed")).toEqual([]);

    // Funded, the same key and body make the refund (not a replay of the refusal).
    await faucet(ws, "0.15");
    const res = await refund(
      ws.testKey,
      id,
      { amount: "10", destinationAddress: a },
      { "idempotency-key": "short-1" },
    );
    expect(res.statusCode, res.body).toBe(201);
    expect(res.headers["idempotent-replayed"]).toBeUndefined();
    expect(res.json().refund).toMatchObject({ amount: "10.00", status: "completed" });
    expect(await wallet(ws)).toBe("0.00");
    expect(await ledger(a)).toBe(10_000_000n);
    expect((await payment(ws, id)).refundedAmount).toBe("10.00");
  });

  it("without a key: an insufficient balance leaves the whole gross refundable", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    const a = address();
    const id = p.id as string;
    expect((await refund(ws.testKey, id, { destinationAddress: a })).statusCode).toBe(400);
    expect((await payment(ws, id)).refundedAmount).toBe("0.00");
    // 10.00 is still refundable: 10.000001 is refused with exactly that.
    expectError(await refund(ws.testKey, id, { amount: "10.000001", destinationAddress: a }), 400, {
      error: MSG.exceeded,
      refundable: "10.00",
    });
    await faucet(ws, "0.15");
    expect(await refundOk(ws.testKey, id, { destinationAddress: a })).toMatchObject({ amount: "10.00" });
  });
});

// ---- failures and the circuit breaker -------------------------------------------------------

describe("POST /api/v1/payments/{id}/refunds: failed transfers and the circuit breaker", () => {
  it("answers 201 failed for a transfer that reverts, gives the amount back, emits refund.failed and counts it", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    const id = p.id as string;
    const failed = await refundOk(ws.testKey, id, {
      amount: "4",
      destinationAddress: FAILURE_ADDRESS,
      reason: "to the failure address",
    });
    expect(failed).toMatchObject({
      paymentId: id,
      amount: "4.00",
      tokenSymbol: "USDC",
      destinationAddress: FAILURE_ADDRESS,
      status: "failed",
      reason: "to the failure address",
    });
    // The hash of the reverted transfer the ledger recorded.
    expect(failed.txHash).toMatch(TX);
    // Nothing left the wallet; the 4.00 is refundable again.
    expect(await wallet(ws)).toBe("9.85");
    expect(await ledger(FAILURE_ADDRESS)).toBe(0n);
    expect((await payment(ws, id)).refundedAmount).toBe("0.00");
    expect(await refundsOf(ws, id)).toMatchObject({ refunds: [failed], total: 1 });
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 1 });

    const events = await outbox(ws, "refund.failed");
    expect(events).toHaveLength(1);
    expect(events[0]?.payload).toEqual({ ...failed, error: "execution reverted (sandbox failure address)" });
    expect(await outbox(ws, "refund.completed")).toEqual([]);
    expect(await outbox(ws, "payout.failed")).toEqual([]);

    // The whole gross can still be refunded (the failed 4.00 took nothing).
    await faucet(ws, "0.15");
    const all = await refundOk(ws.testKey, id, { destinationAddress: address() });
    expect(all).toMatchObject({ amount: "10.00", status: "completed" });
    // A success ends the streak.
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });
  });

  it("three failed refunds pause refunds and payouts (503 CIRCUIT_BREAKER_OPEN) until resumed", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    await faucet(ws, "10");
    const id = p.id as string;
    for (const streak of [1, 2, 3]) {
      const r = await refundOk(ws.testKey, id, { amount: "1", destinationAddress: FAILURE_ADDRESS });
      expect(r.status).toBe("failed");
      expect(await payoutState(ws)).toMatchObject({ failStreak: streak });
    }
    const state = await payoutState(ws);
    expect(state).toMatchObject({ status: "paused", failStreak: 3, pausedAt: expect.stringMatching(ISO) });
    expect((await payment(ws, id)).refundedAmount).toBe("0.00");

    const a = address();
    const paused = await refund(ws.testKey, id, { amount: "1", destinationAddress: a });
    expect(paused.statusCode, paused.body).toBe(503);
    expect(paused.json()).toEqual({
      error: MSG.paused,
      code: "CIRCUIT_BREAKER_OPEN",
      circuitBreaker: true,
      failStreak: 3,
      pausedAt: state.pausedAt,
      resumeAction: expect.any(String),
    });
    const payout = await post(ws.testKey, "/api/v1/payouts", {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: a,
    });
    expect(payout.statusCode, payout.body).toBe(503);
    expect(payout.json()).toMatchObject({ code: "CIRCUIT_BREAKER_OPEN", circuitBreaker: true });
    // A return is paused as well.
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "1" });
    const ret = await returnTransfer(ws.testKey, transfer.id as string);
    expect(ret.statusCode, ret.body).toBe(503);
    expect(ret.json()).toMatchObject({ code: "CIRCUIT_BREAKER_OPEN" });
    expect((await unmatched(ws, transfer.id as string))?.status).toBe("open");
    expect(await ledger(a)).toBe(0n);
    expect((await payment(ws, id)).refundedAmount).toBe("0.00");
    expect(await outbox(ws, "refund.failed")).toHaveLength(3);

    const resumed = await post(ws.testKey, `/api/v1/workspaces/${ws.id}/resume`);
    expect(resumed.statusCode, resumed.body).toBe(200);
    const r = await refundOk(ws.testKey, id, { amount: "1", destinationAddress: a });
    expect(r.status).toBe("completed");
    expect(await ledger(a)).toBe(1_000_000n);
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });
  });

  it("a failed payout and failed refunds share one streak", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    const failedPayout = await post(ws.testKey, "/api/v1/payouts", {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: FAILURE_ADDRESS,
    });
    expect(failedPayout.statusCode, failedPayout.body).toBe(500);
    expect(await payoutState(ws)).toMatchObject({ failStreak: 1 });
    await refundOk(ws.testKey, p.id as string, { amount: "1", destinationAddress: FAILURE_ADDRESS });
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 2 });
    // The third failure, a payout's, pauses both.
    const third = await post(ws.testKey, "/api/v1/payouts", {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: FAILURE_ADDRESS,
    });
    expect(third.statusCode, third.body).toBe(503);
    const paused = await refund(ws.testKey, p.id as string, { amount: "1", destinationAddress: address() });
    expect(paused.statusCode, paused.body).toBe(503);
    expect(paused.json()).toMatchObject({ code: "CIRCUIT_BREAKER_OPEN", failStreak: 3 });
  });
});

// ---- idempotency ------------------------------------------------------------------------------

describe("POST /api/v1/payments/{id}/refunds: Idempotency-Key", () => {
  it("replays the same request with the same refund, and refuses another under the key with 409", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    const q = await pay(ws, "10");
    const a = address();
    const id = p.id as string;
    const body = { amount: "1.5", destinationAddress: a, reason: "late" };
    const first = await refundOk(ws.testKey, id, body, { "idempotency-key": "refund-1" });

    // Same key, same JSON (another key order): the same refund, marked replayed, nothing moves again.
    for (const again of [body, { reason: "late", destinationAddress: a, amount: "1.5" }]) {
      const res = await refund(ws.testKey, id, again, { "idempotency-key": "refund-1" });
      expect(res.statusCode, res.body).toBe(201);
      expect(res.headers["idempotent-replayed"]).toBe("true");
      expect(res.json()).toEqual({ refund: first });
    }
    expect(await ledger(a)).toBe(1_500_000n);
    expect((await payment(ws, id)).refundedAmount).toBe("1.50");
    expect(await refundsOf(ws, id)).toMatchObject({ total: 1 });

    // Same key, another request: 409 naming the refund the key made.
    for (const [what, target, other] of [
      ["another amount", id, { ...body, amount: "2" }],
      ["1.50 spelt otherwise", id, { ...body, amount: "1.50" }],
      ["no reason", id, { amount: "1.5", destinationAddress: a }],
      ["another payment", q.id as string, body],
    ] as Array<[string, string, Json]>) {
      const res = await refund(ws.testKey, target, other, { "idempotency-key": "refund-1" });
      expect(res.statusCode, `${what}: ${res.body}`).toBe(409);
      expect(res.json(), what).toEqual({ error: MSG.keyUsed, refund: first });
    }
    expect(await ledger(a)).toBe(1_500_000n);
    expect((await payment(ws, id)).refundedAmount).toBe("1.50");
    expect((await payment(ws, q.id as string)).refundedAmount).toBe("0.00");

    // Another key is another refund.
    const second = await refundOk(ws.testKey, id, body, { "idempotency-key": "refund-2" });
    expect(second.id).not.toBe(first.id);
    expect(await ledger(a)).toBe(3_000_000n);
  });

  it("replays a refund of the rest after the payment was fully refunded, and answers a failed one as failed", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    await faucet(ws, "1");
    const a = address();
    const id = p.id as string;
    const all = await refundOk(ws.testKey, id, { destinationAddress: a }, { "idempotency-key": "all" });
    expect(all.amount).toBe("10.00");
    const again = await refund(ws.testKey, id, { destinationAddress: a }, { "idempotency-key": "all" });
    expect(again.statusCode, again.body).toBe(201);
    expect(again.headers["idempotent-replayed"]).toBe("true");
    expect(again.json()).toEqual({ refund: all });

    const q = await pay(ws, "10");
    const failed = await refundOk(
      ws.testKey,
      q.id as string,
      { amount: "1", destinationAddress: FAILURE_ADDRESS },
      { "idempotency-key": "fails" },
    );
    expect(failed.status).toBe("failed");
    const repeat = await refund(
      ws.testKey,
      q.id as string,
      { amount: "1", destinationAddress: FAILURE_ADDRESS },
      { "idempotency-key": "fails" },
    );
    expect(repeat.statusCode, repeat.body).toBe(201);
    expect(repeat.headers["idempotent-replayed"]).toBe("true");
    expect(repeat.json()).toEqual({ refund: failed });
    // The replay sent nothing and counted nothing.
    expect(await payoutState(ws)).toMatchObject({ failStreak: 1 });
    expect(await outbox(ws, "refund.failed")).toHaveLength(1);
  });

  it("keys of refunds and returns are one space: a return under a refund's key is a 409", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    const r = await refundOk(
      ws.testKey,
      p.id as string,
      { amount: "1", destinationAddress: address() },
      {
        "idempotency-key": "shared",
      },
    );
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "2" });
    const res = await returnTransfer(ws.testKey, transfer.id as string, {}, { "idempotency-key": "shared" });
    expectError(res, 409, { error: MSG.keyUsed, refund: r });
    expect((await unmatched(ws, transfer.id as string))?.status).toBe("open");
  });
});

// ---- events -----------------------------------------------------------------------------------

function hmacVerifies(secret: string, rawBody: string, header: unknown): boolean {
  if (typeof header !== "string" || !/^[0-9a-f]{64}$/.test(header)) return false;
  const expected = createHmac("sha256", Buffer.from(secret, "utf8"))
    .update(Buffer.from(rawBody, "utf8"))
    .digest();
  const given = Buffer.from(header, "hex");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

describe("refund.completed and refund.failed webhooks", () => {
  let dispatcher: WebhookDispatcher;
  const receivers: WebhookReceiver[] = [];
  beforeAll(() => {
    dispatcher = new WebhookDispatcher(t.app.ctx, { pollIntervalMs: 25 });
    dispatcher.start();
  });
  afterAll(async () => {
    await dispatcher.stop();
    for (const r of receivers) await r.stop();
  });

  async function receiver(): Promise<WebhookReceiver> {
    const r = new WebhookReceiver();
    await r.start();
    receivers.push(r);
    return r;
  }

  async function register(key: string, url: string, events: string[]): Promise<string> {
    const res = await post(key, "/api/v1/webhooks", { url, events });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().webhook.signingSecret;
  }

  /** A refund that completes, one that fails and a return, in `ws`; their 201 bodies. */
  async function threeRefunds(ws: CreatedWorkspace): Promise<Json[]> {
    const p = await pay(ws, "10");
    const a = address();
    const done = await refundOk(ws.testKey, p.id as string, {
      amount: "2",
      destinationAddress: a,
      reason: "r1",
    });
    const failed = await refundOk(ws.testKey, p.id as string, {
      amount: "3",
      destinationAddress: FAILURE_ADDRESS,
    });
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "0.5", fromAddress: a });
    const returned = await returnTransfer(ws.testKey, transfer.id as string, { reason: "not ours" });
    expect(returned.statusCode, returned.body).toBe(201);
    return [done, failed, returned.json().refund as Json];
  }

  const isRefundEvent = (r: ReceivedRequest) => String(r.json.event).startsWith("refund.");

  function expectRefundEvents(got: ReceivedRequest[], [done, failed, ret]: Json[]) {
    const bodies = got.map((x) => x.json);
    for (const x of got) expect(Object.keys(x.json)).toEqual(["event", "data"]);
    const byId = (id: unknown) => bodies.find((b) => (b.data as Json).id === id);
    expect(byId(done?.id)).toEqual({ event: "refund.completed", data: done });
    expect(byId(failed?.id)).toEqual({
      event: "refund.failed",
      data: { ...failed, error: "execution reverted (sandbox failure address)" },
    });
    expect(byId(ret?.id)).toEqual({ event: "refund.completed", data: ret });
    expect(bodies).toHaveLength(3);
  }

  it("accepts refund.completed and refund.failed in a registration (D20)", async () => {
    const ws = await createWorkspace(t);
    const r = await receiver();
    for (const events of [["refund.completed"], ["refund.failed"], ["refund.completed", "refund.failed"]]) {
      const res = await post(ws.testKey, "/api/v1/webhooks", { url: r.url, events });
      expect(res.statusCode, `${events}: ${res.body}`).toBe(201);
      expect(res.json().webhook.events).toEqual(events);
    }
  });

  it("delivers each refund and return to a * subscription as exactly {event, data}, signed", async () => {
    const ws = await createWorkspace(t);
    const all = await receiver();
    const unrelated = await receiver();
    const secret = await register(ws.testKey, all.url, ["*"]);
    await register(ws.testKey, unrelated.url, ["payout.completed"]);
    const made = await threeRefunds(ws);
    const got = await all.waitFor(3, isRefundEvent);
    expectRefundEvents(got, made);
    for (const x of got) {
      expect(hmacVerifies(secret, x.rawBody, x.headers["x-service-signature"])).toBe(true);
      expect(hmacVerifies(`${secret}x`, x.rawBody, x.headers["x-service-signature"])).toBe(false);
      expect(x.headers["x-service-event"]).toBe(x.json.event);
    }
    await all.waitFor(1, (x) => x.json.event === "payment.forwarded");
    // Neither refunds nor returns are payout events.
    expect(unrelated.received).toEqual([]);
  });

  it("delivers to a registration naming the refund events those events only", async () => {
    const ws = await createWorkspace(t);
    const named = await receiver();
    const secret = await register(ws.testKey, named.url, ["refund.completed", "refund.failed"]);
    const made = await threeRefunds(ws);
    const got = await named.waitFor(3, isRefundEvent);
    expectRefundEvents(got, made);
    for (const x of got) expect(hmacVerifies(secret, x.rawBody, x.headers["x-service-signature"])).toBe(true);
    expect(named.received.filter((x) => !isRefundEvent(x))).toEqual([]);
  });
});

// ---- payouts do not show refunds --------------------------------------------------------------

describe("payouts and refunds are apart", () => {
  it("GET /api/v1/payouts and its CSV export list payouts only", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    await faucet(ws, "10");
    await refundOk(ws.testKey, p.id as string, { amount: "1", destinationAddress: address() });
    await refundOk(ws.testKey, p.id as string, { amount: "1", destinationAddress: FAILURE_ADDRESS });
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "1" });
    expect((await returnTransfer(ws.testKey, transfer.id as string)).statusCode).toBe(201);

    expect(await getOk(ws.testKey, "/api/v1/payouts")).toMatchObject({ payouts: [], total: 0 });
    const csv = await get(ws.testKey, "/api/v1/payouts/export.csv");
    expect(csv.statusCode, csv.body).toBe(200);
    expect(csv.body.trim().split(/\r?\n/)).toHaveLength(1);

    const dest = address();
    const paid = await post(ws.testKey, "/api/v1/payouts", {
      tokenSymbol: "USDC",
      amount: "2",
      destinationAddress: dest,
    });
    expect(paid.statusCode, paid.body).toBe(200);
    const history = await getOk(ws.testKey, "/api/v1/payouts");
    expect(history.total).toBe(1);
    expect(history.payouts).toEqual([
      expect.objectContaining({
        details: expect.objectContaining({ amount: "2.00", destinationAddress: dest }),
      }),
    ]);
    const csvAfter = await get(ws.testKey, "/api/v1/payouts/export.csv");
    expect(csvAfter.body.trim().split(/\r?\n/)).toHaveLength(2);
  });

  it("GET /api/v1/wallet/stats counts payouts only, not refunds or returns", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    await refundOk(ws.testKey, p.id as string, { amount: "1", destinationAddress: address() });
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "1" });
    expect((await returnTransfer(ws.testKey, transfer.id as string)).statusCode).toBe(201);
    const stats = await getOk(ws.testKey, "/api/v1/wallet/stats");
    expect(stats.payouts).toEqual([]);
  });
});

// ---- the unmatched inbox: incoming transfers and returns --------------------------------------

describe("sandbox incoming transfers and their return", () => {
  it("credits the wallet, lists the transfer open, and returns it once to its sender", async () => {
    const ws = await createWorkspace(t);
    const payer = address();
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "7.5", fromAddress: payer });
    expect(transfer).toEqual({
      id: expect.stringMatching(UUID),
      status: "open",
      paymentId: null,
      amount: "7.50",
      token: "USDC",
      from: payer,
      to: ws.eoaAddress,
      txHash: expect.stringMatching(TX),
      blockNumber: expect.any(Number),
      reason: expect.any(String),
      createdAt: expect.stringMatching(ISO),
    });
    expect(await wallet(ws)).toBe("7.50");
    expect(await unmatched(ws, transfer.id as string)).toEqual(transfer);

    const res = await returnTransfer(ws.testKey, transfer.id as string, { reason: "unknown sender" });
    expect(res.statusCode, res.body).toBe(201);
    const ret = res.json().refund as Json;
    expect(ret).toEqual({
      id: expect.stringMatching(UUID),
      paymentId: null,
      amount: "7.50",
      tokenSymbol: "USDC",
      destinationAddress: payer,
      status: "completed",
      txHash: expect.stringMatching(TX),
      reason: "unknown sender",
      createdAt: expect.stringMatching(ISO),
      unmatchedTransferId: transfer.id,
    });
    // 7.50 back: the wallet is empty, the sender holds it.
    expect(await wallet(ws)).toBe("0.00");
    expect(await ledger(payer)).toBe(7_500_000n);
    expect(await unmatched(ws, transfer.id as string)).toEqual({
      ...transfer,
      status: "returned",
      paymentId: null,
    });

    const twice = await returnTransfer(ws.testKey, transfer.id as string);
    expect(twice.statusCode, twice.body).toBe(409);
    expect(twice.json()).toMatchObject({
      error: "Unmatched transfer is already returned",
      status: "returned",
    });
    expect(await ledger(payer)).toBe(7_500_000n);
    expect(await outbox(ws, "refund.completed")).toEqual([{ payload: ret }]);
    // A return is no payment's refund and no payout.
    expect(await getOk(ws.testKey, "/api/v1/payouts")).toMatchObject({ total: 0 });
  });

  it("returns to the sandbox payer by default, or to destinationAddress, and refuses an amount", async () => {
    const ws = await createWorkspace(t);
    const first = await incoming(ws, { tokenSymbol: "ETH", amount: "0.25" });
    expect(first).toMatchObject({ from: SANDBOX_PAYER, to: ws.eoaAddress, amount: "0.25", token: "ETH" });
    const before = await ledger(SANDBOX_PAYER, "ETH");
    const back = await returnTransfer(ws.testKey, first.id as string);
    expect(back.statusCode, back.body).toBe(201);
    expect(back.json().refund).toMatchObject({
      destinationAddress: SANDBOX_PAYER,
      amount: "0.25",
      tokenSymbol: "ETH",
      status: "completed",
    });
    expect((await ledger(SANDBOX_PAYER, "ETH")) - before).toBe(250_000_000_000_000_000n);

    const second = await incoming(ws, { tokenSymbol: "USDC", amount: "3", fromAddress: address() });
    const elsewhere = address();
    expectError(await returnTransfer(ws.testKey, second.id as string, { amount: "1" }), 400, {
      error: "amount cannot be set: a return sends the whole transfer back",
    });
    expectError(await returnTransfer(ws.testKey, second.id as string, { destinationAddress: "0x12" }), 400, {
      error: MSG.destination,
    });
    expectError(await returnTransfer(ws.testKey, second.id as string, { reason: "x".repeat(501) }), 400, {
      error: MSG.reason,
    });
    expect((await unmatched(ws, second.id as string))?.status).toBe("open");
    const to = await returnTransfer(ws.testKey, second.id as string, { destinationAddress: elsewhere });
    expect(to.statusCode, to.body).toBe(201);
    expect(to.json().refund).toMatchObject({
      destinationAddress: elsewhere,
      amount: "3.00",
      status: "completed",
    });
    expect(await ledger(elsewhere)).toBe(3_000_000n);
    expect(await wallet(ws)).toBe("0.00");
  });

  it("refuses incoming transfers with a live key (403) and malformed ones (400)", async () => {
    const ws = await createWorkspace(t);
    const live = await post(ws.liveKey, "/api/v1/sandbox/incoming-transfer", {
      tokenSymbol: "USDC",
      amount: "1",
    });
    expectError(live, 403, {
      error: "Incoming transfers are simulated only in the sandbox: use a svc_test_ key",
    });
    const cases: Array<[Json, string]> = [
      [{ tokenSymbol: "XYZ", amount: "1" }, "Invalid token symbol"],
      [{ tokenSymbol: "USD", amount: "1" }, "Invalid token symbol"],
      [{ tokenSymbol: "USDC", amount: "1e2" }, MSG.amount],
      [{ tokenSymbol: "USDC", amount: 1 }, MSG.amount],
      [{ tokenSymbol: "USDC", amount: "1", fromAddress: "0xnope" }, "Invalid fromAddress format"],
      [{ tokenSymbol: "USDC", amount: "1", walletType: "workspace" }, MSG.walletType],
    ];
    for (const [body, error] of cases) {
      expectError(await post(ws.testKey, "/api/v1/sandbox/incoming-transfer", body), 400, { error });
    }
    expect(await wallet(ws)).toBe("0.00");
    expect(await getOk(ws.testKey, "/api/v1/transfers/unmatched")).toMatchObject({ transfers: [], total: 0 });
  });

  it("answers 404 for another tenant's transfer, the other environment's key and unknown ids", async () => {
    const ws = await createWorkspace(t);
    const other = await createWorkspace(t);
    await faucet(other, "100");
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "4" });
    const notFound = { error: MSG.transferNotFound };
    expectError(await returnTransfer(other.testKey, transfer.id as string), 404, notFound);
    expectError(await returnTransfer(ws.liveKey, transfer.id as string), 404, notFound);
    expectError(await returnTransfer(ws.testKey, randomUUID()), 404, notFound);
    expectError(await returnTransfer(ws.testKey, "nope"), 404, notFound);
    expect(await getOk(other.testKey, "/api/v1/transfers/unmatched")).toMatchObject({ total: 0 });
    expect((await unmatched(ws, transfer.id as string))?.status).toBe("open");
    expect(await wallet(other)).toBe("100.00");
    expect(await wallet(ws)).toBe("4.00");
  });

  it("a failed return leaves the transfer open, and a second return succeeds", async () => {
    const ws = await createWorkspace(t);
    const payer = address();
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "3", fromAddress: payer });
    const failed = await returnTransfer(ws.testKey, transfer.id as string, {
      destinationAddress: FAILURE_ADDRESS,
    });
    expect(failed.statusCode, failed.body).toBe(201);
    expect(failed.json().refund).toMatchObject({
      paymentId: null,
      amount: "3.00",
      destinationAddress: FAILURE_ADDRESS,
      status: "failed",
      unmatchedTransferId: transfer.id,
    });
    expect(await unmatched(ws, transfer.id as string)).toMatchObject({ status: "open", paymentId: null });
    expect(await wallet(ws)).toBe("3.00");
    expect(await payoutState(ws)).toMatchObject({ failStreak: 1 });
    const events = await outbox(ws, "refund.failed");
    expect(events.map((e) => e.payload)).toEqual([{ ...failed.json().refund, error: expect.any(String) }]);

    const ok = await returnTransfer(ws.testKey, transfer.id as string);
    expect(ok.statusCode, ok.body).toBe(201);
    expect(ok.json().refund).toMatchObject({
      destinationAddress: payer,
      status: "completed",
      amount: "3.00",
    });
    expect(ok.json().refund.id).not.toBe(failed.json().refund.id);
    expect(await unmatched(ws, transfer.id as string)).toMatchObject({ status: "returned" });
    expect(await wallet(ws)).toBe("0.00");
    expect(await ledger(payer)).toBe(3_000_000n);
    expect(await payoutState(ws)).toMatchObject({ failStreak: 0 });
  });

  it("a return the wallet cannot cover answers Insufficient balance and leaves the transfer open", async () => {
    const ws = await createWorkspace(t);
    const payer = address();
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "5", fromAddress: payer });
    // The merchant paid the money out meanwhile.
    const out = await post(ws.testKey, "/api/v1/payouts", {
      tokenSymbol: "USDC",
      amount: "4",
      destinationAddress: address(),
    });
    expect(out.statusCode, out.body).toBe(200);
    const short = await returnTransfer(
      ws.testKey,
      transfer.id as string,
      {},
      { "idempotency-key": "ret-short" },
    );
    expectError(short, 400, {
      error: MSG.insufficient,
      available: "1.00",
      requested: "5.00",
      tokenSymbol: "USDC",
    });
    expect(await unmatched(ws, transfer.id as string)).toMatchObject({ status: "open" });
    expect(await payoutState(ws)).toMatchObject({ failStreak: 0 });

    await faucet(ws, "4");
    const ok = await returnTransfer(
      ws.testKey,
      transfer.id as string,
      {},
      { "idempotency-key": "ret-short" },
    );
    expect(ok.statusCode, ok.body).toBe(201);
    expect(ok.json().refund).toMatchObject({ status: "completed", amount: "5.00" });
    expect(await ledger(payer)).toBe(5_000_000n);
    expect(await unmatched(ws, transfer.id as string)).toMatchObject({ status: "returned" });
  });

  it("replays a return under its Idempotency-Key and refuses another request under it", async () => {
    const ws = await createWorkspace(t);
    const payer = address();
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "2", fromAddress: payer });
    const first = await returnTransfer(
      ws.testKey,
      transfer.id as string,
      { reason: "a" },
      { "idempotency-key": "ret-1" },
    );
    expect(first.statusCode, first.body).toBe(201);
    const again = await returnTransfer(
      ws.testKey,
      transfer.id as string,
      { reason: "a" },
      { "idempotency-key": "ret-1" },
    );
    expect(again.statusCode, again.body).toBe(201);
    expect(again.headers["idempotent-replayed"]).toBe("true");
    expect(again.json()).toEqual(first.json());
    const other = await returnTransfer(
      ws.testKey,
      transfer.id as string,
      { reason: "b" },
      { "idempotency-key": "ret-1" },
    );
    expectError(other, 409, { error: MSG.keyUsed, refund: first.json().refund });
    expect(await ledger(payer)).toBe(2_000_000n);
  });
});

describe("POST /api/v1/transfers/unmatched/{id}/attach: refusals", () => {
  it("refuses unknown ids, a missing paymentId, another tenant's transfer and a forwarded payment", async () => {
    const ws = await createWorkspace(t);
    const other = await createWorkspace(t);
    const p = await pay(ws, "10");
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "10" });
    const attach = (key: string, id: string, body?: unknown) =>
      post(key, `/api/v1/transfers/unmatched/${id}/attach`, body);

    expectError(await attach(ws.testKey, randomUUID(), { paymentId: p.id }), 404, {
      error: MSG.transferNotFound,
    });
    expectError(await attach(ws.testKey, "nope", { paymentId: p.id }), 404, { error: MSG.transferNotFound });
    for (const body of [{}, { paymentId: "" }, { paymentId: null }, undefined]) {
      expectError(await attach(ws.testKey, transfer.id as string, body), 400, {
        error: "paymentId is required",
      });
    }
    const otherPayment = await pay(other, "10");
    expectError(await attach(other.testKey, transfer.id as string, { paymentId: otherPayment.id }), 404, {
      error: MSG.transferNotFound,
    });
    expectError(await attach(ws.liveKey, transfer.id as string, { paymentId: p.id }), 404, {
      error: MSG.transferNotFound,
    });
    expectError(await attach(ws.testKey, transfer.id as string, { paymentId: randomUUID() }), 404, {
      error: MSG.notFound,
    });
    // Another workspace's payment is no payment of this one.
    expectError(await attach(ws.testKey, transfer.id as string, { paymentId: otherPayment.id }), 404, {
      error: MSG.notFound,
    });
    // Every sandbox payment is forwarded already.
    expectError(await attach(ws.testKey, transfer.id as string, { paymentId: p.id }), 400, {
      error: "Only a pending or expired payment can take an unmatched transfer",
      status: "forwarded",
    });
    expect(await unmatched(ws, transfer.id as string)).toMatchObject({ status: "open", paymentId: null });
    expect(await payment(ws, p.id as string)).toMatchObject({ status: "forwarded", amountReceived: null });

    // A returned transfer cannot be attached either.
    expect((await returnTransfer(ws.testKey, transfer.id as string)).statusCode).toBe(201);
    const late = await attach(ws.testKey, transfer.id as string, { paymentId: p.id });
    expect(late.statusCode, late.body).toBe(409);
    expect(late.json()).toMatchObject({
      error: "Unmatched transfer is already returned",
      status: "returned",
    });
  });
});
