// What the sandbox smart wallet suites (test/smart-wallets/smart-wallets.test.ts, payments-and-payouts.test.ts) share.

import { randomBytes } from "node:crypto";
import type { InjectOptions } from "fastify";
import { afterAll, beforeAll, expect } from "vitest";
import { bearer, type CreatedWorkspace, createWorkspace, startTestApp, type TestApp } from "./app.ts";

// Smart wallets in the sandbox, without a chain (interface parts 2, 4.13, 4.14, 4.18, 7; decisions
// D3, D11, D13): the programmatic endpoints (workspace key or admin secret), the dashboard ones
// (session cookie + CSRF token), walletType selection for payments and payouts, and the simulated
// ledger balance of the smart wallet.

export const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
export const TX_HASH = /^0x[0-9a-f]{64}$/;
export const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
export const FAILURE_ADDRESS = "0x000000000000000000000000000000000000dEaD";
export const SESSION_COOKIE = "svc_session";

export type Json = Record<string, unknown>;

export const randomAddress = () => `0x${randomBytes(20).toString("hex")}`;
export const lower = (a: unknown) => String(a).toLowerCase();

export let t: TestApp;

export const newWorkspace = () => createWorkspace(t);

export const smartWalletUrl = (workspaceId: string) => `/api/v1/workspaces/${workspaceId}/smart-wallet`;

export function programmatic(
  method: "GET" | "POST" | "PATCH",
  workspaceId: string,
  token: string,
  payload?: Json,
) {
  const options: InjectOptions = { method, url: smartWalletUrl(workspaceId), headers: bearer(token) };
  if (payload !== undefined) options.payload = payload;
  return t.request(options);
}

/** With the sandbox key: `setDefault: true` sets the sandbox's default (D21). */
export async function createSmartWallet(ws: CreatedWorkspace, payload?: Json) {
  const res = await programmatic("POST", ws.id, ws.testKey, payload);
  expect([200, 201], res.body).toContain(res.statusCode);
  return res.json() as {
    success: boolean;
    workspaceId: string;
    smartWallet: { address: string; ownerAddress: string; walletId: string };
    defaultWalletType: string;
  };
}

/** The sandbox's default wallet type, set with the sandbox key (D21). */
export async function setDefault(ws: CreatedWorkspace, value: string) {
  const res = await programmatic("PATCH", ws.id, ws.testKey, { defaultWalletType: value });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

export function smartWalletRows(workspaceId: string) {
  return t.database.db
    .selectFrom("workspace_wallets")
    .select(["id", "address"])
    .where("workspace_id", "=", workspaceId)
    .where("kind", "=", "smart_wallet")
    .execute();
}

export const payout = (ws: CreatedWorkspace, body: Json) =>
  t.request({ method: "POST", url: "/api/v1/payouts", headers: bearer(ws.testKey), payload: body });

export const createPayment = (ws: CreatedWorkspace, body: Json) =>
  t.request({ method: "POST", url: "/api/v1/payments", headers: bearer(ws.testKey), payload: body });

export async function faucet(ws: CreatedWorkspace, body: Json) {
  const res = await t.request({
    method: "POST",
    url: "/api/v1/sandbox/faucet",
    headers: bearer(ws.testKey),
    payload: body,
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

export async function balances(ws: CreatedWorkspace) {
  const res = await t.request({ method: "GET", url: "/api/v1/wallet/balance", headers: bearer(ws.testKey) });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

export const ledgerUsdc = (address: string, network = "sandbox-a") =>
  t.app.services.ledger.balance(network, address, "USDC");

// ---------------------------------------------------------------------------------------------
// Programmatic endpoints (4.13)

/** One app on a fresh database for the file, closed after it. */
export function useSmartWalletsApp(): void {
  beforeAll(async () => {
    t = await startTestApp({ RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" });
  });
  afterAll(async () => {
    await t?.close();
  });
}
