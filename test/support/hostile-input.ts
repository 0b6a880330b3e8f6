// What the hostile input suites (test/system/hostile-input*.test.ts) share: the app and its fixtures,
// the snapshot of written tables, and the checks that a refusal is a clean 4xx.

import type { LightMyRequestResponse } from "fastify";
import { sql } from "kysely";
import { afterAll, beforeAll, expect } from "vitest";
import {
  ADMIN_SECRET,
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "./app.ts";

// Issue 20, "Hostile input": every malformed request gets a 4xx JSON error naming the field, never
// a 500 or a dropped connection, and a refused request writes nothing. One readable example per
// class of input that used to break the service, then generated hostile values thrown at every
// route of the OpenAPI document (and the hosted page's routes, which it does not list).

export const DESTINATION = "0x2222222222222222222222222222222222222222";
export const MERCHANT = "0x1111111111111111111111111111111111111111";
export const UNKNOWN_UUID = "6f1c5a9e-0b7d-4d38-9a53-2a4c1f0e9b11";
export const UINT256_MAX = 2n ** 256n - 1n;

export let t: TestApp;
export let ws: CreatedWorkspace;
export let session: { cookie: string; csrf: string };
export let fixtures: {
  paymentId: string;
  agentId: string;
  walletId: string;
  webhookId: string;
  swapId: string;
  onrampId: string;
  /** An agent wallet holding USDC that pays (no policy), one of its authorizations, and another wallet whose policy is set. */
  agentWalletId: string;
  authorizationId: string;
  policyWalletId: string;
};

/** A valid pay body for the fixture agent wallet: 0.01 USDC on sandbox-a. */
export const X402_PAY = {
  paymentRequired: {
    x402Version: 2,
    resource: { url: "https://api.example.com/data" },
    accepts: [
      {
        scheme: "exact",
        network: "eip155:73570001",
        asset: "0xE948B10A290BF5Ee274cF0B50d1387fb7049B9f3",
        amount: "10000",
        payTo: DESTINATION,
        maxTimeoutSeconds: 60,
        extra: { name: "USDC", version: "2" },
      },
    ],
  },
  resource: "https://api.example.com/data",
};

/** A facilitator request of the x402 shapes (D23): its signature is no one's, so verify says invalid. */
export const X402_REQUEST = {
  x402Version: 2,
  paymentPayload: {
    x402Version: 2,
    accepted: X402_PAY.paymentRequired.accepts[0],
    payload: {
      authorization: {
        from: "0x3333333333333333333333333333333333333333",
        to: DESTINATION,
        value: "10000",
        validAfter: "0",
        validBefore: "99999999999",
        nonce: `0x${"ab".repeat(32)}`,
      },
      signature: `0x${"11".repeat(65)}`,
    },
  },
  paymentRequirements: X402_PAY.paymentRequired.accepts[0],
};

// ---- what "nothing written" means: no row added, removed, revoked, deleted or re-defaulted ------

export const WRITTEN_TABLES = [
  "workspaces",
  "workspace_wallets",
  "api_keys",
  "payments",
  "idempotency_keys",
  "outbox_events",
  "webhook_endpoints",
  "webhook_deliveries",
  "payouts",
  "ledger_entries",
  "agents",
  "agent_wallets",
  "card_events",
  "card_refunds",
  "unmatched_transfers",
  "dashboard_sessions",
  "dashboard_login_attempts",
  "swap_quotes",
  "swaps",
  "sandbox_swap_pools",
  "onramp_sessions",
  "agent_wallet_policies",
  "agent_payment_authorizations",
  "x402_settlements",
  "x402_facilitator_wallets",
  "sandbox_authorizations",
] as const;

export async function writtenState(): Promise<string> {
  const counts = WRITTEN_TABLES.map((name) => sql`(SELECT count(*) FROM ${sql.table(name)})`);
  const { rows } = await sql<{ state: string }>`
    SELECT concat_ws(',', ${sql.join(counts)},
      (SELECT count(*) FROM api_keys WHERE revoked_at IS NOT NULL),
      (SELECT count(*) FROM agents WHERE deleted_at IS NOT NULL),
      (SELECT count(*) FROM workspaces
        WHERE sandbox_default_wallet_type <> 'workspace' OR live_default_wallet_type <> 'workspace')) AS state`.execute(
    t.database.db,
  );
  return rows[0]?.state ?? "";
}

// ---- sending a request and judging its answer ---------------------------------------------------

/** JSON text that JSON.stringify cannot produce (1e309, 61-digit integers), spliced in as is. */
export class Raw {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
}

export function toJson(value: unknown): string {
  if (value instanceof Raw) return value.text;
  if (Array.isArray(value)) return `[${value.map(toJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    // Object.entries keeps own "__proto__" keys (made by JSON.parse), which a client can send.
    const entries = Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}:${toJson(v)}`);
    return `{${entries.join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

export type Auth = "key" | "admin" | "session" | "none";
export const WRAPPED = /^\/api\/(agents|wallets)(\/|\?|$)/;

export function authHeaders(auth: Auth, method: string): Record<string, string> {
  if (auth === "key") return bearer(ws.testKey);
  if (auth === "admin") return bearer(ADMIN_SECRET);
  if (auth === "session")
    return method === "GET"
      ? { cookie: session.cookie }
      : { cookie: session.cookie, "x-csrf-token": session.csrf };
  return {};
}

/** A body that is no JSON (an image), sent as its bytes with its own Content-Type. */
export interface Bytes {
  contentType: string;
  bytes: Buffer;
}

export async function send(
  method: string,
  url: string,
  auth: Auth,
  body?: unknown,
  headers: Record<string, string> = {},
  bytes?: Bytes,
): Promise<LightMyRequestResponse> {
  const content = bytes
    ? { type: bytes.contentType, payload: bytes.bytes }
    : body === undefined
      ? undefined
      : { type: "application/json", payload: toJson(body) };
  return t.request({
    method: method as "POST",
    url,
    headers: {
      ...authHeaders(auth, method),
      ...(content ? { "content-type": content.type } : {}),
      ...headers,
    },
    ...(content ? { payload: content.payload } : {}),
  });
}

export const normalized = (text: string) => text.toLowerCase().replace(/[^a-z0-9]/g, "");

/** The error names the field: "Invalid token symbol" names tokenSymbol, "Invalid event type" events. */
export function namesField(error: string, field: string): boolean {
  return normalized(error).includes(normalized(field).replace(/s$/, ""));
}

/** A 4xx answer: JSON `{error}` (`{success: false, error}` for agents and wallets), no stack, no SQL. */
export function expectJsonError(res: LightMyRequestResponse, url: string, label: string): string {
  expect(res.statusCode, label).toBeGreaterThanOrEqual(400);
  expect(res.statusCode, `${label}: ${res.body.slice(0, 300)}`).toBeLessThan(500);
  expect(res.headers["content-type"], label).toMatch(/^application\/json/);
  const body = JSON.parse(res.body) as { error?: unknown; success?: unknown };
  expect(typeof body.error, `${label}: ${res.body.slice(0, 300)}`).toBe("string");
  if (WRAPPED.test(url)) expect(body.success, label).toBe(false);
  expect(res.body, label).not.toMatch(/\n\s+at |node:internal|\.ts:\d+|violates|syntax error at|pglite/i);
  return body.error as string;
}

/** The request is refused (4xx), names `field` in its error, and the database is unchanged. */
export async function expectRefused(
  request: { method: string; url: string; auth?: Auth; body?: unknown; headers?: Record<string, string> },
  field: string,
  status = 400,
): Promise<string> {
  const before = await writtenState();
  const res = await send(request.method, request.url, request.auth ?? "key", request.body, request.headers);
  const label = `${request.method} ${request.url.slice(0, 120)} ${toJson(request.body).slice(0, 120)}`;
  expect(res.statusCode, `${label} → ${res.body.slice(0, 300)}`).toBe(status);
  const error = expectJsonError(res, request.url, label);
  if (status === 400) expect(namesField(error, field), `${label}: "${error}" names ${field}`).toBe(true);
  expect(await writtenState(), `${label}: nothing written`).toBe(before);
  return error;
}

// ---- one readable example per class ---------------------------------------------------------------

/** One app with a workspace, a dashboard session and fixtures of every kind, for the file. */
export function useHostileInputApp(): void {
  beforeAll(async () => {
    t = await startTestApp({ RATE_LIMIT_SANDBOX: "1000000", RATE_LIMIT_LIVE: "1000000" });
    ws = await createWorkspace(t);
    const opened = await t.app.services.sessions.open(ws.id);
    session = { cookie: `svc_session=${opened.token}`, csrf: opened.csrfToken };
    const created = async (method: "POST", url: string, payload: object) => {
      const res = await t.request({ method, url, headers: bearer(ws.testKey), payload });
      expect(res.statusCode, `${url} ${res.body}`).toBeLessThan(300);
      return res.json();
    };
    const payment = await created("POST", "/api/v1/payments", { tokenSymbol: "USDC", amount: "5.00" });
    const agent = await created("POST", "/api/agents/create", { name: "Fixture agent" });
    const wallet = await created("POST", "/api/wallets/create", {
      ownerId: "fixture-user",
      type: "user",
      currencies: ["ETH"],
    });
    const webhook = await created("POST", "/api/v1/webhooks", {
      url: "http://127.0.0.1:9/hook",
      events: ["payment.created"],
    });
    await created("POST", "/api/v1/sandbox/faucet", { tokenSymbol: "USDC", amount: "1000" });
    const swap = await created("POST", "/api/v1/swap", {
      sellToken: "USDC",
      buyToken: "ETH",
      sellAmount: "1",
    });
    const onramp = await created("POST", "/api/v1/onramp/session", { destinationCurrency: "ETH" });
    const agentWallet = async () =>
      (
        await created("POST", "/api/wallets/create", {
          ownerId: agent.data.agentId,
          type: "agent",
          currencies: ["USDC"],
        })
      ).data.walletId as string;
    const agentWalletId = await agentWallet();
    const policyWalletId = await agentWallet();
    const paid = await created("POST", `/api/wallets/${agentWalletId}/x402/pay`, X402_PAY);
    fixtures = {
      paymentId: payment.payment.id,
      agentId: agent.data.agentId,
      walletId: wallet.data.walletId,
      webhookId: String(webhook.webhook.id),
      swapId: swap.swapId,
      onrampId: onramp.id,
      agentWalletId,
      authorizationId: paid.data.authorizationId,
      policyWalletId,
    };
  });
  afterAll(async () => t?.close());
}
