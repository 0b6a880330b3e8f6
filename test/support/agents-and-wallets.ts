// What the agent and wallet suites (test/agents/, test/wallets/) share.

import { afterAll, beforeAll, expect } from "vitest";
import { bearer, startTestApp, type TestApp } from "./app.ts";

// The agents and wallets families (parts 2, 4.16, 4.17, 6; D8, D13): {success, data} envelopes,
// {success: false, error} errors, validation, paging, search, tenant and environment isolation,
// key encryption at rest, and the agent.* / wallet.* events as a webhook receiver gets them.

// biome-ignore lint/suspicious/noExplicitAny: response bodies are read field by field and asserted
export type Json = Record<string, any>;
export const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
export const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
export const MISSING_UUID = "00000000-0000-4000-8000-000000000000";

export let t: TestApp;

export async function call(
  key: string,
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE",
  url: string,
  payload?: unknown,
) {
  const res = await t.request({
    method,
    url,
    headers: bearer(key),
    ...(payload !== undefined ? { payload: payload as Json } : {}),
  });
  let json: Json = {};
  try {
    json = res.json();
  } catch {}
  return { status: res.statusCode, json, body: res.body, headers: res.headers };
}

export async function createAgent(key: string, body: Json) {
  const res = await call(key, "POST", "/api/agents/create", body);
  expect(res.status, res.body).toBe(201);
  return res.json.data as Json;
}

export async function createWallet(key: string, body: Json) {
  const res = await call(key, "POST", "/api/wallets/create", body);
  expect(res.status, res.body).toBe(201);
  return res.json.data as Json;
}

export function expectError(
  res: { status: number; json: Json; body: string },
  status: number,
  field?: RegExp,
) {
  expect(res.status, res.body).toBe(status);
  expect(res.json.success).toBe(false);
  expect(typeof res.json.error).toBe("string");
  expect(res.json.error.length).toBeGreaterThan(0);
  if (field) expect(res.json.error).toMatch(field);
  expect(res.json).not.toHaveProperty("data");
}

// ---- agents ------------------------------------------------------------------------------------

/** One app on a fresh database for the file, closed after it. */
export function useAgentsApp(): void {
  beforeAll(async () => {
    t = await startTestApp({ RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" });
  }, 60_000);

  afterAll(async () => {
    await t?.close();
  });
}
