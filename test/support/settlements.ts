// What the settlement suites (test/payments/settlements.test.ts, settlement-events.test.ts) share.

import { randomBytes } from "node:crypto";
import type { InjectOptions } from "fastify";
import { afterAll, beforeAll, expect } from "vitest";
import type { ChainToken } from "../../src/chain/network.ts";
import { bearer, startTestApp, type TestApp } from "./app.ts";

// Settlements and splits of sandbox payments (decision D15) against the real app on a real
// database: a sandbox crypto payment settles as it is created, on the simulated ledger, the net
// carved into each split of the configuration in force (floor of net × bps / 10000) and the
// merchant's rest; GET /api/v1/settlements and /{id} show it; settlement.recorded and
// split.recorded are delivered when the payment's snapshot had splits enabled. Every expected
// number below is computed by hand in the comment beside it.

export type Json = Record<string, unknown>;

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const TX = /^0x[0-9a-f]{64}$/;
/** The settlement address createWorkspace configures: a payment's merchantWallet by default. */
export const SETTLEMENT_ADDRESS = "0x1111111111111111111111111111111111111111";
export const SETTLEMENT_KEYS = [
  "createdAt",
  "feeAmount",
  "grossAmount",
  "merchantAmount",
  "merchantWallet",
  "netAmount",
  "network",
  "paymentIds",
  "settlementId",
  "splits",
  "tokenSymbol",
  "txRef",
];
export const SPLIT_KEYS = ["amount", "destination", "label", "percent_bps", "splitId", "status", "txRef"];
export const SPLIT_EVENT_KEYS = [
  "amount",
  "destination",
  "label",
  "network",
  "paymentIds",
  "percent_bps",
  "settlementId",
  "splitId",
  "status",
  "txRef",
];

/** A fresh address (lower case), so each test's balances start at zero. */
export const address = () => `0x${randomBytes(20).toString("hex")}`;

export let t: TestApp;

export function get(key: string, url: string) {
  return t.request({ method: "GET", url, headers: bearer(key) });
}

export async function getOk(key: string, url: string): Promise<Json> {
  const res = await get(key, url);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

export async function putSplits(key: string, payload: Json): Promise<{ enabled: boolean; splits: Json[] }> {
  const res = await t.request({
    method: "PUT",
    url: "/api/v1/splits",
    headers: bearer(key),
    payload: payload as InjectOptions["payload"],
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

export async function pay(key: string, payload: Json): Promise<Json> {
  const res = await t.request({
    method: "POST",
    url: "/api/v1/payments",
    headers: bearer(key),
    payload: payload as InjectOptions["payload"],
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().payment;
}

/** The payment's settlement through both reads, which must agree; fails unless exactly one. */
export async function settlementOf(key: string, paymentId: string): Promise<Json> {
  const list = await getOk(key, `/api/v1/settlements?paymentId=${paymentId}`);
  expect(list.total).toBe(1);
  const settlements = list.settlements as Json[];
  expect(settlements).toHaveLength(1);
  const listed = settlements[0] as Json;
  const byId = await getOk(key, `/api/v1/settlements/${listed.settlementId}`);
  expect(Object.keys(byId)).toEqual(["settlement"]);
  expect(byId.settlement).toEqual(listed);
  expect(Object.keys(listed).sort()).toEqual(SETTLEMENT_KEYS);
  for (const split of listed.splits as Json[]) expect(Object.keys(split).sort()).toEqual(SPLIT_KEYS);
  return listed;
}

export const splitId = (config: { splits: Json[] }, label: string) => {
  const id = config.splits.find((s) => s.label === label)?.id;
  if (typeof id !== "string") throw new Error(`no split ${label}`);
  return id;
};

export const balance = (holder: string, token: ChainToken, network = "sandbox-a") =>
  t.app.services.ledger.balance(network, holder, token);

/** The simulated ledger's transaction of this hash: where it credited, what, how much. */
export async function ledgerTx(txHash: unknown) {
  expect(txHash).toMatch(TX);
  const row = await t.database.db
    .selectFrom("ledger_transactions")
    .select(["to_address", "token_symbol", "amount", "status"])
    .where("tx_hash", "=", txHash as string)
    .executeTakeFirst();
  return (
    row && { to: row.to_address, token: row.token_symbol, amount: BigInt(row.amount), status: row.status }
  );
}

/** Every ledger transaction crediting `holder`. */
export async function ledgerTxsTo(holder: string) {
  return t.database.db
    .selectFrom("ledger_transactions")
    .select(["tx_hash"])
    .where("to_address", "=", holder.toLowerCase())
    .execute();
}

export async function eventTypes(workspaceId: string): Promise<string[]> {
  const rows = await t.database.db
    .selectFrom("outbox_events")
    .select(["event_type"])
    .where("workspace_id", "=", workspaceId)
    .orderBy("id", "asc")
    .execute();
  return rows.map((r) => r.event_type);
}

export async function outboxPayloads(workspaceId: string, type: string): Promise<Json[]> {
  const rows = await t.database.db
    .selectFrom("outbox_events")
    .select(["payload"])
    .where("workspace_id", "=", workspaceId)
    .where("event_type", "=", type)
    .orderBy("id", "asc")
    .execute();
  return rows.map((r) => r.payload as Json);
}

export const withoutCreatedAt = ({ createdAt: _createdAt, ...rest }: Json) => rest;

/** One app on a fresh database for the file, closed after it. */
export function useSettlementsApp(): void {
  beforeAll(async () => {
    t = await startTestApp({ RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" });
  });
  afterAll(async () => t.close());
}
