import { connect } from "node:net";
import fc from "fast-check";
import type { LightMyRequestResponse } from "fastify";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ADMIN_SECRET,
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";

// Issue 20, "Hostile input": every malformed request gets a 4xx JSON error naming the field, never
// a 500 or a dropped connection, and a refused request writes nothing. One readable example per
// class of input that used to break the service, then generated hostile values thrown at every
// route of the OpenAPI document (and the hosted page's routes, which it does not list).

const DESTINATION = "0x2222222222222222222222222222222222222222";
const MERCHANT = "0x1111111111111111111111111111111111111111";
const UNKNOWN_UUID = "6f1c5a9e-0b7d-4d38-9a53-2a4c1f0e9b11";
const UINT256_MAX = 2n ** 256n - 1n;

let t: TestApp;
let ws: CreatedWorkspace;
let session: { cookie: string; csrf: string };
let fixtures: {
  paymentId: string;
  agentId: string;
  walletId: string;
  webhookId: string;
  swapId: string;
  onrampId: string;
};

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
  const swap = await created("POST", "/api/v1/swap", { sellToken: "USDC", buyToken: "ETH", sellAmount: "1" });
  const onramp = await created("POST", "/api/v1/onramp/session", { destinationCurrency: "ETH" });
  fixtures = {
    paymentId: payment.payment.id,
    agentId: agent.data.agentId,
    walletId: wallet.data.walletId,
    webhookId: String(webhook.webhook.id),
    swapId: swap.swapId,
    onrampId: onramp.id,
  };
});
afterAll(async () => t?.close());

// ---- what "nothing written" means: no row added, removed, revoked, deleted or re-defaulted ------

const WRITTEN_TABLES = [
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
] as const;

async function writtenState(): Promise<string> {
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
class Raw {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
}

function toJson(value: unknown): string {
  if (value instanceof Raw) return value.text;
  if (Array.isArray(value)) return `[${value.map(toJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    // Object.entries keeps own "__proto__" keys (made by JSON.parse), which a client can send.
    const entries = Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}:${toJson(v)}`);
    return `{${entries.join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

type Auth = "key" | "admin" | "session" | "none";
const WRAPPED = /^\/api\/(agents|wallets)(\/|\?|$)/;

function authHeaders(auth: Auth, method: string): Record<string, string> {
  if (auth === "key") return bearer(ws.testKey);
  if (auth === "admin") return bearer(ADMIN_SECRET);
  if (auth === "session")
    return method === "GET"
      ? { cookie: session.cookie }
      : { cookie: session.cookie, "x-csrf-token": session.csrf };
  return {};
}

async function send(
  method: string,
  url: string,
  auth: Auth,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  return t.request({
    method: method as "POST",
    url,
    headers: {
      ...authHeaders(auth, method),
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...headers,
    },
    ...(body === undefined ? {} : { payload: toJson(body) }),
  });
}

const normalized = (text: string) => text.toLowerCase().replace(/[^a-z0-9]/g, "");

/** The error names the field: "Invalid token symbol" names tokenSymbol, "Invalid event type" events. */
function namesField(error: string, field: string): boolean {
  return normalized(error).includes(normalized(field).replace(/s$/, ""));
}

/** A 4xx answer: JSON `{error}` (`{success: false, error}` for agents and wallets), no stack, no SQL. */
function expectJsonError(res: LightMyRequestResponse, url: string, label: string): string {
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
async function expectRefused(
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

describe("hostile input, one example per class (issue 20)", () => {
  it("amounts beyond what a token transfer and the amount columns hold → 400 'Amount must be a positive number'", async () => {
    const beyondUint256 = (UINT256_MAX + 1n).toString();
    const cases: Array<[string, object]> = [
      // 61 digits of ETH are 79 digits of wei: more than numeric(78, 0) holds.
      ["/api/v1/payments", { tokenSymbol: "ETH", amount: "9".repeat(61) }],
      ["/api/v1/payments", { tokenSymbol: "USDC", amount: `${"9".repeat(73)}.5` }],
      ["/api/v1/payments", { tokenSymbol: "ETH", amount: `${beyondUint256}.0` }],
      ["/api/v1/payments", { tokenSymbol: "USDC", amount: "1".repeat(200_000) }],
      ["/api/v1/payouts", { tokenSymbol: "USDC", amount: "9".repeat(79), destinationAddress: DESTINATION }],
      ["/api/v1/payouts", { tokenSymbol: "ETH", amount: "2".repeat(60), destinationAddress: DESTINATION }],
      ["/api/v1/sandbox/faucet", { tokenSymbol: "USDC", amount: "9".repeat(79) }],
    ];
    for (const [url, body] of cases) {
      expect(await expectRefused({ method: "POST", url, body }, "amount")).toBe(
        "Amount must be a positive number",
      );
    }
    // A swap's amount names its field and token (D16).
    for (const sellAmount of ["9".repeat(61), `${beyondUint256}.0`, "1".repeat(200_000)]) {
      const body = { sellToken: "ETH", buyToken: "USDC", sellAmount };
      expect(await expectRefused({ method: "POST", url: "/api/v1/swap", body }, "sellAmount")).toBe(
        "sellAmount must be a positive number with at most 18 decimals for ETH",
      );
    }
    // The largest amount a uint256 transfer carries is still an amount (no 500 from the column).
    const largest = await send("POST", "/api/v1/payments", "key", {
      tokenSymbol: "ETH",
      amount: `${UINT256_MAX / 10n ** 18n}.${(UINT256_MAX % 10n ** 18n).toString().padStart(18, "0")}`,
    });
    expect(largest.statusCode, largest.body).toBe(201);
    // Card amounts stop at the card provider's maximum (999,999.99 USD) instead of failing there.
    const card = await expectRefused(
      {
        method: "POST",
        url: "/api/v1/payments",
        body: { paymentMethod: "card", tokenSymbol: "USD", amount: "9".repeat(40) },
      },
      "amount",
    );
    expect(card).toBe("Amount must be at most 999999.99 USD for card payments");
    const cardMax = await send("POST", "/api/v1/payments", "key", {
      paymentMethod: "card",
      tokenSymbol: "USD",
      amount: "999999.99",
    });
    expect(cardMax.statusCode, cardMax.body).toBe(201);
  });

  it("on-ramp amounts beyond a uint256, in dollars or in the crypto bought → 400 naming the field (D17)", async () => {
    // Also a sourceAmount whose crypto, at the sandbox's rates, is more than a uint256 or the columns hold.
    const onramp = "/api/v1/onramp/session";
    for (const [currency, sourceAmount] of [
      ["USDC", "9".repeat(79)],
      ["USDC", `1${"0".repeat(74)}`],
      ["USDC", `2${"0".repeat(71)}`], // 2e77 units of USDC: beyond a uint256, within numeric(78, 0)
      ["ETH", `1${"0".repeat(65)}`],
    ]) {
      const body = { destinationCurrency: currency, sourceAmount };
      await expectRefused({ method: "POST", url: onramp, body }, "sourceAmount");
    }
    for (const destinationAmount of ["9".repeat(61), `${UINT256_MAX + 1n}.0`, "1".repeat(200_000)]) {
      const body = { destinationCurrency: "ETH", destinationAmount };
      expect(await expectRefused({ method: "POST", url: onramp, body }, "destinationAmount")).toBe(
        "destinationAmount must be a positive amount of ETH, at most 1000, with at most 18 decimals",
      );
    }
  });

  it("offset and page beyond any list (1e20, 1e309, 2^53 + 1) → 400 naming the parameter, never clamped", async () => {
    for (const value of ["1e20", "1e309", "100000000000000000000", "9007199254740993", "2147483648"]) {
      for (const url of [
        `/api/v1/payments?offset=${value}`,
        `/api/v1/payouts?offset=${value}`,
        `/api/v1/transfers/unmatched?offset=${value}`,
        `/api/v1/swaps?offset=${value}`,
        `/api/v1/onramp/sessions?offset=${value}`,
        `/api/v1/webhooks/${fixtures.webhookId}/deliveries?offset=${value}`,
      ]) {
        expect(await expectRefused({ method: "GET", url }, "offset")).toBe("offset must be <= 2147483647");
      }
      for (const url of [`/api/agents?page=${value}`, `/api/wallets?page=${value}`]) {
        expect(await expectRefused({ method: "GET", url }, "page")).toBe("page must be <= 2147483647");
      }
    }
    const largest = await send("GET", "/api/v1/payments?offset=2147483647", "key");
    expect(largest.statusCode).toBe(200);
    expect(largest.json()).toEqual({ payments: [], total: expect.any(Number) });
  });

  it("lone UTF-16 surrogates and NUL in body strings, metadata keys and values → 400 naming the field", async () => {
    const payment = { tokenSymbol: "USDC", amount: "1.00", merchantWallet: MERCHANT };
    const payout = { tokenSymbol: "USDC", amount: "0.01", destinationAddress: DESTINATION };
    const swap = { sellToken: "USDC", buyToken: "ETH", sellAmount: "0.01" };
    const cases: Array<[string, string, object, string]> = [
      ["POST", "/api/v1/payments", { ...payment, description: "a\ud800b" }, "description"],
      ["POST", "/api/v1/payments", { ...payment, metadata: { "order\udfff": "1" } }, "metadata"],
      ["POST", "/api/v1/payments", { ...payment, metadata: { order: "\udc00\ud800" } }, "metadata.order"],
      ["POST", "/api/v1/payments", { ...payment, metadata: { order: "a\u0000" } }, "metadata.order"],
      ["POST", "/api/v1/payments", { ...payment, unknownField: "\ud800" }, "unknownField"],
      ["POST", "/api/v1/payouts", { ...payout, description: "\ud800" }, "description"],
      ["POST", "/api/v1/payouts", { ...payout, metadata: { k: "\udfff" } }, "metadata.k"],
      ["POST", "/api/v1/payouts", { ...payout, idempotencyKey: "key-\ud800" }, "idempotencyKey"],
      ["POST", "/api/agents/create", { name: "a\ud800" }, "name"],
      ["POST", "/api/agents/create", { name: "a", metadata: { nested: { deep: ["\ud800"] } } }, "metadata"],
      ["POST", "/api/agents/create", { name: "a", metadata: { "\ud800": 1 } }, "metadata"],
      ["PATCH", `/api/agents/${fixtures.agentId}`, { description: "\u0000" }, "description"],
      ["POST", "/api/wallets/create", { ownerId: "\ud800", type: "user", currencies: ["ETH"] }, "ownerId"],
      ["POST", "/api/v1/keys", { name: "k\ud800" }, "name"],
      ["POST", "/api/v1/webhooks", { url: "http://127.0.0.1:9/\ud800", events: ["*"] }, "url"],
      ["POST", "/api/v1/swap", { ...swap, sellToken: "USDC\ud800" }, "sellToken"],
      ["POST", "/api/v1/swap", { ...swap, idempotencyKey: "key-\u0000" }, "idempotencyKey"],
      ["POST", "/api/v1/swap", { quoteId: "\udfff" }, "quoteId"],
      ["POST", "/api/v1/onramp/session", { destinationCurrency: "USDC\ud800" }, "destinationCurrency"],
      ["POST", "/onramp/session", { destinationCurrency: "ETH", sourceAmount: "1\u0000" }, "sourceAmount"],
    ];
    for (const [method, url, body, field] of cases) await expectRefused({ method, url, body }, field);
    await expectRefused(
      { method: "POST", url: "/api/v1/workspaces", auth: "admin", body: { name: "\ud800" } },
      "name",
    );
  });

  it("NUL bytes in query filters and path segments → 400 naming the parameter", async () => {
    const cases: Array<[string, string]> = [
      ["/api/agents?search=a%00b", "search"],
      ["/api/wallets?ownerId=a%00b", "ownerId"],
      ["/api/wallets?currency=%00", "currency"],
      ["/api/v1/payments?status=pending%00", "status"],
      [`/api/wallets/${fixtures.walletId}/balance/ETH%00`, "currency"],
      ["/api/agents/%00", "agentId"],
      ["/pay/assets/page.js%00", "file"],
      ["/api/v1/swap/quote?sellToken=USDC&buyToken=ETH%00&sellAmount=1", "buyToken"],
      ["/swap/quote?sellToken=USDC&buyToken=ETH&buyAmount=1%00", "buyAmount"],
      ["/api/v1/swaps/%00", "id"],
      ["/api/v1/onramp/sessions/%00", "id"],
      ["/api/v1/onramp/sessions?limit=1%00", "limit"],
    ];
    for (const [url, field] of cases) await expectRefused({ method: "GET", url }, field);
  });

  it("JSON nested deeper than 32 levels → 400 naming the field, never a stack overflow", async () => {
    const deep = (levels: number) => new Raw(`${"[".repeat(levels)}${"]".repeat(levels)}`);
    await expectRefused(
      { method: "POST", url: "/api/agents/create", body: { name: "a", metadata: { k: deep(200_000) } } },
      "metadata.k",
    );
    await expectRefused(
      {
        method: "POST",
        url: "/api/v1/payments",
        body: { tokenSymbol: "USDC", amount: "1", extra: deep(100_000) },
        headers: { "idempotency-key": "deep-1" },
      },
      "extra",
    );
    const fine = await send("POST", "/api/agents/create", "key", { name: "a", metadata: { k: deep(30) } });
    expect(fine.statusCode, fine.body).toBe(201);
  });

  it("names of Object.prototype members in paths and keys → 404 or a 400 naming the field, not 500", async () => {
    for (const name of ["constructor", "__proto__", "toString", "hasOwnProperty", "valueOf", "prototype"]) {
      const res = await send("GET", `/pay/assets/${name}`, "none");
      expect(res.statusCode, `/pay/assets/${name}: ${res.body}`).toBe(404);
      expect(res.json()).toEqual({ error: "Not found" });
      for (const url of [
        `/api/v1/payments/${name}`,
        `/api/agents/${name}`,
        `/api/wallets/${name}`,
        `/api/wallets/${fixtures.walletId}/balance/${name}`,
        `/pay/${name}/status`,
        `/api/v1/swaps/${name}`,
        `/api/v1/onramp/sessions/${name}`,
        `/api/v1/swap/quote?sellToken=${name}&buyToken=ETH&sellAmount=1`,
      ]) {
        const answer = await send("GET", url, "key");
        expect([400, 404], `${url}: ${answer.body}`).toContain(answer.statusCode);
        expectJsonError(answer, url, url);
      }
    }
    const assetStillServed = await send("GET", "/pay/assets/page.js", "none");
    expect(assetStillServed.statusCode).toBe(200);
    // A key named __proto__ is refused by name (prototype poisoning), not as "Invalid JSON body".
    const poisoned = JSON.parse('{"tokenSymbol":"USDC","amount":"1","metadata":{"__proto__":"x"}}');
    await expectRefused({ method: "POST", url: "/api/v1/payments", body: poisoned }, "metadata");
    const ctor = JSON.parse('{"name":"a","metadata":{"constructor":{"prototype":{"polluted":true}}}}');
    await expectRefused({ method: "POST", url: "/api/agents/create", body: ctor }, "metadata.constructor");
    // A quoteId smuggled in through a swap body's __proto__ is refused by name, never read.
    const swapPoison = JSON.parse(`{"__proto__":{"quoteId":"${UNKNOWN_UUID}"},"buyToken":"ETH"}`);
    expect(await expectRefused({ method: "POST", url: "/api/v1/swap", body: swapPoison }, "__proto__")).toBe(
      "body must not have a key named __proto__",
    );
    const onrampPoison = JSON.parse('{"__proto__":{"destinationCurrency":"USDC"}}');
    expect(
      await expectRefused({ method: "POST", url: "/api/v1/onramp/session", body: onrampPoison }, "__proto__"),
    ).toBe("body must not have a key named __proto__");
  });

  it("a 2 MiB body over a real socket → a readable 413 JSON answer on every route, never a reset", async () => {
    await t.app.http.listen({ port: 0, host: "127.0.0.1" });
    const address = t.app.http.server.address();
    if (address === null || typeof address === "string") throw new Error("not listening on TCP");
    const body = Buffer.from(JSON.stringify({ name: "x", description: "y".repeat(2 * 1024 * 1024) }));
    const cases: Array<[string, Record<string, string>, number]> = [
      ["/api/v1/payments", bearer(ws.testKey), 413],
      ["/api/v1/workspaces", bearer(ADMIN_SECRET), 413],
      ["/api/agents/create", bearer(ws.testKey), 413],
      ["/api/webhooks/card", {}, 413],
      ["/api/v1/no-such-route", {}, 413],
      [`/api/v1/payments/${fixtures.paymentId}/cancel`, bearer(ws.testKey), 413],
      ["/api/v1/payments", {}, 401],
    ];
    for (const [path, headers, status] of cases) {
      for (const framing of ["content-length", "chunked"] as const) {
        const label = `${path} (${framing})`;
        const answer = await uploadThenRead(address.port, path, headers, body, framing);
        expect(answer.error, `${label}: the client lost the answer`).toBeUndefined();
        expect(answer.status, `${label}: ${answer.body}`).toBe(status);
        const json = JSON.parse(answer.body) as { error?: unknown; success?: unknown };
        expect(typeof json.error, label).toBe("string");
        if (status === 413) expect(json.error, label).toBe("Request body is too large (limit 1 MiB)");
        if (path.startsWith("/api/agents")) expect(json.success, label).toBe(false);
      }
    }
  });
});

/**
 * A client that writes the whole request before reading the answer (as many do), with the body
 * trickling in as over a real network. A server that answers early and closes the socket with
 * unread bytes sends a reset: the write fails and the client never sees the answer.
 */
function uploadThenRead(
  port: number,
  path: string,
  headers: Record<string, string>,
  body: Buffer,
  framing: "content-length" | "chunked",
): Promise<{ status?: number; body: string; error?: string }> {
  const head = [
    `POST ${path} HTTP/1.1`,
    "Host: 127.0.0.1",
    "Content-Type: application/json",
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    framing === "content-length" ? `Content-Length: ${body.length}` : "Transfer-Encoding: chunked",
    "",
    "",
  ].join("\r\n");
  const CHUNK = 64 * 1024;
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    let received = Buffer.alloc(0);
    let settled = false;
    const finish = (result: { status?: number; body: string; error?: string }) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(result);
    };
    const timer = setTimeout(() => finish({ body: received.toString(), error: "timed out" }), 20_000);
    socket.on("error", (err: NodeJS.ErrnoException) => finish({ body: "", error: err.code ?? err.message }));
    socket.on("close", () => finish({ body: received.toString(), error: "closed before a complete answer" }));
    socket.on("data", (data: Buffer) => {
      received = Buffer.concat([received, data]);
      const text = received.toString("latin1");
      const end = text.indexOf("\r\n\r\n");
      if (end < 0) return;
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(text.slice(0, end))?.[1] ?? Number.NaN);
      if (received.length < end + 4 + length) return;
      finish({
        status: Number(text.slice(9, 12)),
        body: received.subarray(end + 4, end + 4 + length).toString("utf8"),
      });
    });
    socket.pause();
    socket.write(head);
    let offset = 0;
    const writeNext = () => {
      if (settled) return;
      if (offset >= body.length) {
        if (framing === "chunked") socket.write("0\r\n\r\n");
        socket.resume(); // the whole request is written: now read the answer
        return;
      }
      const piece = body.subarray(offset, offset + CHUNK);
      offset += piece.length;
      const framed =
        framing === "chunked"
          ? Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from("\r\n")])
          : piece;
      if (socket.write(framed)) setTimeout(writeNext, 2);
      else socket.once("drain", () => setTimeout(writeNext, 2));
    };
    writeNext();
  });
}

// ---- generated hostile values at every route -----------------------------------------------------

interface Operation {
  auth: Auth;
  params?: Record<string, string>;
  query?: Record<string, string>;
  headers?: Record<string, string>;
  body?: Record<string, unknown>;
  /** Routes that do not check fields (the card webhook checks its signature first). */
  fieldsUnchecked?: true;
  /** Documented query parameters the valid request leaves out (one of two): generated cases set them. */
  absentQuery?: string[];
}

/** A valid request per documented operation; each generated case replaces one field of it. */
function baselines(): Record<string, Operation> {
  const page = { limit: "10", offset: "0" };
  const payout = {
    tokenSymbol: "USDC",
    amount: "0.01",
    destinationAddress: DESTINATION,
    description: "Payout",
    metadata: { ref: "1" },
    idempotencyKey: "hostile-payout",
    walletType: "eoa",
  };
  const swapQuery = {
    sellToken: "USDC",
    buyToken: "ETH",
    sellAmount: "0.01",
    walletType: "eoa",
    slippageBps: "50",
  };
  // Either a quoteId or the quote's parameters (null: not given), executed again under one key.
  const swap = {
    quoteId: null,
    ...swapQuery,
    buyAmount: null,
    slippageBps: 50,
    idempotencyKey: "hostile-swap",
  };
  const swaps = ["/api/v1/swap", "/swap"].flatMap(
    (path): Array<[string, Operation]> => [
      [`GET ${path}/quote`, { auth: "key", query: swapQuery, absentQuery: ["buyAmount"] }],
      [`POST ${path}`, { auth: "key", headers: { "idempotency-key": "hostile-swap" }, body: swap }],
    ],
  );
  // One amount or the other (null: not given); the session completes at once in the sandbox.
  const onramp = {
    destinationCurrency: "USDC",
    sourceAmount: "1.00",
    destinationAmount: null,
    walletType: "eoa",
  };
  const onramps = ["/api/v1/onramp/session", "/onramp/session"].map((path): [string, Operation] => [
    `POST ${path}`,
    { auth: "key", body: onramp },
  ]);
  return {
    ...Object.fromEntries(swaps),
    ...Object.fromEntries(onramps),
    "GET /api/v1/onramp/sessions": { auth: "key", query: page },
    "GET /api/v1/onramp/sessions/{id}": { auth: "key", params: { id: fixtures.onrampId } },
    "GET /api/v1/swaps": { auth: "key", query: page },
    "GET /api/v1/swaps/{id}": { auth: "key", params: { id: fixtures.swapId } },
    "POST /api/v1/workspaces": {
      auth: "admin",
      body: {
        name: "W",
        settlementAddress: MERCHANT,
        adminEmail: "a@example.com",
        adminPassword: "a-long-password",
      },
    },
    "GET /api/v1/workspaces/{id}": { auth: "key", params: { id: ws.id } },
    "POST /api/v1/keys": { auth: "key", body: { environment: "sandbox", name: "Key" } },
    "GET /api/v1/keys": { auth: "key" },
    "DELETE /api/v1/keys/{id}": { auth: "key", params: { id: UNKNOWN_UUID } },
    "POST /api/v1/payments": {
      auth: "key",
      headers: { "idempotency-key": "hostile-payment" },
      body: {
        paymentMethod: "crypto",
        tokenSymbol: "USDC",
        amount: "1.00",
        merchantWallet: MERCHANT,
        returnUrl: "https://shop.example/return",
        successUrl: "https://shop.example/return",
        merchantReturnUrl: "https://shop.example/return",
        cancelUrl: "https://shop.example/cancel",
        description: "Order",
        metadata: { order: "1" },
        expiresInMinutes: 60,
        walletType: "eoa",
      },
    },
    "GET /api/v1/payments": { auth: "key", query: { status: "pending", environment: "sandbox", ...page } },
    "GET /api/v1/payments/export.csv": {
      auth: "key",
      query: {
        status: "forwarded",
        environment: "sandbox",
        tokenSymbol: "USDC",
        paymentMethod: "crypto",
        createdFrom: "2024-01-01",
        createdTo: "2100-01-01T00:00:00Z",
        search: "x",
      },
    },
    "GET /api/v1/payouts/export.csv": { auth: "key", query: { status: "completed", environment: "sandbox" } },
    "GET /api/v1/payments/{id}": { auth: "key", params: { id: fixtures.paymentId } },
    "POST /api/v1/payments/{id}/cancel": { auth: "key", params: { id: UNKNOWN_UUID } },
    "GET /api/v1/transfers/unmatched": { auth: "key", query: page },
    "POST /api/v1/transfers/unmatched/{id}/attach": {
      auth: "key",
      params: { id: UNKNOWN_UUID },
      body: { paymentId: fixtures.paymentId },
    },
    "POST /api/v1/transfers/unmatched/{id}/return": {
      auth: "key",
      params: { id: UNKNOWN_UUID },
      headers: { "idempotency-key": "hostile-return" },
      body: { destinationAddress: DESTINATION, reason: "Stray" },
    },
    "POST /api/v1/sandbox/incoming-transfer": {
      auth: "key",
      body: { tokenSymbol: "USDC", amount: "1", fromAddress: DESTINATION, walletType: "eoa" },
    },
    "POST /api/v1/payments/{id}/refunds": {
      auth: "key",
      params: { id: fixtures.paymentId },
      headers: { "idempotency-key": "hostile-refund" },
      body: { amount: "0.01", destinationAddress: DESTINATION, walletType: "eoa", reason: "Refund" },
    },
    "GET /api/v1/payments/{id}/refunds": { auth: "key", params: { id: fixtures.paymentId }, query: page },
    "GET /api/v1/splits": { auth: "key" },
    "PUT /api/v1/splits": {
      auth: "key",
      body: {
        enabled: true,
        splits: [{ label: "Seller", percentBps: 100, destination: MERCHANT, enabled: true }],
      },
    },
    "GET /api/v1/settlements": { auth: "key", query: { paymentId: fixtures.paymentId, ...page } },
    "GET /api/v1/settlements/{id}": { auth: "key", params: { id: UNKNOWN_UUID } },
    "POST /api/v1/verify": { auth: "key", body: { paymentId: fixtures.paymentId } },
    "POST /api/v1/webhooks": {
      auth: "key",
      body: { url: "http://127.0.0.1:9/hook", events: ["payment.created"] },
    },
    "GET /api/v1/webhooks": { auth: "key" },
    "DELETE /api/v1/webhooks/{id}": { auth: "key", params: { id: "999999" } },
    "GET /api/v1/webhooks/{id}/deliveries": { auth: "key", params: { id: fixtures.webhookId }, query: page },
    "POST /api/v1/webhooks/{id}/deliveries/{deliveryId}/retry": {
      auth: "key",
      params: { id: fixtures.webhookId, deliveryId: UNKNOWN_UUID },
    },
    "POST /api/v1/payouts": { auth: "key", body: payout },
    "GET /api/v1/payouts": { auth: "key", query: page },
    "POST /api/v1/workspaces/{id}/resume": { auth: "key", params: { id: ws.id } },
    "GET /api/v1/workspaces/{id}/payout-state": { auth: "key", params: { id: ws.id } },
    "GET /api/v1/wallet/balance": { auth: "key" },
    "GET /api/v1/wallet/stats": { auth: "key" },
    "POST /api/v1/sandbox/faucet": {
      auth: "key",
      body: { tokenSymbol: "USDC", amount: "1", walletType: "eoa" },
    },
    "POST /api/webhooks/card": {
      auth: "none",
      body: { id: "evt_1", type: "checkout.session.completed" },
      fieldsUnchecked: true,
    },
    "POST /api/v1/workspaces/{id}/smart-wallet": {
      auth: "key",
      params: { id: ws.id },
      query: { environment: "sandbox" },
      body: { setDefault: false },
    },
    "GET /api/v1/workspaces/{id}/smart-wallet": {
      auth: "key",
      params: { id: ws.id },
      query: { environment: "sandbox" },
    },
    "PATCH /api/v1/workspaces/{id}/smart-wallet": {
      auth: "key",
      params: { id: ws.id },
      query: { environment: "sandbox" },
      body: { defaultWalletType: "workspace" },
    },
    "POST /api/workspaces/smart-wallet": { auth: "session" },
    "PATCH /api/workspaces/smart-wallet": {
      auth: "session",
      query: { environment: "sandbox" },
      body: { defaultWalletType: "workspace" },
    },
    "POST /api/agents/create": {
      auth: "key",
      body: { name: "Agent", description: "Helps", metadata: { team: "ops" } },
    },
    "GET /api/agents/{agentId}": { auth: "key", params: { agentId: fixtures.agentId } },
    "PATCH /api/agents/{agentId}": {
      auth: "key",
      params: { agentId: fixtures.agentId },
      body: { name: "Agent", description: "Helps", metadata: { team: "ops" } },
    },
    "DELETE /api/agents/{agentId}": { auth: "key", params: { agentId: UNKNOWN_UUID } },
    "GET /api/agents": { auth: "key", query: { page: "1", limit: "10", search: "agent" } },
    "POST /api/wallets/create": {
      auth: "key",
      body: { ownerId: "user-1", type: "user", currencies: ["ETH"] },
    },
    "GET /api/wallets/{walletId}": { auth: "key", params: { walletId: fixtures.walletId } },
    "GET /api/wallets": {
      auth: "key",
      query: { page: "1", limit: "10", ownerId: "user-1", type: "user", currency: "ETH" },
    },
    "GET /api/wallets/{walletId}/balance/{currency}": {
      auth: "key",
      params: { walletId: fixtures.walletId, currency: "ETH" },
    },
    "POST /api/wallets/{walletId}/currencies": {
      auth: "key",
      params: { walletId: fixtures.walletId },
      body: { currency: "USDC" },
    },
  };
}

/** The public routes the document leaves out (the hosted page). */
const UNDOCUMENTED: Record<string, Operation> = {
  "GET /pay/{id}": { auth: "none", params: { id: UNKNOWN_UUID } },
  "GET /pay/{id}/status": { auth: "none", params: { id: UNKNOWN_UUID } },
  "GET /pay/assets/{file}": { auth: "none", params: { file: "page.css" } },
};

const PROTOTYPE_NAMES = ["__proto__", "constructor", "prototype", "toString", "hasOwnProperty", "valueOf"];

/** Values a JSON body field may be replaced with (undefined: the field is left out). */
const HOSTILE_JSON: unknown[] = [
  undefined,
  null,
  true,
  0,
  -1,
  1.5,
  1e20,
  -0.000001,
  Number.MAX_SAFE_INTEGER + 2,
  new Raw("1e309"),
  new Raw("-1e309"),
  new Raw("1".repeat(61)),
  "",
  " ",
  "-1",
  "0",
  "1e309",
  "1e20",
  "0x10",
  " 1",
  "NaN",
  "Infinity",
  "١٢٣",
  "9".repeat(40),
  "9".repeat(79),
  `${"9".repeat(60)}.${"9".repeat(18)}`,
  "1".repeat(5000),
  "\ud800",
  "a\udfffb",
  "\udc00\ud800",
  "\u0000",
  "a\u0000b",
  "\u202e\ufeff",
  "x".repeat(1001),
  "x".repeat(100_000),
  "💸",
  ...PROTOTYPE_NAMES,
  [],
  [1],
  ["\ud800"],
  ["x".repeat(300)],
  {},
  { a: { b: { c: {} } } },
  new Raw(`${"[".repeat(50)}${"]".repeat(50)}`),
  JSON.parse('{"__proto__":"x"}'),
  JSON.parse('{"constructor":{"prototype":{"polluted":true}}}'),
  { constructor: "x", toString: "y" },
  { "\ud800": "x" },
  { k: "\ud800" },
  { k: "\u0000" },
  { "\u0000": "x" },
  { k: { nested: "x" } },
  { k: 1 },
  Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, "v"])),
  { ["k".repeat(41)]: "x" },
  { k: "v".repeat(501) },
];

/** Text for a query parameter or path segment, already %-encoded as it goes on the wire. */
const HOSTILE_URL_TEXT: string[] = [
  "",
  "1e20",
  "1e309",
  "-1e309",
  "100000000000000000000",
  "9007199254740993",
  "2147483648",
  "-1",
  "1.5",
  "0",
  "0x10",
  "%201",
  "NaN",
  "Infinity",
  "%00",
  "a%00b",
  "%ED%A0%80",
  "%ED%B0%80x",
  "%C0%80",
  "%FF",
  "%",
  "%zz",
  ...PROTOTYPE_NAMES,
  "x".repeat(5000),
  "9".repeat(100),
  "..%2F..%2Fetc%2Fpasswd",
  "%E2%80%AE",
  "ABCDEF00-0000-0000-0000-00000000000G",
  "true",
  "null",
  "%5B%5D",
];

/** Any UTF-16 code unit, lone surrogates and NUL included; %-encodes what encodeURIComponent refuses. */
const anyText = fc.string({
  unit: fc.oneof(
    fc.constantFrom("\ud800", "\udfff", "\u0000", "%", "/", "?", "#", "&", "="),
    fc.integer({ min: 0, max: 0xffff }).map((code) => String.fromCharCode(code)),
  ),
  maxLength: 40,
});

function encodeText(text: string): string {
  let out = "";
  for (const char of text) {
    const code = char.codePointAt(0) ?? 0;
    // A lone surrogate goes on the wire as the bytes UTF-8 would give it (which decode to nothing valid).
    out +=
      code >= 0xd800 && code <= 0xdfff
        ? `%${(0xe0 | (code >> 12)).toString(16)}%${(0x80 | ((code >> 6) & 0x3f)).toString(16)}%${(0x80 | (code & 0x3f)).toString(16)}`
        : encodeURIComponent(char);
  }
  return out;
}

/** Number-like text: huge, negative, fractional, exponents (what integer parameters are fed). */
const numberText = fc.oneof(
  fc.bigInt().map(String),
  fc.double().map(String),
  fc.stringMatching(/^-?[0-9]{1,25}(\.[0-9]{1,5})?(e-?[0-9]{1,3})?$/),
);
/** Decimal strings of any length: amounts up to and far beyond what a uint256 holds. */
const decimalText = fc
  .tuple(fc.bigInt({ min: 0n, max: 10n ** 120n }), fc.option(fc.bigInt({ min: 0n, max: 10n ** 25n })))
  .map(([whole, fraction]) => (fraction === null ? `${whole}` : `${whole}.${fraction}`));

const hostileUrlText = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...HOSTILE_URL_TEXT) },
  { weight: 2, arbitrary: numberText },
  { weight: 1, arbitrary: anyText.map(encodeText) },
);
const hostileJson = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...HOSTILE_JSON) },
  { weight: 1, arbitrary: anyText },
  { weight: 1, arbitrary: decimalText },
  {
    weight: 1,
    arbitrary: fc.double().map((n) => (Number.isFinite(n) ? n : new Raw(n > 0 ? "1e999" : "-1e999"))),
  },
  { weight: 1, arbitrary: fc.bigInt().map((n) => new Raw(n.toString())) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
);
/** Header values HTTP can carry (visible ASCII): long, empty, prototype names, numbers. */
const hostileHeader = fc.oneof(
  fc.constantFrom("", " ", "x".repeat(256), "x".repeat(8000), ...PROTOTYPE_NAMES, "1e309", "-1"),
  fc.string({ unit: "grapheme-ascii", maxLength: 300 }),
);

type Mutation =
  | { in: "path" | "query"; name: string; value: string | string[] }
  | { in: "header"; name: string; value: string }
  | { in: "body"; name: string; value: unknown }
  | { in: "whole-body"; value: unknown };

function mutationsOf(op: Operation): fc.Arbitrary<Mutation> {
  // Every route also gets a query parameter it does not document (ignored, unless hostile).
  const choices: fc.Arbitrary<Mutation>[] = [
    hostileUrlText.map((value) => ({ in: "query" as const, name: "undocumented", value })),
  ];
  for (const name of Object.keys(op.params ?? {})) {
    choices.push(hostileUrlText.map((value) => ({ in: "path" as const, name, value })));
  }
  // Fields that take numbers get number-like values more often: that is where limits break.
  const numeric = (value: unknown) => typeof value === "string" && /^[0-9]+(\.[0-9]+)?$/.test(value);
  for (const [name, baseline] of [
    ...Object.entries(op.query ?? {}),
    ...(op.absentQuery ?? []).map((n): [string, string] => [n, ""]),
  ]) {
    const text = numeric(baseline) ? fc.oneof(numberText, hostileUrlText) : hostileUrlText;
    const value = fc.oneof(text, fc.array(hostileUrlText, { minLength: 2, maxLength: 3 }));
    choices.push(value.map((v) => ({ in: "query" as const, name, value: v })));
  }
  for (const name of Object.keys(op.headers ?? {})) {
    choices.push(hostileHeader.map((value) => ({ in: "header" as const, name, value })));
  }
  for (const [name, baseline] of Object.entries(op.body ?? {})) {
    const value = numeric(baseline) ? fc.oneof(decimalText, hostileJson) : hostileJson;
    choices.push(value.map((v) => ({ in: "body" as const, name, value: v })));
  }
  if (op.body) {
    const whole = fc.oneof(fc.constantFrom(...HOSTILE_JSON.filter((v) => v !== undefined)), hostileJson);
    choices.push(whole.map((value) => ({ in: "whole-body" as const, value })));
  }
  return fc.oneof(...choices);
}

function requestOf(template: string, op: Operation, m: Mutation) {
  const params = { ...op.params };
  const query: Record<string, string | string[]> = { ...op.query };
  const headers = { ...op.headers };
  let body: unknown = op.body === undefined ? undefined : { ...op.body };
  if (m.in === "path") params[m.name] = Array.isArray(m.value) ? m.value.join("") : m.value;
  if (m.in === "query") query[m.name] = m.value;
  if (m.in === "header") headers[m.name] = m.value;
  if (m.in === "body") {
    const copy = { ...op.body };
    if (m.value === undefined) delete copy[m.name];
    else copy[m.name] = m.value;
    body = copy;
  }
  if (m.in === "whole-body") body = m.value;
  const path = template.replace(/\{(\w+)\}/g, (_, name: string) => params[name] ?? "");
  const search = Object.entries(query)
    .flatMap(([name, value]) => (Array.isArray(value) ? value : [value]).map((v) => `${name}=${v}`))
    .join("&");
  return { url: search ? `${path}?${search}` : path, body, headers };
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Raw);

/** Cases per route: 40 keeps the file well under a minute; HOSTILE_RUNS=500 explores further. */
const RUNS_PER_ROUTE = Number(process.env.HOSTILE_RUNS ?? 40);

/** Refusals that are about the request as a whole, not one field. */
const REQUEST_LEVEL =
  /^(Malformed URL|Path segment is too long .*|Route not found: .*|Insufficient balance|Request body must be a JSON object)$/;

async function throwAt(key: string, op: Operation, m: Mutation): Promise<void> {
  const [method = "GET", template = ""] = key.split(" ");
  const { url, body, headers } = requestOf(template, op, m);
  const label = `${method} ${url.slice(0, 160)} ${m.in} ${"name" in m ? m.name : ""}=${toJson(m.value).slice(0, 100)}`;
  const before = await writtenState();
  const res = await send(method, url, op.auth, body, headers);
  expect(res.statusCode, `${label} → ${res.body.slice(0, 300)}`).toBeLessThan(500);
  if (res.statusCode < 400) return;
  // The hosted page answers its own 404 as HTML (also "/pay/assets/", which is the page of id
  // "assets"); every other error is JSON.
  const htmlPage =
    url.startsWith("/pay/") &&
    res.statusCode === 404 &&
    /^text\/html/.test(String(res.headers["content-type"]));
  if (!htmlPage) {
    const error = expectJsonError(res, url, label);
    // A replaced body is named as "body" or by the field of it that is refused.
    const fields =
      m.in === "whole-body"
        ? ["body", ...Object.keys(op.body ?? {}), ...Object.keys(isRecord(m.value) ? m.value : {})]
        : [m.name];
    if (res.statusCode === 400 && !op.fieldsUnchecked && !REQUEST_LEVEL.test(error)) {
      const named = fields.some((field) => namesField(error, field));
      expect(named, `${label}: "${error}" does not name ${fields.join(" or ")}`).toBe(true);
    }
  }
  expect(await writtenState(), `${label} → ${res.statusCode}: nothing written`).toBe(before);
}

describe("generated hostile values at every route (issue 20)", () => {
  it("has a valid request for every operation of the OpenAPI document, naming all of its fields", async () => {
    const doc = (await t.request({ method: "GET", url: "/openapi.json" })).json() as {
      paths: Record<
        string,
        Record<
          string,
          {
            parameters?: Array<{ in: string; name: string }>;
            requestBody?: { content: Record<string, { schema: { properties?: Record<string, unknown> } }> };
          }
        >
      >;
    };
    const known = baselines();
    const missing: string[] = [];
    for (const [path, operations] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        const key = `${method.toUpperCase()} ${path}`;
        const op = known[key];
        if (!op) {
          missing.push(key);
          continue;
        }
        for (const p of operation.parameters ?? []) {
          const given = p.in === "path" ? op.params : p.in === "query" ? op.query : op.headers;
          const absent = p.in === "query" && op.absentQuery?.includes(p.name);
          if (!absent && (!given || !(p.name in given))) missing.push(`${key}: ${p.in} ${p.name}`);
        }
        const schema = operation.requestBody?.content["application/json"]?.schema;
        for (const name of Object.keys(schema?.properties ?? {})) {
          if (!op.body || !(name in op.body)) missing.push(`${key}: body ${name}`);
        }
      }
    }
    expect(missing).toEqual([]);
  });

  it("answers every generated hostile request below 500, as a JSON error naming the field, and writes nothing when it refuses", async () => {
    // Every route is tried even after one fails, so a run reports all the routes that need work.
    const failures: string[] = [];
    for (const [key, op] of Object.entries({ ...baselines(), ...UNDOCUMENTED })) {
      const details = await fc.check(
        fc.asyncProperty(mutationsOf(op), async (m) => throwAt(key, op, m)),
        { numRuns: RUNS_PER_ROUTE, endOnFailure: true },
      );
      if (details.failed) {
        const cause = details.errorInstance instanceof Error ? details.errorInstance.message : "";
        failures.push(`${key}: ${toJson(details.counterexample)} (seed ${details.seed})\n  ${cause}`);
      }
    }
    expect(failures.join("\n")).toBe("");
  }, 600_000);
});
