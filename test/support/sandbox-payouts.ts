// What the sandbox payout suites (test/payouts/sandbox*.test.ts) share.

import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { InjectOptions } from "fastify";
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import { bearer, type CreatedWorkspace, createWorkspace, startTestApp, type TestApp } from "./app.ts";
import { MailSink } from "./mail-sink.ts";

// Payouts and the circuit breaker in the sandbox (interface parts 3, 4.10–4.12, 6, 7; decisions
// D3, D6, D13): the real app on a real database, money on the simulated ledger funded by the
// sandbox faucet, and the breaker's e-mail delivered to a real SMTP listener on 127.0.0.1.

export const FAILURE_ADDRESS = "0x000000000000000000000000000000000000dEaD";
export const TX_HASH = /^0x[0-9a-f]{64}$/;
export const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

export const MSG = {
  required: "Missing required fields: tokenSymbol, amount, destinationAddress",
  invalidDestination: "Invalid destinationAddress format",
  invalidAmount: "Amount must be a positive number",
  insufficient: "Insufficient balance",
  noWallet: "No workspace wallet found. Provision a wallet first.",
  liveNotConfigured: "Live network is not configured",
  duplicateNote: "Duplicate idempotencyKey; original result returned",
} as const;

export type Json = Record<string, unknown>;

export const randomAddress = () => `0x${randomBytes(20).toString("hex")}`;
export const uniqueEmail = () => `admin-${randomBytes(6).toString("hex")}@example.test`;

// ---------------------------------------------------------------------------------------------

export const tempDirs: string[] = [];
export function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "payouts-sandbox-"));
  tempDirs.push(dir);
  return dir;
}

export const mail = new MailSink();
export let t: TestApp;
/** Apps started by a single test (closed in afterEach). */
export const extraApps: TestApp[] = [];

export function post(key: string, url: string, payload?: unknown, app: TestApp = t) {
  return app.request({
    method: "POST",
    url,
    headers: bearer(key),
    ...(payload === undefined ? {} : { payload: payload as InjectOptions["payload"] }),
  });
}

export function get(key: string, url: string, app: TestApp = t) {
  return app.request({ method: "GET", url, headers: bearer(key) });
}

export const payout = (key: string, body: unknown, app: TestApp = t) =>
  post(key, "/api/v1/payouts", body, app);

export async function newWorkspace(app: TestApp = t, body: Json = {}) {
  const adminEmail = uniqueEmail();
  const name = `Payouts ${randomBytes(4).toString("hex")}`;
  const ws = await createWorkspace(app, { name, adminEmail, ...body });
  return { ...ws, adminEmail, name };
}

export async function faucet(ws: CreatedWorkspace, tokenSymbol: string, amount: string, app: TestApp = t) {
  const res = await post(ws.testKey, "/api/v1/sandbox/faucet", { tokenSymbol, amount }, app);
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as Json;
}

export async function eoaBalances(ws: CreatedWorkspace, app: TestApp = t): Promise<Record<string, string>> {
  const res = await get(ws.testKey, "/api/v1/wallet/balance", app);
  expect(res.statusCode, res.body).toBe(200);
  return res.json().eoa.balances;
}

export async function payoutState(ws: CreatedWorkspace, key = ws.testKey, app: TestApp = t) {
  const res = await get(key, `/api/v1/workspaces/${ws.id}/payout-state`, app);
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as Json;
}

/** Transfers the simulated ledger recorded from the workspace wallet (payout attempts). */
export function ledgerTransfersFrom(ws: CreatedWorkspace, app: TestApp = t) {
  return app.database.db
    .selectFrom("ledger_transactions")
    .select(["tx_hash", "to_address", "amount", "status", "token_symbol"])
    .where("from_address", "=", ws.eoaAddress.toLowerCase())
    .execute();
}

export function payoutRows(ws: CreatedWorkspace, app: TestApp = t) {
  return app.database.db
    .selectFrom("payouts")
    .select(["id", "status", "tx_hash", "environment"])
    .where("workspace_id", "=", ws.id)
    .execute();
}

export function outbox(ws: CreatedWorkspace, type: string, app: TestApp = t) {
  return app.database.db
    .selectFrom("outbox_events")
    .select(["event_type", "payload", "environment"])
    .where("workspace_id", "=", ws.id)
    .where("event_type", "=", type)
    .orderBy("id")
    .execute();
}

export async function ledgerBalance(address: string, token: string, app: TestApp = t): Promise<bigint> {
  const rows = await app.database.db
    .selectFrom("ledger_entries")
    .select("amount")
    .where("address", "=", address.toLowerCase())
    .where("token_symbol", "=", token)
    .execute();
  return rows.reduce((sum, row) => sum + BigInt(row.amount), 0n);
}

export const failing = (amount = "1") => ({
  tokenSymbol: "USDC",
  amount,
  destinationAddress: FAILURE_ADDRESS,
});

/** Three failed payouts: the third pauses the workspace (answers 503). */
export async function tripBreaker(ws: CreatedWorkspace, app: TestApp = t) {
  for (const streak of [1, 2]) {
    const res = await payout(ws.testKey, failing(), app);
    expect(res.statusCode, res.body).toBe(500);
    expect(res.json().failStreak).toBe(streak);
  }
  const third = await payout(ws.testKey, failing(), app);
  expect(third.statusCode, third.body).toBe(503);
  return third.json() as Json;
}

// ---------------------------------------------------------------------------------------------

/** One app (with a mail sink) for the file; extra apps and temporary directories a test made are closed after it. */
export function useSandboxPayoutsApp(): void {
  beforeAll(async () => {
    const smtpUrl = await mail.start();
    t = await startTestApp({
      SMTP_URL: smtpUrl,
      DATA_DIR: tempDir(),
      RATE_LIMIT_SANDBOX: "100000",
      RATE_LIMIT_LIVE: "100000",
    });
  });
  afterEach(async () => {
    t?.setNow(undefined);
    for (const app of extraApps.splice(0)) await app.close();
  });
  afterAll(async () => {
    await t?.close();
    await mail.stop();
    for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  });
}
