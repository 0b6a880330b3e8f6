import { beforeAll, describe, expect, it } from "vitest";
import { bearer, type CreatedWorkspace, createWorkspace } from "../support/app.ts";
import {
  createOk,
  createPayment,
  expectError,
  get,
  insertPayment,
  type Json,
  MERCHANT,
  MSG,
  outboxRows,
  paymentRows,
  post,
  SETTLEMENT,
  SMART_WALLET,
  t,
  UUID,
  usePaymentsApp,
} from "../support/payments.ts";

// Creating payments: sandbox crypto and card, their outbox events, validation messages. Reading,
// listing, cancelling and verifying them: read-cancel-verify.test.ts; shared helpers: support/payments.ts.

usePaymentsApp();

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

  it("refuses crypto tokens on the card payment method and USD on the crypto payment method", async () => {
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
