import type { PaymentRequirements } from "@x402/core/types";
import { decodePaymentResponseHeader } from "@x402/fetch";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SANDBOX_A } from "../../src/chain/simulated/networks.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { paidResource, payingFetch, signedPayment } from "../support/x402.ts";

// x402's `upto` scheme in the sandbox (D23): the payer signs a Permit2 witness transfer of at most
// the route's price to x402's upto proxy, naming the workspace's facilitator; the resource settles
// what it used (x402's settlement overrides), and only that becomes a payment and leaves the payer.

const USDC = 1_000_000n;
const NETWORK_A = `eip155:${SANDBOX_A.chainId}` as const;
const ASSET = SANDBOX_A.tokens.USDC as string;

let t: TestApp;
let serviceUrl: string;
let ws: CreatedWorkspace;
let facilitator: string;
const payerKey = generatePrivateKey();
const payer = privateKeyToAccount(payerKey).address;

async function ledgerBalance(address: string): Promise<bigint> {
  return t.app.services.ledger.balance(SANDBOX_A.id, address, "USDC");
}

function requirements(overrides: Partial<PaymentRequirements> = {}): PaymentRequirements {
  return {
    scheme: "upto",
    network: NETWORK_A,
    asset: ASSET,
    amount: "500000",
    payTo: ws.eoaAddress,
    maxTimeoutSeconds: 120,
    extra: { facilitatorAddress: facilitator },
    ...overrides,
  };
}

async function call(path: "verify" | "settle", body: unknown) {
  const res = await t.request({
    method: "POST",
    url: `/api/v1/x402/${path}`,
    headers: bearer(ws.testKey),
    payload: body as object,
  });
  expect(res.statusCode).toBe(200);
  return res.json();
}

async function paymentsOf(): Promise<Array<{ id: string; grossAmount: string; x402?: { scheme: string } }>> {
  const res = await t.request({
    method: "GET",
    url: "/api/v1/payments?limit=50",
    headers: bearer(ws.testKey),
  });
  return res.json().payments;
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
  const supported = await t.request({
    method: "GET",
    url: "/api/v1/x402/supported",
    headers: bearer(ws.testKey),
  });
  facilitator = supported.json().signers["eip155:*"][0];
}, 60_000);

afterAll(async () => {
  await t?.close();
});

describe("x402 upto, sandbox", () => {
  it("serves a request priced up to 0.05 USDC through the stock middleware, and settles only what it used", async () => {
    const resource = await paidResource(serviceUrl, ws.testKey, {
      network: NETWORK_A,
      asset: ASSET,
      amount: "50000",
      payTo: ws.eoaAddress,
      upto: { used: "12345" },
    });
    try {
      const before = { payer: await ledgerBalance(payer), wallet: await ledgerBalance(ws.eoaAddress) };
      const res = await payingFetch(payerKey, { network: NETWORK_A, asset: ASSET })(resource.url);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ weather: "sunny" });
      const settled = decodePaymentResponseHeader(res.headers.get("payment-response") ?? "");
      expect(settled).toMatchObject({ success: true, payer, network: NETWORK_A });

      expect(await ledgerBalance(payer)).toBe(before.payer - 12_345n);
      expect(await ledgerBalance(ws.eoaAddress)).toBe(before.wallet + 12_345n);
      const payment = (await paymentsOf()).find((p) => p.id === settled.extra?.paymentId);
      expect(payment).toMatchObject({
        grossAmount: "0.012345",
        status: "forwarded",
        x402: { scheme: "upto", payer },
      });
    } finally {
      await resource.close();
    }
  });

  it("verifies the maximum, settles part of it once, and refuses the authorization again", async () => {
    const accepted = requirements();
    const payload = await signedPayment(payerKey, accepted);
    expect(await call("verify", { paymentPayload: payload, paymentRequirements: accepted })).toEqual({
      isValid: true,
      payer,
    });

    const before = await ledgerBalance(payer);
    const used = requirements({ amount: "200000" });
    const settled = await call("settle", { paymentPayload: payload, paymentRequirements: used });
    expect(settled).toMatchObject({ success: true, payer, network: NETWORK_A });
    expect(settled.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await ledgerBalance(payer)).toBe(before - 200_000n);
    const payment = (await paymentsOf()).find((p) => p.id === settled.extra.paymentId);
    expect(payment).toMatchObject({ grossAmount: "0.20", x402: { scheme: "upto" } });

    // The same payload with another amount is another settle of a used authorization: refused.
    const again = await call("settle", { paymentPayload: payload, paymentRequirements: requirements() });
    expect(again).toMatchObject({ success: false, errorReason: "permit2_invalid_nonce", transaction: "" });
    expect(await ledgerBalance(payer)).toBe(before - 200_000n);
  });

  it("refuses to settle more than was authorized, and moves nothing", async () => {
    const accepted = requirements();
    const payload = await signedPayment(payerKey, accepted);
    const before = await ledgerBalance(payer);
    const count = (await paymentsOf()).length;
    const res = await call("settle", {
      paymentPayload: payload,
      paymentRequirements: requirements({ amount: "500001" }),
    });
    expect(res).toMatchObject({
      success: false,
      errorReason: "invalid_upto_evm_payload_settlement_exceeds_amount",
    });
    expect(await ledgerBalance(payer)).toBe(before);
    expect(await paymentsOf()).toHaveLength(count);
  });

  it("settles nothing used as a success without a transaction or a payment, and ends the authorization", async () => {
    const payload = await signedPayment(payerKey, requirements());
    const before = await ledgerBalance(payer);
    const count = (await paymentsOf()).length;
    const res = await call("settle", {
      paymentPayload: payload,
      paymentRequirements: requirements({ amount: "0" }),
    });
    expect(res).toMatchObject({ success: true, transaction: "", payer });
    expect(await ledgerBalance(payer)).toBe(before);
    expect(await paymentsOf()).toHaveLength(count);
    // That ended the authorization here: it is not settled again for more.
    const later = await call("settle", {
      paymentPayload: payload,
      paymentRequirements: requirements({ amount: "100" }),
    });
    expect(later).toMatchObject({ success: false, errorReason: "permit2_invalid_nonce" });
    expect(await ledgerBalance(payer)).toBe(before);
  });

  it("refuses an authorization that names another facilitator", async () => {
    const other = privateKeyToAccount(generatePrivateKey()).address;
    const accepted = requirements({ extra: { facilitatorAddress: other } });
    const payload = await signedPayment(payerKey, accepted);
    const res = await call("verify", { paymentPayload: payload, paymentRequirements: accepted });
    expect(res).toMatchObject({ isValid: false, invalidReason: expect.stringMatching(/facilitator/i) });
  });

  it("refuses an upto authorization presented as exact, and an exact one as upto", async () => {
    const upto = await signedPayment(payerKey, requirements());
    const asExact = requirements({ scheme: "exact", extra: { name: "USDC", version: "2" } });
    expect(
      await call("verify", { paymentPayload: { ...upto, accepted: asExact }, paymentRequirements: asExact }),
    ).toMatchObject({ isValid: false, invalidReason: "invalid_payload" });

    const exact = await signedPayment(payerKey, asExact);
    const asUpto = requirements();
    expect(
      await call("verify", { paymentPayload: { ...exact, accepted: asUpto }, paymentRequirements: asUpto }),
    ).toMatchObject({ isValid: false, invalidReason: "invalid_payload" });
  });
});
