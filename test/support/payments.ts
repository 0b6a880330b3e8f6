import { SANDBOX_A } from "../../src/chain/simulated/networks.ts";
import { LIVE_DEFAULT } from "./devnet-env.ts";
// What the payments endpoint suites (test/payments/payments.test.ts, read-cancel-verify.test.ts) share.

import type { InjectOptions } from "fastify";
import { afterAll, beforeAll, expect } from "vitest";
import { bearer, type CreatedWorkspace, startTestApp, type TestApp } from "./app.ts";

// Integration tests of the payments endpoints (interface parts 2, 3, 4.1–4.5, 6, 7, 8; decisions
// D3, D4, D5, D10, D13) against the real app on a real database.

export const SETTLEMENT = "0x1111111111111111111111111111111111111111";
export const MERCHANT = "0x2222222222222222222222222222222222222222";
export const ACCOUNT_SETTLEMENT = "0x3333333333333333333333333333333333333333";
export const SMART_WALLET = "0x4444444444444444444444444444444444444444";
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const MSG = {
  required: "tokenSymbol, amount, and merchantWallet are required",
  invalidToken: "Invalid token symbol",
  invalidAmount: "Amount must be a positive number",
  invalidWallet: "Invalid merchant wallet address",
  noSettlement: "No merchantWallet provided and no settlement address configured",
  notFound: "Payment not found",
  cannotCancel: "Payment cannot be cancelled",
  liveNotConfigured: "Live network is not configured",
} as const;

export type Json = Record<string, unknown>;

export let t: TestApp;

export function createPayment(key: string, payload: unknown, headers: Record<string, string> = {}) {
  return t.request({
    method: "POST",
    url: "/api/v1/payments",
    headers: { ...bearer(key), ...headers },
    payload: payload as InjectOptions["payload"],
  });
}

export async function createOk(key: string, payload: Json): Promise<Json> {
  const res = await createPayment(key, payload);
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

export function get(key: string, url: string) {
  return t.request({ method: "GET", url, headers: bearer(key) });
}

export function post(key: string, url: string, payload?: unknown) {
  return t.request({
    method: "POST",
    url,
    headers: bearer(key),
    ...(payload === undefined ? {} : { payload: payload as InjectOptions["payload"] }),
  });
}

/** The only way to get a pending payment: sandbox completes at once and live creation answers 503. */
export async function insertPayment(
  ws: CreatedWorkspace,
  options: {
    environment?: "sandbox" | "live";
    status?: string;
    createdAt?: Date;
    tokenSymbol?: string;
  } = {},
): Promise<string> {
  const createdAt = options.createdAt ?? new Date();
  const row = await t.database.db
    .insertInto("payments")
    .values({
      workspace_id: ws.id,
      environment: options.environment ?? "sandbox",
      network: options.environment === "live" ? LIVE_DEFAULT.id : SANDBOX_A.id,
      status: options.status ?? "pending",
      payment_method: "crypto",
      payment_provider: "onchain",
      token_symbol: options.tokenSymbol ?? "USDC",
      gross_amount: "10000000",
      fee_amount: "150000",
      net_amount: "9850000",
      merchant_wallet: MERCHANT,
      wallet_type: "eoa",
      receiving_address: ws.eoaAddress,
      description: null,
      metadata: JSON.stringify({}),
      return_url: null,
      cancel_url: null,
      expires_at: new Date(createdAt.getTime() + 60 * 60_000),
      created_at: createdAt,
      updated_at: createdAt,
    })
    .returning("id")
    .executeTakeFirstOrThrow();
  return row.id;
}

export async function outboxRows(workspaceId: string, environment?: "sandbox" | "live") {
  let query = t.database.db
    .selectFrom("outbox_events")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .orderBy("id", "asc");
  if (environment) query = query.where("environment", "=", environment);
  return query.execute();
}

export async function paymentRows(workspaceId: string, environment?: "sandbox" | "live") {
  let query = t.database.db.selectFrom("payments").selectAll().where("workspace_id", "=", workspaceId);
  if (environment) query = query.where("environment", "=", environment);
  return query.execute();
}

export async function expectError(
  resPromise: ReturnType<typeof createPayment>,
  status: number,
  message?: string,
): Promise<Json> {
  const res = await resPromise;
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers["content-type"]).toMatch(/^application\/json/);
  const body = res.json();
  expect(typeof body.error).toBe("string");
  if (message !== undefined) expect(body.error).toBe(message);
  return body;
}

/** One app on a fresh database for the file, closed after it. */
export function usePaymentsApp(): void {
  beforeAll(async () => {
    // A high sandbox rate limit so that the many requests of one workspace never meet a 429.
    t = await startTestApp({ RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" });
  });
  afterAll(async () => t.close());
}
