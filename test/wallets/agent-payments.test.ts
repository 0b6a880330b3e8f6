import { encodePaymentRequiredHeader } from "@x402/core/http";
import type { PaymentRequired } from "@x402/core/types";
import { beforeAll, describe, expect, it } from "vitest";
import {
  agentWallet,
  eventsOf,
  expectSignedFor,
  OTHER_PAYEE,
  onSandboxB,
  PAYEE,
  pay,
  paymentRequired,
  payUsdc,
  putPolicy,
  RESOURCE,
  requirement,
  storedAuthorizations,
  usdcUnits,
} from "../support/agent-payments.ts";
import {
  call,
  createWallet,
  expectError,
  ISO,
  type Json,
  MISSING_UUID,
  t,
  useAgentsApp,
} from "../support/agents-and-wallets.ts";
import { type CreatedWorkspace, createWorkspace } from "../support/app.ts";

// Agent wallets paying over x402 (issue 40, D23): the spending policy, pay (signed EIP-3009
// authorizations checked against the wallet's key), the approval queue, tenancy and bad input.
// Caps under concurrency: agent-payments-caps.test.ts; helpers: support/agent-payments.ts.

useAgentsApp();

let ws: CreatedWorkspace;
beforeAll(async () => {
  ws = await createWorkspace(t);
});

describe("the spending policy", () => {
  it("is empty (no limits) until set; PUT replaces it whole and answers it as GET does", async () => {
    const wallet = await agentWallet(ws);
    const url = `/api/wallets/${wallet.walletId}/policy`;
    const empty = await call(ws.testKey, "GET", url);
    expect(empty.status, empty.body).toBe(200);
    expect(empty.json).toEqual({ success: true, data: {} });

    const policy = {
      maxPerPayment: { USDC: "5" },
      daily: { USDC: "20.5", DAI: "1" },
      monthly: { USDC: "100.000001" },
      allowedPayees: [PAYEE.toUpperCase().replace("0X", "0x")],
      allowedOrigins: ["https://API.example.com/"],
      approvalAbove: { USDC: "2.00" },
    };
    const put = await putPolicy(ws.testKey, wallet.walletId, policy);
    expect(put.status, put.body).toBe(200);
    const shown = {
      maxPerPayment: { USDC: "5.00" },
      daily: { USDC: "20.50", DAI: "1.00" },
      monthly: { USDC: "100.000001" },
      allowedPayees: [PAYEE],
      allowedOrigins: ["https://api.example.com"],
      approvalAbove: { USDC: "2.00" },
    };
    expect(put.json).toEqual({ success: true, data: shown });
    expect((await call(ws.testKey, "GET", url)).json.data).toEqual(shown);

    const replaced = await putPolicy(ws.testKey, wallet.walletId, { daily: { USDC: "1" }, monthly: null });
    expect(replaced.json.data).toEqual({ daily: { USDC: "1.00" } });
    expect((await call(ws.testKey, "GET", url)).json.data).toEqual({ daily: { USDC: "1.00" } });
  });

  it("belongs to agent wallets only: a user wallet answers 400 saying so", async () => {
    const wallet = await createWallet(ws.testKey, { ownerId: "user-1", type: "user", currencies: ["USDC"] });
    const get = await call(ws.testKey, "GET", `/api/wallets/${wallet.walletId}/policy`);
    expectError(get, 400, /user wallet.*agent wallets only/);
    expectError(await putPolicy(ws.testKey, wallet.walletId, {}), 400, /agent wallets only/);
    expectError(await payUsdc(ws.testKey, wallet.walletId, "1"), 400, /agent wallets only/);
    const authorizations = `/api/wallets/${wallet.walletId}/x402/authorizations`;
    expectError(await call(ws.testKey, "GET", authorizations), 400, /agent wallets only/);
    expectError(
      await call(ws.testKey, "GET", `${authorizations}/${MISSING_UUID}`),
      400,
      /agent wallets only/,
    );
    expectError(
      await call(ws.testKey, "POST", `${authorizations}/${MISSING_UUID}/approve`),
      400,
      /agent wallets only/,
    );
  });

  it.each([
    [{ daily: "5" }, /^daily must be an object/],
    [{ daily: { EUR: "5" } }, /^daily names an unknown currency EUR/],
    [{ maxPerPayment: { USDC: "1.0000001" } }, /^maxPerPayment\.USDC must be a decimal string/],
    [{ monthly: { USDC: 5 } }, /^monthly\.USDC/],
    [{ allowedPayees: ["nope"] }, /^allowedPayees must list addresses/],
    [{ allowedOrigins: ["https://a.example/path"] }, /^allowedOrigins must list origins/],
    [{ approvalAbove: { USDC: "-1" } }, /^approvalAbove\.USDC/],
    [{ spendingLimit: 1 }, /^Unknown field in policy: spendingLimit/],
    [[], /JSON object/],
  ])("refuses %j with 400 naming the field, and keeps the policy", async (body, message) => {
    const wallet = await agentWallet(ws);
    await putPolicy(ws.testKey, wallet.walletId, { daily: { USDC: "3" } });
    expectError(await putPolicy(ws.testKey, wallet.walletId, body), 400, message);
    const kept = await call(ws.testKey, "GET", `/api/wallets/${wallet.walletId}/policy`);
    expect(kept.json.data).toEqual({ daily: { USDC: "3.00" } });
  });

  it("answers 404 for a wallet that does not exist or is malformed", async () => {
    expectError(await call(ws.testKey, "GET", `/api/wallets/${MISSING_UUID}/policy`), 404);
    expectError(await putPolicy(ws.testKey, "not-a-uuid", {}), 404);
  });
});

describe("pay", () => {
  it("signs an EIP-3009 authorization with the wallet's key: 200 {status, paymentSignature, authorizationId, expiresAt}", async () => {
    const wallet = await agentWallet(ws);
    const before = Date.now();
    const res = await payUsdc(ws.testKey, wallet.walletId, "1.50");
    expect(res.status, res.body).toBe(200);
    expect(res.json.success).toBe(true);
    const data = res.json.data;
    expect(Object.keys(data).sort()).toEqual(["authorizationId", "expiresAt", "paymentSignature", "status"]);
    expect(data.status).toBe("authorized");
    const { payload, authorization } = await expectSignedFor(
      data.paymentSignature,
      wallet.address,
      requirement({ amount: "1500000" }),
    );
    expect(payload.resource?.url).toBe(RESOURCE);
    // Valid from now until the requirement's maxTimeoutSeconds (60) from now.
    const validBefore = Number(authorization.validBefore) * 1000;
    expect(validBefore).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 + 60_000);
    expect(validBefore).toBeLessThanOrEqual(Date.now() + 61_000);
    expect(data.expiresAt).toBe(new Date(validBefore).toISOString());

    const read = await call(
      ws.testKey,
      "GET",
      `/api/wallets/${wallet.walletId}/x402/authorizations/${data.authorizationId}`,
    );
    expect(read.status, read.body).toBe(200);
    expect(read.json.data).toEqual({
      authorizationId: data.authorizationId,
      walletId: wallet.walletId,
      status: "authorized",
      network: "sandbox-a",
      caip2: "eip155:73570001",
      currency: "USDC",
      asset: requirement().asset,
      amount: "1.50",
      payTo: PAYEE,
      resource: RESOURCE,
      origin: "https://api.example.com",
      nonce: authorization.nonce,
      validAfter: new Date(0).toISOString(),
      validBefore: data.expiresAt,
      createdAt: expect.stringMatching(ISO),
      decidedAt: expect.stringMatching(ISO),
      txHash: null,
    });
    expect(await eventsOf(data.authorizationId)).toEqual([
      { type: "agent.payment.authorized", data: read.json.data },
    ]);
  });

  it("takes the first requirement it can pay, and the PAYMENT-REQUIRED header value as well as the object", async () => {
    const wallet = await agentWallet(ws);
    const chosen = onSandboxB({ amount: "250000", payTo: OTHER_PAYEE, maxTimeoutSeconds: 300 });
    const required = paymentRequired(
      requirement({ scheme: "upto" }),
      requirement({ network: "eip155:8453" }),
      requirement({ asset: "0xe33f954364B743E50C658761694ee7Eb58247693" }), // DAI: not held
      chosen,
      requirement(),
    );
    const header = encodePaymentRequiredHeader(required as PaymentRequired);
    const res = await pay(ws.testKey, wallet.walletId, { paymentRequired: header, resource: RESOURCE });
    expect(res.status, res.body).toBe(200);
    const { authorization } = await expectSignedFor(res.json.data.paymentSignature, wallet.address, chosen);
    expect(Number(authorization.validBefore) * 1000).toBeGreaterThan(Date.now() + 290_000);
    const [listed] = (await call(ws.testKey, "GET", `/api/wallets/${wallet.walletId}/x402/authorizations`))
      .json.data.items;
    expect(listed).toMatchObject({ network: "sandbox-b", amount: "0.25", payTo: OTHER_PAYEE });
  });

  it("refuses with 400 and each requirement's reason when none fits; nothing is reserved", async () => {
    const wallet = await agentWallet(ws);
    const res = await pay(ws.testKey, wallet.walletId, {
      paymentRequired: paymentRequired(requirement({ network: "eip155:1" }), requirement({ extra: {} })),
      resource: RESOURCE,
    });
    expectError(res, 400, /^paymentRequired\.accepts has no requirement this wallet can pay/);
    expect(res.json.rejected).toEqual([
      { index: 0, reason: "network eip155:1 is not a network of this environment" },
      { index: 1, reason: "extra.name and extra.version (the token's EIP-712 domain) are required" },
    ]);
    expect(await storedAuthorizations(wallet.walletId)).toEqual({ count: 0, sum: 0n });
  });

  it("answers 503 in live without a configured network: nothing is signed for a chain it does not know", async () => {
    const agent = await call(ws.liveKey, "POST", "/api/agents/create", { name: "Live agent" });
    const wallet = await createWallet(ws.liveKey, {
      ownerId: agent.json.data.agentId,
      type: "agent",
      currencies: ["USDC"],
    });
    expectError(await payUsdc(ws.liveKey, wallet.walletId, "1"), 503, /^Live network is not configured$/);
  });

  it.each([
    ["resource", { paymentRequired: paymentRequired() }, /^resource must be an http\(s\) URL/],
    ["resource", { paymentRequired: paymentRequired(), resource: "ftp://x.example/a" }, /^resource must/],
    ["paymentRequired", { resource: RESOURCE }, /^paymentRequired must be an x402 PaymentRequired object/],
    ["paymentRequired", { paymentRequired: "%%%", resource: RESOURCE }, /^paymentRequired is neither/],
    [
      "paymentRequired",
      {
        paymentRequired: Buffer.from('{"x402Version":2,"resource":{"url":"\\u0000"}}').toString("base64"),
        resource: RESOURCE,
      },
      /^paymentRequired\.resource\.url must not contain NUL/,
    ],
    [
      "x402Version",
      { paymentRequired: { ...paymentRequired(), x402Version: 1 }, resource: RESOURCE },
      /^paymentRequired\.x402Version must be 2/,
    ],
    [
      "amount",
      { paymentRequired: paymentRequired(requirement({ amount: 5 })), resource: RESOURCE },
      /^paymentRequired\.accepts\[0\]\.amount is invalid/,
    ],
    [
      "maxTimeoutSeconds",
      { paymentRequired: paymentRequired(requirement({ maxTimeoutSeconds: 1e20 })), resource: RESOURCE },
      /^paymentRequired\.accepts has no requirement/,
    ],
    ["body", [], /JSON object/],
  ])("refuses bad %s with 400 naming it, never 500", async (_, body, message) => {
    const wallet = await agentWallet(ws);
    expectError(await pay(ws.testKey, wallet.walletId, body), 400, message);
    expect(await storedAuthorizations(wallet.walletId)).toEqual({ count: 0, sum: 0n });
  });
});

describe("each policy rule refuses with 403 naming it, and reserves nothing", () => {
  it.each([
    ["maxPerPayment", { maxPerPayment: { USDC: "1.49" } }, {}, RESOURCE],
    ["allowedPayees", { allowedPayees: [OTHER_PAYEE] }, {}, RESOURCE],
    ["allowedPayees", { allowedPayees: [] }, {}, RESOURCE],
    ["allowedOrigins", { allowedOrigins: ["https://api.example.com"] }, {}, "https://evil.example/x"],
    ["daily", { daily: { USDC: "1.49" } }, {}, RESOURCE],
    ["monthly", { monthly: { USDC: "1" } }, {}, RESOURCE],
  ])("%s", async (rule, policy, fields, resource) => {
    const wallet = await agentWallet(ws);
    expect((await putPolicy(ws.testKey, wallet.walletId, policy)).status).toBe(200);
    const res = await payUsdc(ws.testKey, wallet.walletId, "1.50", fields, resource);
    expect(res.status, res.body).toBe(403);
    expect(res.json).toEqual({ success: false, error: expect.any(String), policy: rule });
    expect(await storedAuthorizations(wallet.walletId)).toEqual({ count: 0, sum: 0n });
  });

  it("within every rule the payment is signed", async () => {
    const wallet = await agentWallet(ws);
    await putPolicy(ws.testKey, wallet.walletId, {
      maxPerPayment: { USDC: "1.50" },
      allowedPayees: [PAYEE],
      allowedOrigins: ["https://api.example.com"],
      daily: { USDC: "1.50" },
      monthly: { USDC: "1.50" },
      approvalAbove: { USDC: "1.50" },
    });
    const res = await payUsdc(ws.testKey, wallet.walletId, "1.50");
    expect(res.status, res.body).toBe(200);
  });

  it("caps count every payment of the UTC day and month it was requested in, per currency", async () => {
    const wallet = await agentWallet(ws);
    await putPolicy(ws.testKey, wallet.walletId, { daily: { USDC: "2" }, monthly: { USDC: "3" } });
    try {
      t.setNow(new Date("2031-05-30T23:59:00Z"));
      expect((await payUsdc(ws.testKey, wallet.walletId, "1.50")).status).toBe(200);
      expect((await payUsdc(ws.testKey, wallet.walletId, "0.51")).json.policy).toBe("daily");
      t.setNow(new Date("2031-05-31T00:00:00Z"));
      expect((await payUsdc(ws.testKey, wallet.walletId, "1.50")).status).toBe(200);
      expect((await payUsdc(ws.testKey, wallet.walletId, "0.01")).json.policy).toBe("monthly");
      t.setNow(new Date("2031-06-01T00:00:00Z"));
      expect((await payUsdc(ws.testKey, wallet.walletId, "2")).status).toBe(200);
    } finally {
      t.setNow(undefined);
    }
  });
});

describe("the approval queue", () => {
  async function waiting(amount = "5"): Promise<{ wallet: Json; authorizationId: string }> {
    const wallet = await agentWallet(ws);
    await putPolicy(ws.testKey, wallet.walletId, { approvalAbove: { USDC: "2" }, daily: { USDC: "12" } });
    const res = await payUsdc(ws.testKey, wallet.walletId, amount);
    expect(res.status, res.body).toBe(202);
    expect(res.json).toEqual({
      success: true,
      data: { status: "approval_required", authorizationId: expect.any(String) },
    });
    return { wallet, authorizationId: res.json.data.authorizationId };
  }
  const decide = (wallet: Json, id: string, action: "approve" | "deny", key = ws.testKey) =>
    call(key, "POST", `/api/wallets/${wallet.walletId}/x402/authorizations/${id}/${action}`);

  it("holds a payment above approvalAbove, lists it, and signs it on approval (once)", async () => {
    const { wallet, authorizationId } = await waiting();
    const listed = await call(
      ws.testKey,
      "GET",
      `/api/wallets/${wallet.walletId}/x402/authorizations?status=approval_required`,
    );
    expect(listed.status, listed.body).toBe(200);
    expect(listed.json.data.pagination).toEqual({ total: 1, page: 1, limit: 20, totalPages: 1 });
    expect(listed.json.data.items[0]).toMatchObject({
      authorizationId,
      status: "approval_required",
      amount: "5.00",
      nonce: null,
      validBefore: null,
      decidedAt: null,
    });

    const approved = await decide(wallet, authorizationId, "approve");
    expect(approved.status, approved.body).toBe(200);
    expect(approved.json.data).toEqual({
      status: "authorized",
      paymentSignature: expect.any(String),
      authorizationId,
      expiresAt: expect.stringMatching(ISO),
    });
    await expectSignedFor(
      approved.json.data.paymentSignature,
      wallet.address,
      requirement({ amount: "5000000" }),
    );

    const again = await decide(wallet, authorizationId, "approve");
    expectError(again, 409, /^Authorization is authorized: only one awaiting approval can be approved/);
    expect(again.json.currentStatus).toBe("authorized");
    expectError(await decide(wallet, authorizationId, "deny"), 409, /can be denied/);
    const events = await eventsOf(authorizationId);
    expect(events.map((e) => [e.type, e.data.status])).toEqual([
      ["agent.payment.approval_required", "approval_required"],
      ["agent.payment.authorized", "authorized"],
    ]);
    const list = await call(
      ws.testKey,
      "GET",
      `/api/wallets/${wallet.walletId}/x402/authorizations?status=authorized`,
    );
    expect(list.json.data.items.map((i: Json) => i.authorizationId)).toEqual([authorizationId]);
  });

  it("reserves a waiting payment against the caps; denying it releases the reservation", async () => {
    const { wallet, authorizationId } = await waiting("6");
    const second = await payUsdc(ws.testKey, wallet.walletId, "6");
    expect(second.status).toBe(202);
    expect((await payUsdc(ws.testKey, wallet.walletId, "0.01")).json.policy).toBe("daily");

    const denied = await decide(wallet, authorizationId, "deny");
    expect(denied.status, denied.body).toBe(200);
    expect(denied.json.data).toMatchObject({
      authorizationId,
      status: "denied",
      decidedAt: expect.stringMatching(ISO),
    });
    expect((await payUsdc(ws.testKey, wallet.walletId, "2")).status).toBe(200);

    expectError(await decide(wallet, authorizationId, "deny"), 409, /^Authorization is denied/);
    expectError(await decide(wallet, authorizationId, "approve"), 409, /^Authorization is denied/);
    expect((await eventsOf(authorizationId)).map((e) => e.type)).toEqual(["agent.payment.approval_required"]);
  });

  it("refuses a status filter it does not know, and ids of nothing", async () => {
    const { wallet } = await waiting();
    const url = `/api/wallets/${wallet.walletId}/x402/authorizations`;
    expectError(await call(ws.testKey, "GET", `${url}?status=pending`), 400, /^status must be one of/);
    expectError(await call(ws.testKey, "GET", `${url}?limit=0`), 400, /limit/);
    expectError(await decide(wallet, MISSING_UUID, "approve"), 404, /Authorization not found/);
    expectError(await decide(wallet, "nope", "deny"), 404, /Authorization not found/);
    expectError(await call(ws.testKey, "GET", `${url}/nope`), 404);
  });
});

describe("tenancy", () => {
  it("another workspace, or the live key, sees none of a wallet's policy and authorizations (404)", async () => {
    const wallet = await agentWallet(ws);
    await putPolicy(ws.testKey, wallet.walletId, { approvalAbove: { USDC: "1" } });
    const held = await payUsdc(ws.testKey, wallet.walletId, "3");
    expect(held.status).toBe(202);
    const id = held.json.data.authorizationId;
    const intruder = await createWorkspace(t);
    const base = `/api/wallets/${wallet.walletId}`;
    for (const key of [intruder.testKey, ws.liveKey]) {
      expectError(await call(key, "GET", `${base}/policy`), 404);
      expectError(await putPolicy(key, wallet.walletId, {}), 404);
      expectError(await payUsdc(key, wallet.walletId, "1"), 404);
      expectError(await call(key, "GET", `${base}/x402/authorizations`), 404);
      expectError(await call(key, "GET", `${base}/x402/authorizations/${id}`), 404);
      expectError(await call(key, "POST", `${base}/x402/authorizations/${id}/approve`), 404);
      expectError(await call(key, "POST", `${base}/x402/authorizations/${id}/deny`), 404);
    }
    // An authorization is found only under its own wallet, even within the workspace.
    const otherWallet = await agentWallet(ws);
    expectError(
      await call(
        ws.testKey,
        "POST",
        `/api/wallets/${otherWallet.walletId}/x402/authorizations/${id}/approve`,
      ),
      404,
    );
    // Nothing changed for the owner.
    const own = await call(ws.testKey, "GET", `${base}/x402/authorizations/${id}`);
    expect(own.json.data.status).toBe("approval_required");
    expect((await call(ws.testKey, "GET", `${base}/policy`)).json.data).toEqual({
      approvalAbove: { USDC: "1.00" },
    });
    const mine = await agentWallet(intruder);
    const theirs = await call(intruder.testKey, "GET", `/api/wallets/${mine.walletId}/x402/authorizations`);
    expect(theirs.json.data.items).toEqual([]);
  });
});

describe("amounts", () => {
  it("reads smallest units exactly (no floats): a 1-unit payment and an 18-decimal token", async () => {
    const wallet = await agentWallet(ws, ["USDC", "DAI"]);
    const res = await pay(ws.testKey, wallet.walletId, {
      paymentRequired: paymentRequired(
        requirement({ asset: "0xe33f954364B743E50C658761694ee7Eb58247693", amount: "123456789012345678901" }),
      ),
      resource: RESOURCE,
    });
    expect(res.status, res.body).toBe(200);
    const read = await call(
      ws.testKey,
      "GET",
      `/api/wallets/${wallet.walletId}/x402/authorizations/${res.json.data.authorizationId}`,
    );
    expect(read.json.data).toMatchObject({ currency: "DAI", amount: "123.456789012345678901" });
    expect((await payUsdc(ws.testKey, wallet.walletId, "0.000001")).status).toBe(200);
    expect(usdcUnits("0.000001")).toBe("1");
  });
});
