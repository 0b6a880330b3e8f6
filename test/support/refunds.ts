import { randomBytes } from "node:crypto";
import type { InjectOptions, LightMyRequestResponse } from "fastify";
import { afterAll, beforeAll, expect } from "vitest";
import { bearer, type CreatedWorkspace, startTestApp, type TestApp } from "./app.ts";
import { FakeCardProvider } from "./fake-card-provider.ts";

// What the tests of refunds of payments and returns of unmatched transfers (decision D19; D6 and
// D13 for the payout rules they share, D20 for their events) share: the app they run against (the
// real app on a real database: PGlite, or the PostgreSQL server of DATABASE_URL), the constants
// they expect, and their requests and reads. Money moves on the simulated ledger: a sandbox crypto
// payment of G credits its net (G − 1.5 %) to the workspace wallet, the faucet adds to it, a
// refund is a transfer from it to the destination.

export type Json = Record<string, unknown>;

export const FAILURE_ADDRESS = "0x000000000000000000000000000000000000dEaD";
/** The sender of a sandbox incoming transfer that names none (unmatched.ts). */
export const SANDBOX_PAYER = "0x000000000000000000000000000000000000bEEF";
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const TX = /^0x[0-9a-f]{64}$/;
export const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
export const REFUND_KEYS = [
  "amount",
  "createdAt",
  "destinationAddress",
  "id",
  "network",
  "paymentId",
  "reason",
  "status",
  "tokenSymbol",
  "txHash",
];
export const MSG = {
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
export const address = () => `0x${randomBytes(20).toString("hex")}`;

/** Starts the fake card provider, then the app with the live card environment configured on it. */
export async function startRefundsApp(card: FakeCardProvider): Promise<TestApp> {
  await card.start();
  return startTestApp({
    RATE_LIMIT_SANDBOX: "100000",
    RATE_LIMIT_LIVE: "100000",
    CARD_SECRET_KEY_LIVE: LIVE_SK,
    CARD_WEBHOOK_SECRET_LIVE: LIVE_WHSEC,
    CARD_API_BASE: card.url,
  });
}

/**
 * Registers the file's hooks: before all, the fake card provider and the app on it (handed to
 * `started`); after all, both stopped.
 */
export function useRefundsApp(started: (app: TestApp) => void): void {
  const card = new FakeCardProvider();
  let app: TestApp | undefined;
  beforeAll(async () => {
    app = await startRefundsApp(card);
    started(app);
  });
  afterAll(async () => {
    await app?.close();
    await card.stop();
  });
}

export function expectError(res: LightMyRequestResponse, status: number, body: Json) {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers["content-type"]).toMatch(/^application\/json/);
  expect(res.json()).toEqual(body);
}

/** The requests and reads of the refunds tests, against the app `app()` answers (set in beforeAll). */
export function refundHelpers(app: () => TestApp) {
  function post(key: string, url: string, payload?: unknown, headers: Record<string, string> = {}) {
    return app().request({
      method: "POST",
      url,
      headers: { ...bearer(key), ...headers },
      ...(payload === undefined ? {} : { payload: payload as InjectOptions["payload"] }),
    });
  }

  function get(key: string, url: string) {
    return app().request({ method: "GET", url, headers: bearer(key) });
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
    // A failed refund also says why (`error`); the others carry exactly D19's fields.
    const expected = json.refund.status === "failed" ? [...REFUND_KEYS, "error"].sort() : REFUND_KEYS;
    expect(Object.keys(json.refund).sort()).toEqual(expected);
    if (json.refund.status === "failed") expect(json.refund.error).toEqual(expect.any(String));
    expect(json.refund.id).toMatch(UUID);
    expect(json.refund.createdAt).toMatch(ISO);
    return json.refund;
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
    const rows = await app()
      .database.db.selectFrom("ledger_entries")
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
    return app()
      .database.db.selectFrom("outbox_events")
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

  return {
    post,
    get,
    getOk,
    refund,
    returnTransfer,
    refundOk,
    pay,
    faucet,
    payment,
    refundsOf,
    wallet,
    ledger,
    payoutState,
    outbox,
    incoming,
    unmatched,
  };
}
