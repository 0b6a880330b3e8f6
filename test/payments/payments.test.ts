import type { InjectOptions } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";

// Integration tests of the payments endpoints (interface parts 2, 3, 4.1–4.5, 6, 7, 8; decisions
// D3, D4, D5, D10, D13) against the real app on a real database.

const SETTLEMENT = "0x1111111111111111111111111111111111111111";
const MERCHANT = "0x2222222222222222222222222222222222222222";
const ACCOUNT_SETTLEMENT = "0x3333333333333333333333333333333333333333";
const SMART_WALLET = "0x4444444444444444444444444444444444444444";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const MSG = {
  required: "tokenSymbol, amount, and merchantWallet are required",
  invalidToken: "Invalid token symbol",
  invalidAmount: "Amount must be a positive number",
  invalidWallet: "Invalid merchant wallet address",
  noSettlement: "No merchantWallet provided and no settlement address configured",
  notFound: "Payment not found",
  cannotCancel: "Payment cannot be cancelled",
  liveNotConfigured: "Live network is not configured",
} as const;

type Json = Record<string, unknown>;

let t: TestApp;

beforeAll(async () => {
  // A high sandbox rate limit so that the many requests of one workspace never meet a 429.
  t = await startTestApp({ RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" });
});
afterAll(async () => t.close());

function createPayment(key: string, payload: unknown, headers: Record<string, string> = {}) {
  return t.request({
    method: "POST",
    url: "/api/v1/payments",
    headers: { ...bearer(key), ...headers },
    payload: payload as InjectOptions["payload"],
  });
}

async function createOk(key: string, payload: Json): Promise<Json> {
  const res = await createPayment(key, payload);
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

function get(key: string, url: string) {
  return t.request({ method: "GET", url, headers: bearer(key) });
}

function post(key: string, url: string, payload?: unknown) {
  return t.request({
    method: "POST",
    url,
    headers: bearer(key),
    ...(payload === undefined ? {} : { payload: payload as InjectOptions["payload"] }),
  });
}

/** The only way to get a pending payment: sandbox completes at once and live creation answers 503. */
async function insertPayment(
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

async function outboxRows(workspaceId: string, environment?: "sandbox" | "live") {
  let query = t.database.db
    .selectFrom("outbox_events")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .orderBy("id", "asc");
  if (environment) query = query.where("environment", "=", environment);
  return query.execute();
}

async function paymentRows(workspaceId: string, environment?: "sandbox" | "live") {
  let query = t.database.db.selectFrom("payments").selectAll().where("workspace_id", "=", workspaceId);
  if (environment) query = query.where("environment", "=", environment);
  return query.execute();
}

async function expectError(
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

describe("POST /api/v1/payments — sandbox crypto", () => {
  let ws: CreatedWorkspace;
  beforeAll(async () => {
    ws = await createWorkspace(t);
  });

  it("creates a USDC payment that is forwarded at once, with the documented response shape", async () => {
    const body = await createOk(ws.testKey, { tokenSymbol: "USDC", amount: "100", merchantWallet: MERCHANT });
    const payment = body.payment as Json;
    expect(body.paymentMethod).toBe("crypto");
    expect(body.paymentProvider).toBe("onchain");
    expect(body.receivingAddress).toBe(ws.eoaAddress);
    expect(body.paymentUrl).toBe(`http://pay.test/pay/${payment.id}`);
    expect(body).not.toHaveProperty("checkoutUrl");
    expect(payment.id).toMatch(UUID);
    expect(payment).toMatchObject({
      status: "forwarded",
      paymentMethod: "crypto",
      paymentProvider: "onchain",
      tokenSymbol: "USDC",
      grossAmount: "100.00",
      feeAmount: "1.50",
      netAmount: "98.50",
      merchantWallet: MERCHANT,
      receivingAddress: ws.eoaAddress,
      environment: "sandbox",
      description: null,
      metadata: {},
    });
    expect(new Date(payment.createdAt as string).toISOString()).toBe(payment.createdAt);
  });

  it("keeps small USDC amounts exact (0.000015 stays 0.000015)", async () => {
    const body = await createOk(ws.testKey, { tokenSymbol: "USDC", amount: "0.000015" });
    expect(body.payment).toMatchObject({
      status: "forwarded",
      grossAmount: "0.000015",
      feeAmount: "0.00",
      netAmount: "0.000015",
      merchantWallet: SETTLEMENT,
    });
  });

  it("creates an ETH payment with 18 decimals and an exact integer fee", async () => {
    const body = await createOk(ws.testKey, { tokenSymbol: "ETH", amount: "1.123456789012345678" });
    expect(body.payment).toMatchObject({
      status: "forwarded",
      tokenSymbol: "ETH",
      grossAmount: "1.123456789012345678",
      feeAmount: "0.016851851835185185",
      netAmount: "1.106604937177160493",
      paymentProvider: "onchain",
    });
    expect(body.receivingAddress).toBe(ws.eoaAddress);
  });

  it("creates an ADAO payment", async () => {
    const body = await createOk(ws.testKey, { tokenSymbol: "ADAO", amount: "2.5" });
    expect(body.paymentMethod).toBe("crypto");
    expect(body.paymentProvider).toBe("onchain");
    expect(body.receivingAddress).toBe(ws.eoaAddress);
    expect(body.payment).toMatchObject({
      status: "forwarded",
      tokenSymbol: "ADAO",
      grossAmount: "2.50",
      feeAmount: "0.0375",
      netAmount: "2.4625",
    });
  });

  it("stores description and metadata and echoes them", async () => {
    const body = await createOk(ws.testKey, {
      tokenSymbol: "USDC",
      amount: "12.34",
      description: "Order #42",
      metadata: { orderId: "42", customer: "alice" },
    });
    expect(body.payment).toMatchObject({
      description: "Order #42",
      metadata: { orderId: "42", customer: "alice" },
    });
    const read = await get(ws.testKey, `/api/v1/payments/${(body.payment as Json).id}`);
    expect(read.json().payment).toMatchObject({
      description: "Order #42",
      metadata: { orderId: "42", customer: "alice" },
    });
  });

  it("uses the default expiry of 60 minutes", async () => {
    const body = await createOk(ws.testKey, { tokenSymbol: "USDC", amount: "1" });
    const payment = body.payment as Json;
    const diff = Date.parse(payment.expiresAt as string) - Date.parse(payment.createdAt as string);
    expect(diff).toBe(60 * 60_000);
  });

  it("stores expiresInMinutes as expiresAt = createdAt + N minutes", async () => {
    const body = await createOk(ws.testKey, { tokenSymbol: "USDC", amount: "1", expiresInMinutes: 15 });
    const payment = body.payment as Json;
    const diff = Date.parse(payment.expiresAt as string) - Date.parse(payment.createdAt as string);
    expect(diff).toBe(15 * 60_000);
    const row = await t.database.db
      .selectFrom("payments")
      .select(["expires_at", "created_at"])
      .where("id", "=", payment.id as string)
      .executeTakeFirstOrThrow();
    expect(row.expires_at.getTime() - row.created_at.getTime()).toBe(15 * 60_000);
  });

  it("stores returnUrl and its aliases (successUrl, metadata.merchantReturnUrl) as returnUrl", async () => {
    const direct = await createOk(ws.testKey, {
      tokenSymbol: "USDC",
      amount: "1",
      returnUrl: "https://shop.example/return",
    });
    expect((direct.payment as Json).returnUrl).toBe("https://shop.example/return");

    const success = await createOk(ws.testKey, {
      tokenSymbol: "USDC",
      amount: "1",
      successUrl: "https://shop.example/success",
    });
    expect((success.payment as Json).returnUrl).toBe("https://shop.example/success");

    const inMetadata = await createOk(ws.testKey, {
      tokenSymbol: "USDC",
      amount: "1",
      metadata: { merchantReturnUrl: "https://shop.example/meta" },
    });
    expect((inMetadata.payment as Json).returnUrl).toBe("https://shop.example/meta");

    const row = await t.database.db
      .selectFrom("payments")
      .select("return_url")
      .where("id", "=", (inMetadata.payment as Json).id as string)
      .executeTakeFirstOrThrow();
    expect(row.return_url).toBe("https://shop.example/meta");
  });

  it("refuses a javascript: return URL (and its aliases)", async () => {
    await expectError(
      createPayment(ws.testKey, { tokenSymbol: "USDC", amount: "1", returnUrl: "javascript:alert(1)" }),
      400,
    );
    await expectError(
      createPayment(ws.testKey, { tokenSymbol: "USDC", amount: "1", successUrl: "javascript:alert(1)" }),
      400,
    );
    await expectError(
      createPayment(ws.testKey, {
        tokenSymbol: "USDC",
        amount: "1",
        metadata: { merchantReturnUrl: "javascript:alert(1)" },
      }),
      400,
    );
  });

  it("answers 400 for an invalid walletType", async () => {
    await expectError(
      createPayment(ws.testKey, { tokenSymbol: "USDC", amount: "1", walletType: "vault" }),
      400,
    );
  });

  it("answers 400 for walletType smart_wallet when the workspace has no smart wallet, and writes nothing", async () => {
    const fresh = await createWorkspace(t);
    await expectError(
      createPayment(fresh.testKey, { tokenSymbol: "USDC", amount: "1", walletType: "smart_wallet" }),
      400,
    );
    expect(await paymentRows(fresh.id)).toHaveLength(0);
    expect(await outboxRows(fresh.id)).toHaveLength(0);
  });

  it("receives on the smart wallet when walletType smart_wallet is chosen and one exists", async () => {
    const fresh = await createWorkspace(t);
    await t.database.db
      .insertInto("workspace_wallets")
      .values({
        workspace_id: fresh.id,
        kind: "smart_wallet",
        address: SMART_WALLET,
        encrypted_private_key: null,
      })
      .execute();
    const body = await createOk(fresh.testKey, {
      tokenSymbol: "USDC",
      amount: "1",
      walletType: "smart_wallet",
    });
    expect(body.receivingAddress).toBe(SMART_WALLET);
    expect(body.payment).toMatchObject({ walletType: "smart_wallet", receivingAddress: SMART_WALLET });
    const eoa = await createOk(fresh.testKey, { tokenSymbol: "USDC", amount: "1", walletType: "eoa" });
    expect(eoa.receivingAddress).toBe(fresh.eoaAddress);
  });
});

describe("POST /api/v1/payments — sandbox card", () => {
  it("creates a card payment that completes at once, without checkoutUrl, merchantWallet null with no settlement address", async () => {
    const ws = await createWorkspace(t, { settlementAddress: undefined });
    const body = await createOk(ws.testKey, { paymentMethod: "card", tokenSymbol: "USD", amount: "100" });
    const payment = body.payment as Json;
    expect(body.paymentMethod).toBe("card");
    expect(body.paymentProvider).toBe("card");
    expect(body).not.toHaveProperty("checkoutUrl");
    expect(body.paymentUrl).toBe(`http://pay.test/pay/${payment.id}`);
    expect(payment).toMatchObject({
      status: "forwarded",
      paymentMethod: "card",
      paymentProvider: "card",
      tokenSymbol: "USD",
      grossAmount: "100.00",
      feeAmount: "1.50",
      netAmount: "98.50",
      merchantWallet: null,
      environment: "sandbox",
      description: null,
      metadata: {},
    });
  });

  it("uses the workspace settlement address as merchantWallet when one exists", async () => {
    const ws = await createWorkspace(t);
    const body = await createOk(ws.testKey, { paymentMethod: "card", tokenSymbol: "USD", amount: "20" });
    expect((body.payment as Json).merchantWallet).toBe(SETTLEMENT);
  });

  it("enforces the card minimum of 0.50 USD", async () => {
    const ws = await createWorkspace(t);
    await expectError(
      createPayment(ws.testKey, { paymentMethod: "card", tokenSymbol: "USD", amount: "0.49" }),
      400,
    );
    const ok = await createOk(ws.testKey, { paymentMethod: "card", tokenSymbol: "USD", amount: "0.50" });
    expect(ok.payment).toMatchObject({ grossAmount: "0.50", feeAmount: "0.01", netAmount: "0.49" });
  });

  it("refuses crypto tokens on the card rail and USD on the crypto rail", async () => {
    const ws = await createWorkspace(t);
    await expectError(
      createPayment(ws.testKey, { paymentMethod: "card", tokenSymbol: "USDC", amount: "10" }),
      400,
      MSG.invalidToken,
    );
    await expectError(createPayment(ws.testKey, { tokenSymbol: "USD", amount: "10" }), 400, MSG.invalidToken);
  });

  it("refuses more than 2 decimals for USD", async () => {
    const ws = await createWorkspace(t);
    await expectError(
      createPayment(ws.testKey, { paymentMethod: "card", tokenSymbol: "USD", amount: "1.001" }),
      400,
      MSG.invalidAmount,
    );
  });
});

describe("outbox events", () => {
  it("writes payment.created (pending) then payment.forwarded for a sandbox create, with the API payment shape", async () => {
    const ws = await createWorkspace(t);
    const body = await createOk(ws.testKey, {
      tokenSymbol: "USDC",
      amount: "100",
      description: "Widget",
      metadata: { sku: "w-1" },
    });
    const payment = body.payment as Json;
    const rows = await outboxRows(ws.id);
    expect(rows).toHaveLength(2);
    const [created, forwarded] = rows;
    expect(created?.event_type).toBe("payment.created");
    expect(created?.environment).toBe("sandbox");
    expect(created?.payload).toEqual({ ...payment, status: "pending", updatedAt: expect.any(String) });
    expect(forwarded?.event_type).toBe("payment.forwarded");
    expect(forwarded?.environment).toBe("sandbox");
    expect(forwarded?.payload).toEqual(payment);
    // camelCase, D4 amounts
    expect(forwarded?.payload).toMatchObject({
      grossAmount: "100.00",
      feeAmount: "1.50",
      netAmount: "98.50",
      tokenSymbol: "USDC",
      description: "Widget",
      metadata: { sku: "w-1" },
    });
    expect(Object.keys(forwarded?.payload ?? {}).some((k) => k.includes("_"))).toBe(false);
  });

  it("writes concurrent creates of several workspaces, sharing statements, each with its own events and credit", async () => {
    const workspaces = [await createWorkspace(t), await createWorkspace(t)];
    const amounts = ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10"];
    const created = await Promise.all(
      amounts.flatMap((amount) =>
        workspaces.map(async (ws) => ({
          ws,
          body: await createOk(ws.testKey, { tokenSymbol: "USDC", amount }),
        })),
      ),
    );
    for (const ws of workspaces) {
      const mine = created.filter((c) => c.ws === ws).map((c) => c.body.payment as Json);
      expect(mine.map((p) => p.grossAmount).sort()).toEqual(amounts.map((a) => `${a}.00`).sort());
      expect((await paymentRows(ws.id)).map((r) => r.id).sort()).toEqual(mine.map((p) => p.id).sort());
      // Each payment: payment.created (pending) before payment.forwarded, with its own payload.
      const events = await outboxRows(ws.id);
      expect(events).toHaveLength(2 * amounts.length);
      for (const payment of mine) {
        const own = events.filter((e) => (e.payload as Json).id === payment.id);
        expect(own.map((e) => e.event_type)).toEqual(["payment.created", "payment.forwarded"]);
        expect(own[1]?.payload).toEqual(payment);
      }
      // The nets (98.5% of 1 + … + 10 = 55 USDC) landed in the workspace's sandbox wallet.
      const balance = await get(ws.testKey, "/api/v1/wallet/balance");
      expect(balance.json().eoa.balances.USDC).toBe("54.175");
    }
  });

  it("writes exactly one payment.cancelled row after a cancel", async () => {
    const ws = await createWorkspace(t);
    const id = await insertPayment(ws);
    const res = await post(ws.testKey, `/api/v1/payments/${id}/cancel`);
    expect(res.statusCode, res.body).toBe(200);
    const rows = await outboxRows(ws.id);
    expect(rows.map((r) => r.event_type)).toEqual(["payment.cancelled"]);
    expect(rows[0]?.payload).toEqual(res.json().payment);
    expect(rows[0]?.payload).toMatchObject({ id, status: "cancelled" });

    // A refused second cancel writes no further event.
    const again = await post(ws.testKey, `/api/v1/payments/${id}/cancel`);
    expect(again.statusCode).toBe(400);
    expect(await outboxRows(ws.id)).toHaveLength(1);
  });

  it("writes no event for a refused (400) create", async () => {
    const ws = await createWorkspace(t);
    await expectError(createPayment(ws.testKey, { tokenSymbol: "XYZ", amount: "1" }), 400);
    expect(await outboxRows(ws.id)).toHaveLength(0);
    expect(await paymentRows(ws.id)).toHaveLength(0);
  });
});

describe("POST /api/v1/payments — validation messages (part 7)", () => {
  let ws: CreatedWorkspace;
  beforeAll(async () => {
    ws = await createWorkspace(t);
  });

  it("answers the required message when tokenSymbol or amount is absent", async () => {
    await expectError(createPayment(ws.testKey, {}), 400, MSG.required);
    await expectError(createPayment(ws.testKey, { amount: "1" }), 400, MSG.required);
    await expectError(createPayment(ws.testKey, { tokenSymbol: "USDC" }), 400, MSG.required);
    await expectError(createPayment(ws.testKey, { merchantWallet: MERCHANT }), 400, MSG.required);
  });

  it.each([["usdc"], ["BTC"], ["DAI"], ["USD"], [""], [123]])(
    "answers Invalid token symbol for %j",
    async (tokenSymbol) => {
      const body = await expectError(createPayment(ws.testKey, { tokenSymbol, amount: "1" }), 400);
      // An empty string may count as absent; every other value is an invalid symbol.
      if (tokenSymbol === "") expect([MSG.required, MSG.invalidToken]).toContain(body.error);
      else expect(body.error).toBe(MSG.invalidToken);
    },
  );

  it.each([
    ["number", 100],
    ["zero", "0"],
    ["zero with decimals", "0.000000"],
    ["exponent", "1e2"],
    ["hex", "0x10"],
    ["negative sign", "-5"],
    ["plus sign", "+5"],
    ["leading space", " 5"],
    ["trailing space", "5 "],
    ["inner space", "1 000"],
    ["empty", ""],
    ["too many decimals for USDC", "1.0000001"],
    ["comma", "1,5"],
    ["trailing dot", "5."],
    ["leading dot", ".5"],
    ["word", "ten"],
    ["boolean", true],
    ["object", { value: "1" }],
  ])("answers Amount must be a positive number for %s", async (_name, amount) => {
    await expectError(createPayment(ws.testKey, { tokenSymbol: "USDC", amount }), 400, MSG.invalidAmount);
  });

  it("answers Amount must be a positive number for more than 18 decimals on ETH", async () => {
    await expectError(
      createPayment(ws.testKey, { tokenSymbol: "ETH", amount: "0.0000000000000000001" }),
      400,
      MSG.invalidAmount,
    );
    const ok = await createOk(ws.testKey, { tokenSymbol: "ETH", amount: "0.000000000000000001" });
    expect((ok.payment as Json).grossAmount).toBe("0.000000000000000001");
  });

  it.each([
    ["too short", "0x123"],
    ["41 hex chars", `0x${"a".repeat(41)}`],
    ["39 hex chars", `0x${"a".repeat(39)}`],
    ["non-hex", `0x${"g".repeat(40)}`],
    ["no 0x prefix", "a".repeat(42)],
    ["empty", ""],
    ["number", 12345],
    ["with spaces", ` 0x${"a".repeat(40)}`],
  ])("answers Invalid merchant wallet address when it is %s", async (_name, merchantWallet) => {
    await expectError(
      createPayment(ws.testKey, { tokenSymbol: "USDC", amount: "1", merchantWallet }),
      400,
      MSG.invalidWallet,
    );
  });

  it("accepts a mixed-case merchant wallet address", async () => {
    const wallet = "0xAbCdEf0123456789aBcDeF0123456789AbCdEf01";
    const body = await createOk(ws.testKey, { tokenSymbol: "USDC", amount: "1", merchantWallet: wallet });
    expect((body.payment as Json).merchantWallet).toBe(wallet);
  });

  it("answers the first failing check in the order of the part 7 table", async () => {
    await expectError(
      createPayment(ws.testKey, { tokenSymbol: "XYZ", amount: "-1", merchantWallet: "0x1" }),
      400,
      MSG.invalidToken,
    );
    await expectError(
      createPayment(ws.testKey, { tokenSymbol: "USDC", amount: "-1", merchantWallet: "0x1" }),
      400,
      MSG.invalidAmount,
    );
    await expectError(createPayment(ws.testKey, { amount: "-1", merchantWallet: "0x1" }), 400, MSG.required);
  });

  it("answers No merchantWallet provided and no settlement address configured", async () => {
    const bare = await createWorkspace(t, { settlementAddress: undefined });
    await expectError(
      createPayment(bare.testKey, { tokenSymbol: "USDC", amount: "1" }),
      400,
      MSG.noSettlement,
    );
    expect(await paymentRows(bare.id)).toHaveLength(0);
  });

  it("answers 400 when the body is not a JSON object", async () => {
    await expectError(createPayment(ws.testKey, ["USDC", "1"]), 400);
  });

  it("answers 400 Invalid JSON body for malformed JSON (D10)", async () => {
    const res = await t.request({
      method: "POST",
      url: "/api/v1/payments",
      headers: { ...bearer(ws.testKey), "content-type": "application/json" },
      payload: '{"tokenSymbol": "USDC", "amount": ',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: "Invalid JSON body" });
  });

  it.each([[0], [-5], [1.5], ["30"]])("answers 400 for expiresInMinutes %j", async (expiresInMinutes) => {
    await expectError(createPayment(ws.testKey, { tokenSymbol: "USDC", amount: "1", expiresInMinutes }), 400);
  });

  it("refuses a javascript: cancelUrl", async () => {
    await expectError(
      createPayment(ws.testKey, { tokenSymbol: "USDC", amount: "1", cancelUrl: "javascript:alert(1)" }),
      400,
    );
  });

  it("answers 400 naming the field when metadata, description or URLs exceed the D10 limits", async () => {
    const tooManyKeys = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, "v"]));
    const cases: [string, Json][] = [
      ["metadata", { metadata: tooManyKeys }],
      ["metadata", { metadata: { ["x".repeat(41)]: "v" } }],
      ["metadata", { metadata: { note: "v".repeat(501) } }],
      ["metadata", { metadata: { count: 5 } }],
      ["description", { description: "d".repeat(1001) }],
      ["returnUrl", { returnUrl: `https://shop.example/${"a".repeat(2048)}` }],
    ];
    for (const [field, extra] of cases) {
      const body = await expectError(
        createPayment(ws.testKey, { tokenSymbol: "USDC", amount: "1", ...extra }),
        400,
      );
      expect(body.error as string).toContain(field);
    }
    const atLimits = await createOk(ws.testKey, {
      tokenSymbol: "USDC",
      amount: "1",
      description: "d".repeat(1000),
      metadata: Object.fromEntries(
        Array.from({ length: 50 }, (_, i) => [`k${i}`.padEnd(40, "x"), "v".repeat(500)]),
      ),
    });
    expect(Object.keys((atLimits.payment as Json).metadata as Json)).toHaveLength(50);
  });

  it("formats whole amounts with two decimals (D4)", async () => {
    const eth = await createOk(ws.testKey, { tokenSymbol: "ETH", amount: "1" });
    expect(eth.payment).toMatchObject({ grossAmount: "1.00", feeAmount: "0.015", netAmount: "0.985" });
    const usdc = await createOk(ws.testKey, { tokenSymbol: "USDC", amount: "0.1" });
    expect(usdc.payment).toMatchObject({ grossAmount: "0.10", feeAmount: "0.0015", netAmount: "0.0985" });
  });
});

describe("settlement address fallback", () => {
  it("uses merchantWallet, then the workspace settlement address", async () => {
    const ws = await createWorkspace(t);
    const explicit = await createOk(ws.testKey, {
      tokenSymbol: "USDC",
      amount: "1",
      merchantWallet: MERCHANT,
    });
    expect((explicit.payment as Json).merchantWallet).toBe(MERCHANT);
    const fallback = await createOk(ws.testKey, { tokenSymbol: "USDC", amount: "1" });
    expect((fallback.payment as Json).merchantWallet).toBe(SETTLEMENT);
  });

  it("prefers the workspace settlement address over the account one, then the account one, then fails", async () => {
    const t2 = await startTestApp({ ACCOUNT_SETTLEMENT_ADDRESS: ACCOUNT_SETTLEMENT });
    try {
      const withWorkspace = await createWorkspace(t2);
      const a = await t2.request({
        method: "POST",
        url: "/api/v1/payments",
        headers: bearer(withWorkspace.testKey),
        payload: { tokenSymbol: "USDC", amount: "1" },
      });
      expect(a.statusCode, a.body).toBe(201);
      expect(a.json().payment.merchantWallet).toBe(SETTLEMENT);

      const withoutWorkspace = await createWorkspace(t2, { settlementAddress: undefined });
      const b = await t2.request({
        method: "POST",
        url: "/api/v1/payments",
        headers: bearer(withoutWorkspace.testKey),
        payload: { tokenSymbol: "USDC", amount: "1" },
      });
      expect(b.statusCode, b.body).toBe(201);
      expect(b.json().payment.merchantWallet).toBe(ACCOUNT_SETTLEMENT);

      const card = await t2.request({
        method: "POST",
        url: "/api/v1/payments",
        headers: bearer(withoutWorkspace.testKey),
        payload: { paymentMethod: "card", tokenSymbol: "USD", amount: "5" },
      });
      expect(card.statusCode, card.body).toBe(201);
      expect(card.json().payment.merchantWallet).toBe(ACCOUNT_SETTLEMENT);
    } finally {
      await t2.close();
    }

    // The main app has no account-level address: the same request fails.
    const bare = await createWorkspace(t, { settlementAddress: undefined });
    await expectError(
      createPayment(bare.testKey, { tokenSymbol: "USDC", amount: "1" }),
      400,
      MSG.noSettlement,
    );
  });
});

describe("GET /api/v1/payments (list)", () => {
  let ws: CreatedWorkspace;
  const ids: string[] = []; // oldest first
  let pendingId: string;

  beforeAll(async () => {
    ws = await createWorkspace(t);
    const base = Date.now() - 60 * 60_000;
    try {
      for (let i = 0; i < 5; i++) {
        t.setNow(new Date(base + i * 1000));
        const body = await createOk(ws.testKey, { tokenSymbol: "USDC", amount: `${i + 1}` });
        ids.push((body.payment as Json).id as string);
      }
    } finally {
      t.setNow(undefined);
    }
    pendingId = await insertPayment(ws, { createdAt: new Date(base + 10_000) });
    ids.push(pendingId);
    // A live payment of the same workspace never shows in sandbox lists.
    await insertPayment(ws, { environment: "live", createdAt: new Date(base + 20_000) });
  });

  it("answers {payments, total}, newest first, only the key's environment", async () => {
    const res = await get(ws.testKey, "/api/v1/payments");
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(["payments", "total"]);
    expect(body.total).toBe(6);
    expect(body.payments.map((p: Json) => p.id)).toEqual([...ids].reverse());
    for (const p of body.payments) expect(p.environment).toBe("sandbox");
  });

  it("filters by status", async () => {
    const pending = (await get(ws.testKey, "/api/v1/payments?status=pending")).json();
    expect(pending.total).toBe(1);
    expect(pending.payments.map((p: Json) => p.id)).toEqual([pendingId]);

    const forwarded = (await get(ws.testKey, "/api/v1/payments?status=forwarded")).json();
    expect(forwarded.total).toBe(5);
    expect(forwarded.payments.every((p: Json) => p.status === "forwarded")).toBe(true);

    const cancelled = (await get(ws.testKey, "/api/v1/payments?status=cancelled")).json();
    expect(cancelled).toEqual({ payments: [], total: 0 });

    const bad = await get(ws.testKey, "/api/v1/payments?status=bogus");
    expect(bad.statusCode).toBe(400);
  });

  it("treats an environment filter equal to the key's like no filter, and the other one as an empty page", async () => {
    const all = (await get(ws.testKey, "/api/v1/payments")).json();
    const same = await get(ws.testKey, "/api/v1/payments?environment=sandbox");
    expect(same.statusCode).toBe(200);
    expect(same.json()).toEqual(all);

    const other = await get(ws.testKey, "/api/v1/payments?environment=live");
    expect(other.statusCode).toBe(200);
    expect(other.json()).toEqual({ payments: [], total: 0 });

    const liveOwn = (await get(ws.liveKey, "/api/v1/payments")).json();
    expect(liveOwn.total).toBe(1);
    expect(liveOwn.payments[0].environment).toBe("live");
    const liveOther = (await get(ws.liveKey, "/api/v1/payments?environment=sandbox")).json();
    expect(liveOther).toEqual({ payments: [], total: 0 });
  });

  it("pages with limit and offset while total stays the full count", async () => {
    const newestFirst = [...ids].reverse();
    const first = (await get(ws.testKey, "/api/v1/payments?limit=2")).json();
    expect(first.total).toBe(6);
    expect(first.payments.map((p: Json) => p.id)).toEqual(newestFirst.slice(0, 2));

    const second = (await get(ws.testKey, "/api/v1/payments?limit=2&offset=2")).json();
    expect(second.total).toBe(6);
    expect(second.payments.map((p: Json) => p.id)).toEqual(newestFirst.slice(2, 4));

    const last = (await get(ws.testKey, "/api/v1/payments?limit=4&offset=4")).json();
    expect(last.total).toBe(6);
    expect(last.payments.map((p: Json) => p.id)).toEqual(newestFirst.slice(4));

    const beyond = (await get(ws.testKey, "/api/v1/payments?offset=100")).json();
    expect(beyond).toEqual({ payments: [], total: 6 });

    const bounds = await get(ws.testKey, "/api/v1/payments?limit=1");
    expect(bounds.json().payments).toHaveLength(1);
    const max = await get(ws.testKey, "/api/v1/payments?limit=100");
    expect(max.statusCode).toBe(200);
    expect(max.json().payments).toHaveLength(6);
  });

  it.each([
    ["limit=0"],
    ["limit=101"],
    ["limit=abc"],
    ["limit=-1"],
    ["limit=1.5"],
    ["offset=-1"],
    ["offset=abc"],
  ])("answers 400 for %s (never clamped)", async (query) => {
    await expectError(get(ws.testKey, `/api/v1/payments?${query}`), 400);
  });

  it("returns 50 payments by default while total counts all of them", async () => {
    const many = await createWorkspace(t);
    const base = Date.now() - 2 * 60 * 60_000;
    for (let i = 0; i < 55; i++) await insertPayment(many, { createdAt: new Date(base + i * 1000) });
    const res = (await get(many.testKey, "/api/v1/payments")).json();
    expect(res.total).toBe(55);
    expect(res.payments).toHaveLength(50);
    const rest = (await get(many.testKey, "/api/v1/payments?offset=50")).json();
    expect(rest.total).toBe(55);
    expect(rest.payments).toHaveLength(5);
  });

  it("does not list another workspace's payments", async () => {
    const other = await createWorkspace(t);
    expect((await get(other.testKey, "/api/v1/payments")).json()).toEqual({ payments: [], total: 0 });
  });
});

describe("GET /api/v1/payments/{id}", () => {
  it("reads the workspace's own payment", async () => {
    const ws = await createWorkspace(t);
    const created = await createOk(ws.testKey, { tokenSymbol: "USDC", amount: "7" });
    const payment = created.payment as Json;
    const res = await get(ws.testKey, `/api/v1/payments/${payment.id}`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ payment });
  });

  it("answers 404 Payment not found for another workspace's payment", async () => {
    const a = await createWorkspace(t);
    const b = await createWorkspace(t);
    const created = await createOk(a.testKey, { tokenSymbol: "USDC", amount: "7" });
    const res = await get(b.testKey, `/api/v1/payments/${(created.payment as Json).id}`);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: MSG.notFound });
  });

  it("keeps tenants apart when concurrent requests share their key and payment lookups", async () => {
    const workspaces = await Promise.all([createWorkspace(t), createWorkspace(t), createWorkspace(t)]);
    const payments = await Promise.all(
      workspaces.map(
        async (ws) => (await createOk(ws.testKey, { tokenSymbol: "USDC", amount: "3" })).payment as Json,
      ),
    );
    const revoked = await createWorkspace(t);
    const revokedPayment = (await createOk(revoked.testKey, { tokenSymbol: "USDC", amount: "3" }))
      .payment as Json;
    const keyId = (await get(revoked.testKey, "/api/v1/keys")).json().apiKeys[0].id;
    expect(
      (await t.request({ method: "DELETE", url: `/api/v1/keys/${keyId}`, headers: bearer(revoked.testKey) }))
        .statusCode,
    ).toBe(200);

    // Every key reads every payment (own: 200, others': 404), all at once, some ids in upper case.
    const reads = workspaces.flatMap((ws, reader) =>
      payments.map((payment, owner) => ({
        reader,
        owner,
        request: get(
          ws.testKey,
          `/api/v1/payments/${owner === 2 ? String(payment.id).toUpperCase() : payment.id}`,
        ),
      })),
    );
    const revokedRead = get(revoked.testKey, `/api/v1/payments/${revokedPayment.id}`);
    const answers = await Promise.all(reads.map((r) => r.request));
    reads.forEach(({ reader, owner }, i) => {
      const res = answers[i];
      if (reader === owner) {
        expect(res?.statusCode).toBe(200);
        expect(res?.json()).toEqual({ payment: payments[owner] });
      } else {
        expect(res?.statusCode).toBe(404);
        expect(res?.json()).toEqual({ error: MSG.notFound });
      }
    });
    expect((await revokedRead).statusCode).toBe(401);
  });

  it("answers 404 when the same workspace's live key reads a sandbox payment (and the reverse)", async () => {
    const ws = await createWorkspace(t);
    const created = await createOk(ws.testKey, { tokenSymbol: "USDC", amount: "7" });
    const res = await get(ws.liveKey, `/api/v1/payments/${(created.payment as Json).id}`);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: MSG.notFound });

    const liveId = await insertPayment(ws, { environment: "live" });
    const fromSandbox = await get(ws.testKey, `/api/v1/payments/${liveId}`);
    expect(fromSandbox.statusCode).toBe(404);
    expect(fromSandbox.json()).toEqual({ error: MSG.notFound });
    const fromLive = await get(ws.liveKey, `/api/v1/payments/${liveId}`);
    expect(fromLive.statusCode).toBe(200);
    expect(fromLive.json().payment).toMatchObject({ id: liveId, environment: "live", status: "pending" });
  });

  it("answers 404 for a malformed id and for an unknown UUID", async () => {
    const ws = await createWorkspace(t);
    for (const id of ["not-a-uuid", "123", "00000000-0000-0000-0000-00000000000g"]) {
      const res = await get(ws.testKey, `/api/v1/payments/${id}`);
      expect(res.statusCode, id).toBe(404);
      expect(res.json()).toEqual({ error: MSG.notFound });
    }
    const unknown = await get(ws.testKey, "/api/v1/payments/6f1c1e9a-3a4b-4c5d-8e9f-0a1b2c3d4e5f");
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toEqual({ error: MSG.notFound });
  });
});

describe("POST /api/v1/payments/{id}/cancel", () => {
  it("cancels a pending payment, then refuses a second cancel", async () => {
    const ws = await createWorkspace(t);
    const id = await insertPayment(ws);
    const res = await post(ws.testKey, `/api/v1/payments/${id}/cancel`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().payment).toMatchObject({ id, status: "cancelled" });

    const read = await get(ws.testKey, `/api/v1/payments/${id}`);
    expect(read.json().payment.status).toBe("cancelled");

    const again = await post(ws.testKey, `/api/v1/payments/${id}/cancel`);
    expect(again.statusCode).toBe(400);
    expect(again.json().error).toBe(MSG.cannotCancel);
    expect((await get(ws.testKey, `/api/v1/payments/${id}`)).json().payment.status).toBe("cancelled");
  });

  it("refuses to cancel a forwarded payment and leaves it unchanged", async () => {
    const ws = await createWorkspace(t);
    const created = await createOk(ws.testKey, { tokenSymbol: "USDC", amount: "3" });
    const id = (created.payment as Json).id as string;
    const res = await post(ws.testKey, `/api/v1/payments/${id}/cancel`);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe(MSG.cannotCancel);
    expect((await get(ws.testKey, `/api/v1/payments/${id}`)).json().payment.status).toBe("forwarded");
    expect((await outboxRows(ws.id)).map((r) => r.event_type)).toEqual([
      "payment.created",
      "payment.forwarded",
    ]);
  });

  it.each([["confirmed"], ["detected"], ["expired"]])("refuses to cancel a %s payment", async (status) => {
    const ws = await createWorkspace(t);
    const id = await insertPayment(ws, { status });
    const res = await post(ws.testKey, `/api/v1/payments/${id}/cancel`);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe(MSG.cannotCancel);
  });

  it("answers 404 for another workspace's payment and leaves it pending", async () => {
    const a = await createWorkspace(t);
    const b = await createWorkspace(t);
    const id = await insertPayment(a);
    const res = await post(b.testKey, `/api/v1/payments/${id}/cancel`);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: MSG.notFound });
    expect((await get(a.testKey, `/api/v1/payments/${id}`)).json().payment.status).toBe("pending");
  });

  it("lets exactly one of several concurrent cancels win", async () => {
    const ws = await createWorkspace(t);
    const id = await insertPayment(ws);
    const responses = await Promise.all(
      Array.from({ length: 5 }, () => post(ws.testKey, `/api/v1/payments/${id}/cancel`)),
    );
    const codes = responses.map((r) => r.statusCode).sort();
    expect(codes).toEqual([200, 400, 400, 400, 400]);
    for (const r of responses.filter((r) => r.statusCode === 400))
      expect(r.json().error).toBe(MSG.cannotCancel);
    expect((await outboxRows(ws.id)).map((r) => r.event_type)).toEqual(["payment.cancelled"]);
  });

  it("cancels a live pending payment with the live key (no network needed)", async () => {
    const ws = await createWorkspace(t);
    const id = await insertPayment(ws, { environment: "live" });
    const fromSandbox = await post(ws.testKey, `/api/v1/payments/${id}/cancel`);
    expect(fromSandbox.statusCode).toBe(404);
    const res = await post(ws.liveKey, `/api/v1/payments/${id}/cancel`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().payment).toMatchObject({ id, status: "cancelled", environment: "live" });
    const rows = await outboxRows(ws.id, "live");
    expect(rows.map((r) => r.event_type)).toEqual(["payment.cancelled"]);
  });
});

describe("POST /api/v1/verify", () => {
  it("verifies a forwarded payment", async () => {
    const ws = await createWorkspace(t);
    const created = await createOk(ws.testKey, { tokenSymbol: "USDC", amount: "9" });
    const res = await post(ws.testKey, "/api/v1/verify", { paymentId: (created.payment as Json).id });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ verified: true, payment: created.payment });
  });

  it.each([["pending"], ["detected"], ["confirmed"], ["cancelled"]])(
    "does not verify a %s payment",
    async (status) => {
      const ws = await createWorkspace(t);
      const id = await insertPayment(ws, { status });
      const res = await post(ws.testKey, "/api/v1/verify", { paymentId: id });
      expect(res.statusCode).toBe(200);
      expect(res.json().verified).toBe(false);
      expect(res.json().payment).toMatchObject({ id, status });
    },
  );

  it("answers 400 when paymentId is missing", async () => {
    const ws = await createWorkspace(t);
    await expectError(post(ws.testKey, "/api/v1/verify", {}), 400);
  });

  it("answers 404 for another workspace's payment, another environment and a malformed id", async () => {
    const a = await createWorkspace(t);
    const b = await createWorkspace(t);
    const created = await createOk(a.testKey, { tokenSymbol: "USDC", amount: "9" });
    const id = (created.payment as Json).id;
    const other = await post(b.testKey, "/api/v1/verify", { paymentId: id });
    expect(other.statusCode).toBe(404);
    expect(other.json()).toEqual({ error: MSG.notFound });
    const live = await post(a.liveKey, "/api/v1/verify", { paymentId: id });
    expect(live.statusCode).toBe(404);
    const malformed = await post(a.testKey, "/api/v1/verify", { paymentId: "nope" });
    expect(malformed.statusCode).toBe(404);
  });
});

describe("live key without a network", () => {
  it("answers 503 Live network is not configured for a crypto create and writes nothing", async () => {
    const ws = await createWorkspace(t);
    const res = await createPayment(ws.liveKey, {
      tokenSymbol: "USDC",
      amount: "100",
      merchantWallet: MERCHANT,
    });
    expect(res.statusCode).toBe(503);
    expect(res.headers["content-type"]).toMatch(/^application\/json/);
    expect(res.json()).toEqual({ error: MSG.liveNotConfigured });

    const withKey = await createPayment(
      ws.liveKey,
      { tokenSymbol: "ETH", amount: "1" },
      { "idempotency-key": "live-attempt-1" },
    );
    expect(withKey.statusCode).toBe(503);
    expect(withKey.json()).toEqual({ error: MSG.liveNotConfigured });

    expect(await paymentRows(ws.id, "live")).toHaveLength(0);
    expect(await outboxRows(ws.id, "live")).toHaveLength(0);
    expect(await paymentRows(ws.id)).toHaveLength(0);
    expect(await outboxRows(ws.id)).toHaveLength(0);
    const keys = await t.database.db
      .selectFrom("idempotency_keys")
      .selectAll()
      .where("workspace_id", "=", ws.id)
      .execute();
    expect(keys).toHaveLength(0);

    const list = (await get(ws.liveKey, "/api/v1/payments")).json();
    expect(list).toEqual({ payments: [], total: 0 });
  });
});
