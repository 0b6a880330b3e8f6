import type { PaymentRequirements } from "@x402/core/types";
import { decodePaymentResponseHeader } from "@x402/fetch";
import { type Hex, keccak256, toHex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from "../../src/chain/eip3009.ts";
import { SANDBOX_A, SANDBOX_B } from "../../src/chain/simulated/networks.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { paidResource, payingFetch, type Resource, signedPayment } from "../support/x402.ts";

// The x402 facilitator in the sandbox (D23): the stock Express middleware pointed at our
// /api/v1/x402 with a sandbox key, and the stock fetch wrapper paying with a payer's key; the
// payer's USDC is on the simulated ledger, and each settlement is a payment of the lifecycle.

const USDC = 1_000_000n;
const NETWORK_A = `eip155:${SANDBOX_A.chainId}` as const;

let t: TestApp;
let serviceUrl: string;
let ws: CreatedWorkspace;
let resource: Resource;
const payerKey = generatePrivateKey();
const payer = privateKeyToAccount(payerKey).address;

async function ledgerBalance(address: string, network = SANDBOX_A.id): Promise<bigint> {
  return t.app.services.ledger.balance(network, address, "USDC");
}

function requirements(overrides: Partial<PaymentRequirements> = {}): PaymentRequirements {
  return {
    scheme: "exact",
    network: NETWORK_A,
    asset: SANDBOX_A.tokens.USDC as string,
    amount: "250000",
    payTo: ws.eoaAddress,
    maxTimeoutSeconds: 120,
    extra: { name: "USDC", version: "2" },
    ...overrides,
  };
}

async function call(path: "verify" | "settle", body: unknown, key = ws.testKey) {
  return t.request({
    method: "POST",
    url: `/api/v1/x402/${path}`,
    headers: bearer(key),
    payload: body as object,
  });
}

beforeAll(async () => {
  t = await startTestApp();
  serviceUrl = await t.app.http.listen({ port: 0, host: "127.0.0.1" });
  ws = await createWorkspace(t);
  await t.app.services.ledger.credit({
    network: SANDBOX_A.id,
    address: payer,
    token: "USDC",
    amount: 100n * USDC,
    reference: `test-payer:${payer}`,
  });
  resource = await paidResource(serviceUrl, ws.testKey, {
    network: NETWORK_A,
    asset: SANDBOX_A.tokens.USDC as string,
    amount: "10000",
    payTo: ws.eoaAddress,
  });
}, 60_000);

afterAll(async () => {
  await resource?.close();
  await t?.close();
});

describe("x402 facilitator, sandbox", () => {
  it("lists the sandbox's networks, exact and upto, the payment-identifier extension and the workspace's signer", async () => {
    const res = await t.request({
      method: "GET",
      url: "/api/v1/x402/supported",
      headers: bearer(ws.testKey),
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    const signer = body.signers["eip155:*"][0];
    const networkB = `eip155:${SANDBOX_B.chainId}`;
    expect(body.kinds).toEqual([
      { x402Version: 2, scheme: "exact", network: NETWORK_A },
      { x402Version: 2, scheme: "upto", network: NETWORK_A, extra: { facilitatorAddress: signer } },
      { x402Version: 2, scheme: "exact", network: networkB },
      { x402Version: 2, scheme: "upto", network: networkB, extra: { facilitatorAddress: signer } },
    ]);
    expect(body.extensions).toEqual(["payment-identifier"]);
    expect(body.signers["eip155:*"]).toHaveLength(1);
  });

  it("serves a paid request through the stock middleware and records it as a payment", async () => {
    const before = { payer: await ledgerBalance(payer), wallet: await ledgerBalance(ws.eoaAddress) };
    const res = await payingFetch(payerKey, { network: NETWORK_A, asset: SANDBOX_A.tokens.USDC as string })(
      resource.url,
    );
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ weather: "sunny" });
    const settled = decodePaymentResponseHeader(res.headers.get("payment-response") ?? "");
    expect(settled).toMatchObject({ success: true, payer, network: NETWORK_A });

    expect(await ledgerBalance(payer)).toBe(before.payer - 10_000n);
    expect(await ledgerBalance(ws.eoaAddress)).toBe(before.wallet + 10_000n);
    const list = await t.request({
      method: "GET",
      url: "/api/v1/payments?limit=5",
      headers: bearer(ws.testKey),
    });
    const payment = list.json().payments.find((p: { x402?: unknown }) => p.x402);
    expect(payment).toMatchObject({
      status: "forwarded",
      paymentMethod: "crypto",
      paymentProvider: "onchain",
      network: SANDBOX_A.id,
      tokenSymbol: "USDC",
      grossAmount: "0.01",
      x402: { payer, resource: resource.url, scheme: "exact" },
    });
    const verified = await t.request({
      method: "POST",
      url: "/api/v1/verify",
      headers: bearer(ws.testKey),
      payload: { paymentId: payment.id },
    });
    expect(verified.json().verified).toBe(true);
  });

  it("verifies, settles once, and refuses the replayed authorization before moving anything", async () => {
    const accepted = requirements();
    const paymentPayload = await signedPayment(payerKey, accepted);
    const body = { x402Version: 2, paymentPayload, paymentRequirements: accepted };
    expect((await call("verify", body)).json()).toEqual({ isValid: true, payer });

    const before = await ledgerBalance(payer);
    const settled = (await call("settle", body)).json();
    expect(settled).toMatchObject({ success: true, payer, network: NETWORK_A });
    expect(settled.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await ledgerBalance(payer)).toBe(before - 250_000n);
    // The settle's record names the payment it made (for an operator following one to the other).
    const record = await t.database.db
      .selectFrom("x402_settlements")
      .select(["status", "payment_id"])
      .where("nonce", "=", (paymentPayload.payload.authorization as { nonce: string }).nonce.toLowerCase())
      .executeTakeFirstOrThrow();
    expect(record).toEqual({ status: "settled", payment_id: settled.extra.paymentId });

    // The same payload again: its earlier answer, nothing moved twice.
    expect((await call("settle", body)).json()).toEqual(settled);
    expect(await ledgerBalance(payer)).toBe(before - 250_000n);
    // Verify sees the used nonce, as the chain's token would.
    expect((await call("verify", body)).json()).toMatchObject({
      isValid: false,
      invalidReason: "invalid_exact_evm_nonce_already_used",
    });
  });

  it("answers the same payment-identifier with the same result, and another payload under it with 409", async () => {
    const accepted = requirements({ amount: "1000" });
    const signed = await signedPayment(payerKey, accepted);
    const id = `pay_${keccak256(toHex(generatePrivateKey())).slice(2, 34)}`;
    const withId = (p: typeof signed) => ({ ...p, extensions: { "payment-identifier": { info: { id } } } });
    const body = { x402Version: 2, paymentPayload: withId(signed), paymentRequirements: accepted };
    const first = (await call("settle", body)).json();
    expect(first).toMatchObject({ success: true });
    expect((await call("settle", body)).json()).toEqual(first);

    const other = await signedPayment(payerKey, accepted);
    const conflict = await call("settle", {
      x402Version: 2,
      paymentPayload: withId(other),
      paymentRequirements: accepted,
    });
    expect(conflict.statusCode).toBe(409);
    expect(conflict.json().error).toMatch(/payment-identifier/);
  });

  it.each<[string, Partial<PaymentRequirements>, string]>([
    ["another network", { network: "eip155:1" }, "invalid_network"],
    [
      "a payee that is not the workspace's",
      { payTo: "0x2222222222222222222222222222222222222222" },
      "invalid_payment_requirements",
    ],
    [
      "an asset that is not the network's USDC",
      { asset: SANDBOX_A.tokens.DAI as string },
      "invalid_payment_requirements",
    ],
  ])("refuses %s", async (_, overrides, reason) => {
    const accepted = requirements(overrides);
    const body = {
      x402Version: 2,
      paymentPayload: await signedPayment(payerKey, accepted),
      paymentRequirements: accepted,
    };
    expect((await call("verify", body)).json()).toMatchObject({ isValid: false, invalidReason: reason });
    expect((await call("settle", body)).json()).toMatchObject({
      success: false,
      errorReason: reason,
      transaction: "",
    });
  });

  it("refuses a wrong amount, an expired and a future authorization with the scheme's reasons", async () => {
    const accepted = requirements();
    const signed = await signedPayment(payerKey, accepted);
    const auth = signed.payload.authorization as Record<string, string>;
    const cases: Array<[Record<string, string>, PaymentRequirements, string]> = [
      [auth, requirements({ amount: "250001" }), "invalid_exact_evm_payload_authorization_value_mismatch"],
      [{ ...auth, validBefore: "1000" }, accepted, "invalid_exact_evm_signature"],
    ];
    for (const [authorization, req, reason] of cases) {
      const paymentPayload = { ...signed, accepted: req, payload: { ...signed.payload, authorization } };
      const verified = (
        await call("verify", { x402Version: 2, paymentPayload, paymentRequirements: req })
      ).json();
      expect(verified).toMatchObject({ isValid: false, invalidReason: reason });
    }
    // Signed with a window that is over, or not open yet.
    const now = Math.floor(Date.now() / 1000);
    for (const [window, reason] of [
      [
        { validAfter: now - 600, validBefore: now - 300 },
        "invalid_exact_evm_payload_authorization_valid_before",
      ],
      [
        { validAfter: now + 600, validBefore: now + 900 },
        "invalid_exact_evm_payload_authorization_valid_after",
      ],
    ] as const) {
      const paymentPayload = await signedWindow(payerKey, accepted, window);
      const verified = (
        await call("verify", { x402Version: 2, paymentPayload, paymentRequirements: accepted })
      ).json();
      expect(verified).toMatchObject({
        isValid: false,
        invalidReason: expect.stringMatching(reasonPattern(reason)),
      });
    }
  });

  it("is paid at a smart wallet made after its first verify: a payee not seen before is looked up again", async () => {
    const fresh = await createWorkspace(t, { name: "smart wallet later" });
    const verifyTo = async (payTo: string) => {
      const accepted = requirements({ payTo });
      const paymentPayload = await signedPayment(payerKey, accepted);
      const res = await call(
        "verify",
        { x402Version: 2, paymentPayload, paymentRequirements: accepted },
        fresh.testKey,
      );
      return res.json() as { isValid: boolean; invalidReason?: string };
    };
    const later = privateKeyToAccount(generatePrivateKey()).address;
    expect((await verifyTo(fresh.eoaAddress)).isValid).toBe(true);
    expect(await verifyTo(later)).toMatchObject({ isValid: false });
    expect(await t.app.services.workspaces.addSmartWallet(fresh.id, later)).toBe(true);
    expect(await verifyTo(later)).toMatchObject({ isValid: true });
    expect((await verifyTo(fresh.eoaAddress)).isValid).toBe(true);
  });

  it("answers a body that is not an x402 request with a 400 naming the problem", async () => {
    for (const body of [
      {},
      { paymentPayload: {}, paymentRequirements: {} },
      [1],
      { paymentPayload: [], x402Version: 2 },
    ]) {
      const res = await call("settle", body);
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatch(/payment|body/i);
    }
  });

  it("never shows one workspace's settlement to another, nor lets it settle to the first one's wallet", async () => {
    const other = await createWorkspace(t);
    const accepted = requirements({ amount: "2000" });
    const body = {
      x402Version: 2,
      paymentPayload: await signedPayment(payerKey, accepted),
      paymentRequirements: accepted,
    };
    expect((await call("settle", body, other.testKey)).json()).toMatchObject({
      success: false,
      errorReason: "invalid_payment_requirements",
    });
    const settled = (await call("settle", body)).json();
    expect(settled.success).toBe(true);
    const res = await t.request({
      method: "GET",
      url: `/api/v1/payments/${settled.extra.paymentId}`,
      headers: bearer(other.testKey),
    });
    expect(res.statusCode).toBe(404);
  });
});

/** x402 names a window's failures `..._valid_before` / `..._valid_after` (or the EIP-3009 spelling). */
function reasonPattern(reason: string): RegExp {
  return new RegExp(reason.endsWith("before") ? "valid_before|expired" : "valid_after|future");
}

/** A payment payload whose authorization is valid only within `window` (unix seconds). */
async function signedWindow(
  key: Hex,
  accepted: PaymentRequirements,
  window: { validAfter: number; validBefore: number },
) {
  const account = privateKeyToAccount(key);
  const authorization = {
    from: account.address,
    to: accepted.payTo as Hex,
    value: BigInt(accepted.amount),
    validAfter: BigInt(window.validAfter),
    validBefore: BigInt(window.validBefore),
    nonce: keccak256(toHex(generatePrivateKey())),
  };
  const signature = await account.signTypedData({
    domain: {
      name: "USDC",
      version: "2",
      chainId: SANDBOX_A.chainId,
      verifyingContract: accepted.asset as Hex,
    },
    types: TRANSFER_WITH_AUTHORIZATION_TYPES,
    primaryType: "TransferWithAuthorization",
    message: authorization,
  });
  const asStrings = Object.fromEntries(Object.entries(authorization).map(([k, v]) => [k, String(v)]));
  return { x402Version: 2, accepted, payload: { authorization: asStrings, signature } };
}
