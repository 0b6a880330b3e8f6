import type { PaymentRequirements } from "@x402/core/types";
import { decodePaymentResponseHeader } from "@x402/fetch";
import { sql } from "kysely";
import {
  type Address,
  createPublicClient,
  createWalletClient,
  erc20Abi,
  type Hex,
  http,
  maxUint256,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentFetch } from "../../docs/examples/x402-agent-fetch.ts";
import { type Devnet, PERMIT2_ADDRESS, startDevnet, USDC_EIP712 } from "../../src/devnet/chain.ts";
import { STALE_SETTLE_SECONDS } from "../../src/domain/x402-settle-state.ts";
import { claimSettle, linkPayment } from "../../src/modules/x402/repo.ts";
import { parseFacilitatorRequest } from "../../src/modules/x402/request.ts";
import { createWorkers, type Workers } from "../../src/workers.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { creditEth, creditToken } from "../support/devnet-credit.ts";
import { liveNetworkEnv } from "../support/devnet-env.ts";
import { until } from "../support/poll.ts";
import { paidResource, payingFetch, type Resource, signedPayment } from "../support/x402.ts";

// The x402 facilitator on a live network (the devnet, D23): the stock Express middleware pointed at
// our /api/v1/x402 with a live key, an agent paying through the stock fetch wrapper, and each
// settlement a payment the watcher detects by its transaction, confirms and forwards. The
// facilitator wallet's gas comes from the gas top-up job.

const SETTLEMENT = "0x1111111111111111111111111111111111111111";

let devnet: Devnet;
let t: TestApp;
let workers: Workers;
let ws: CreatedWorkspace;
let resource: Resource;
let serviceUrl: string;
let network: `${string}:${string}`;
let chain: ReturnType<typeof createPublicClient>;
let facilitator: Address;
const payerKey = generatePrivateKey();
const payer = privateKeyToAccount(payerKey).address;

const usdcOf = (address: string) =>
  chain.readContract({
    address: devnet.tokens.USDC,
    abi: erc20Abi,
    functionName: "balanceOf",
    args: [address as Address],
  });

async function payment(id: string) {
  const res = await t.request({ method: "GET", url: `/api/v1/payments/${id}`, headers: bearer(ws.liveKey) });
  return res.json().payment;
}

function requirements(amount: string): PaymentRequirements {
  return {
    scheme: "exact",
    network,
    asset: devnet.tokens.USDC,
    amount,
    payTo: ws.eoaAddress,
    maxTimeoutSeconds: 120,
    extra: { ...USDC_EIP712 },
  };
}

async function settle(body: unknown) {
  return t.request({
    method: "POST",
    url: "/api/v1/x402/settle",
    headers: bearer(ws.liveKey),
    payload: body as object,
  });
}

beforeAll(async () => {
  devnet = await startDevnet();
  t = await startTestApp(liveNetworkEnv(devnet));
  chain = createPublicClient({ chain: devnet.chain, transport: http(devnet.rpcUrl) });
  network = `eip155:${devnet.chainId}`;
  serviceUrl = await t.app.http.listen({ port: 0, host: "127.0.0.1" });
  ws = await createWorkspace(t, { settlementAddress: SETTLEMENT });
  await creditToken(devnet, "USDC", payer, "100");
  resource = await paidResource(serviceUrl, ws.liveKey, {
    network,
    asset: devnet.tokens.USDC,
    amount: "250000",
    payTo: ws.eoaAddress,
    extra: { ...USDC_EIP712 },
  });
  // Made before the workers start: the gas top-up job's first round (at start) funds it.
  facilitator = await facilitatorWallet();
  workers = createWorkers(t.app, { dispatcher: { pollIntervalMs: 50 } });
  workers.start();
}, 90_000);

afterAll(async () => {
  await workers?.stop();
  await resource?.close();
  await t?.close();
  await devnet?.stop();
});

describe("x402 facilitator on a live network (devnet)", () => {
  it("lists the network and a facilitator wallet of its own, funded with gas by the top-up job", async () => {
    const res = await t.request({
      method: "GET",
      url: "/api/v1/x402/supported",
      headers: bearer(ws.liveKey),
    });
    expect(res.json().kinds).toEqual([
      { x402Version: 2, scheme: "exact", network },
      { x402Version: 2, scheme: "upto", network, extra: { facilitatorAddress: facilitator } },
    ]);
    expect(facilitator).not.toBe(ws.eoaAddress);
    await until(
      "the facilitator wallet's gas",
      () => chain.getBalance({ address: facilitator }),
      (b) => b > 0n,
      30_000,
    );
  });

  it("tops up a new facilitator wallet at its first settle, before making the payment", async () => {
    const other = await createWorkspace(t, {
      settlementAddress: "0x4444444444444444444444444444444444444444",
    });
    const accepted = { ...requirements("1000"), payTo: other.eoaAddress };
    const body = {
      x402Version: 2,
      paymentPayload: await signedPayment(payerKey, accepted),
      paymentRequirements: accepted,
    };
    const res = await t.request({
      method: "POST",
      url: "/api/v1/x402/settle",
      headers: bearer(other.liveKey),
      payload: body,
    });
    expect(res.json()).toMatchObject({ success: true });
  });

  it("serves a paid request through the stock middleware; the payment is detected by its transaction and forwarded", async () => {
    const before = { payer: await usdcOf(payer), merchant: await usdcOf(SETTLEMENT) };
    const res = await payingFetch(payerKey, { network, asset: devnet.tokens.USDC })(resource.url);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ weather: "sunny" });
    const settled = decodePaymentResponseHeader(res.headers.get("payment-response") ?? "");
    expect(settled).toMatchObject({ success: true, payer, network });
    expect(await usdcOf(payer)).toBe(before.payer - 250_000n);

    const row = await untilDetected(settled.transaction as Hex);
    const forwarded = await until(
      "forwarded",
      () => payment(row.id),
      (p) => p.status === "forwarded",
      60_000,
    );
    expect(forwarded).toMatchObject({
      paymentMethod: "crypto",
      network: "default",
      grossAmount: "0.25",
      txHash: settled.transaction.toLowerCase(),
      payerAddress: payer,
      x402: { payer, resource: resource.url, scheme: "exact" },
    });
    const net = BigInt(Math.round(Number(forwarded.netAmount) * 1e6));
    expect(await usdcOf(SETTLEMENT)).toBe(before.merchant + net);
  });

  it("an agent wallet pays through the stock fetch wrapper with the documented signer; its spend is recorded", async () => {
    const live = (method: "POST", url: string, payload: object) =>
      t.request({ method, url, headers: bearer(ws.liveKey), payload });
    const agent = (await live("POST", "/api/agents/create", { name: "Devnet agent" })).json().data;
    const wallet = (
      await live("POST", "/api/wallets/create", {
        ownerId: agent.agentId,
        type: "agent",
        currencies: ["USDC"],
      })
    ).json().data;
    await creditToken(devnet, "USDC", wallet.address, "1");
    const merchantBefore = await usdcOf(SETTLEMENT);

    const res = await agentFetch(serviceUrl, ws.liveKey, wallet.walletId)(resource.url);
    expect(res.status).toBe(200);
    const settled = decodePaymentResponseHeader(res.headers.get("payment-response") ?? "");
    expect(settled).toMatchObject({ success: true, payer: wallet.address, network });
    expect(await usdcOf(wallet.address)).toBe(750_000n);
    const row = await untilDetected(settled.transaction as Hex);
    const forwarded = await until(
      "forwarded",
      () => payment(row.id),
      (p) => p.status === "forwarded",
      60_000,
    );
    const net = BigInt(Math.round(Number(forwarded.netAmount) * 1e6));
    expect(await usdcOf(SETTLEMENT)).toBe(merchantBefore + net);
    // The outcomes job (every 2 s) finds the nonce used on chain: a spend, with its transaction.
    const spend = await until(
      "the agent's spend",
      async () =>
        (
          await t.request({
            method: "GET",
            url: `/api/wallets/${wallet.walletId}/x402/authorizations?status=settled`,
            headers: bearer(ws.liveKey),
          })
        ).json().data.items[0],
      (item) => item !== undefined,
      20_000,
    );
    expect(spend).toMatchObject({ amount: "0.25", network: "default", txHash: settled.transaction });
  });

  it("upto: settles what the resource used of a Permit2 authorization through x402's proxy; the payment is detected by its transaction and forwarded", async () => {
    // The payer lets Permit2 move its USDC once, as on any chain.
    const upPayerKey = generatePrivateKey();
    const upPayer = privateKeyToAccount(upPayerKey);
    await creditToken(devnet, "USDC", upPayer.address, "10");
    await creditEth(devnet, upPayer.address, "1");
    const wallet = createWalletClient({
      chain: devnet.chain,
      transport: http(devnet.rpcUrl),
      account: upPayer,
    });
    const approval = await wallet.writeContract({
      address: devnet.tokens.USDC,
      abi: erc20Abi,
      functionName: "approve",
      args: [PERMIT2_ADDRESS, maxUint256],
    });
    expect((await chain.waitForTransactionReceipt({ hash: approval })).status).toBe("success");

    const upto = await paidResource(serviceUrl, ws.liveKey, {
      network,
      asset: devnet.tokens.USDC,
      amount: "500000",
      payTo: ws.eoaAddress,
      upto: { used: "123456" },
    });
    try {
      const before = { payer: await usdcOf(upPayer.address), merchant: await usdcOf(SETTLEMENT) };
      const res = await payingFetch(upPayerKey, { network, asset: devnet.tokens.USDC })(upto.url);
      expect(res.status).toBe(200);
      const settled = decodePaymentResponseHeader(res.headers.get("payment-response") ?? "");
      expect(settled).toMatchObject({ success: true, payer: upPayer.address, network });
      expect(await usdcOf(upPayer.address)).toBe(before.payer - 123_456n);

      const row = await untilDetected(settled.transaction as Hex);
      const forwarded = await until(
        "forwarded",
        () => payment(row.id),
        (p) => p.status === "forwarded",
        60_000,
      );
      expect(forwarded).toMatchObject({
        grossAmount: "0.123456",
        txHash: settled.transaction.toLowerCase(),
        x402: { payer: upPayer.address, scheme: "upto" },
      });
      const net = BigInt(Math.round(Number(forwarded.netAmount) * 1e6));
      expect(await usdcOf(SETTLEMENT)).toBe(before.merchant + net);
    } finally {
      await upto.close();
    }
  });

  it("refuses the replayed authorization at verify, before any gas is spent", async () => {
    const accepted = requirements("1000");
    const body = {
      x402Version: 2,
      paymentPayload: await signedPayment(payerKey, accepted),
      paymentRequirements: accepted,
    };
    expect((await settle(body)).json()).toMatchObject({ success: true });
    const verify = await t.request({
      method: "POST",
      url: "/api/v1/x402/verify",
      headers: bearer(ws.liveKey),
      payload: body,
    });
    expect(verify.json()).toMatchObject({
      isValid: false,
      invalidReason: "invalid_exact_evm_nonce_already_used",
    });
    // Another payload of the same authorization (other requirements' extra): refused without a send.
    const again = await settle({ ...body, paymentRequirements: { ...accepted, maxTimeoutSeconds: 60 } });
    expect(again.json()).toMatchObject({ success: false, transaction: "" });
  });

  it("orders concurrent settles through the nonce-ordered sender: each once, each with its own transaction", async () => {
    const bodies = await Promise.all(
      Array.from({ length: 6 }, async (_, i) => {
        const accepted = requirements(String(10_000 + i));
        return {
          x402Version: 2,
          paymentPayload: await signedPayment(payerKey, accepted),
          paymentRequirements: accepted,
        };
      }),
    );
    const before = await usdcOf(payer);
    const answers = await Promise.all(bodies.map(async (b) => (await settle(b)).json()));
    expect(answers.every((a) => a.success)).toBe(true);
    expect(new Set(answers.map((a) => a.transaction)).size).toBe(6);
    expect(await usdcOf(payer)).toBe(before - (6n * 10_000n + 15n));
    const sent = await t.database.db
      .selectFrom("chain_transactions")
      .select(["nonce", "status"])
      .where("purpose", "=", "x402_settlement")
      .where("from_address", "=", facilitator)
      .execute();
    const nonces = sent.map((s) => Number(s.nonce)).sort((a, b) => a - b);
    expect(nonces).toEqual(nonces.map((_, i) => i));
  });

  it("a settle that stopped after writing its payment, before sending: once stale, that payment fails unsent and a repeat settles", async () => {
    const accepted = requirements("3000");
    const body = {
      x402Version: 2,
      paymentPayload: await signedPayment(payerKey, accepted),
      paymentRequirements: accepted,
    };
    const request = parseFacilitatorRequest(body);
    const authorization = request.authorization;
    const onChain = t.app.ctx.chains.defaultOf("live")?.config.id;
    if (!authorization || !onChain) throw new Error("no authorization or live network");
    const tenant = { workspaceId: ws.id, environment: "live" as const };
    // As a stopped instance leaves it: claimed, its payment written and linked, nothing sent.
    const claimed = await claimSettle(t.database.db, {
      ...tenant,
      network: onChain,
      asset: accepted.asset,
      payer: authorization.from,
      nonce: authorization.nonce,
      identifier: null,
      fingerprint: request.fingerprint,
    });
    if (claimed.kind !== "claimed") throw new Error("not claimed");
    const origin = { payer: authorization.from, resource: null, scheme: "exact", nonce: authorization.nonce };
    const opened = await t.app.services.payments.x402.open(tenant, {
      network: onChain,
      token: "USDC",
      amount: 3000n,
      payTo: ws.eoaAddress,
      walletType: "eoa",
      origin,
      validBefore: BigInt(authorization.validBefore),
    });
    await linkPayment(t.database.db, claimed.id, opened.id);
    const before = await usdcOf(payer);
    expect((await settle(body)).statusCode).toBe(409); // not stale yet: it may still be sending

    await sql`UPDATE x402_settlements SET updated_at = now() - make_interval(secs => ${STALE_SETTLE_SECONDS + 60})
              WHERE id = ${claimed.id}`.execute(t.database.db);
    const res = await settle(body);
    expect(res.statusCode, res.body).toBe(200);
    const answer = res.json();
    expect(answer).toMatchObject({ success: true, payer, network });
    expect(answer.extra.paymentId).not.toBe(opened.id);
    expect(await payment(opened.id)).toMatchObject({ status: "failed" });
    expect(await usdcOf(payer)).toBe(before - 3000n);
    expect((await untilDetected(answer.transaction)).id).toBe(answer.extra.paymentId);
    // Its answer is kept for the next repeat.
    expect((await settle(body)).json()).toEqual(answer);
  });

  it("answers a payer without the money at verify, and sends nothing", async () => {
    const broke = generatePrivateKey();
    const accepted = requirements("5000");
    const body = {
      x402Version: 2,
      paymentPayload: await signedPayment(broke, accepted),
      paymentRequirements: accepted,
    };
    const settlements = () =>
      t.database.db
        .selectFrom("chain_transactions")
        .select("tx_hash")
        .where("purpose", "=", "x402_settlement")
        .execute();
    const sentBefore = await settlements();
    expect((await settle(body)).json()).toMatchObject({ success: false, transaction: "" });
    expect((await settlements()).length).toBe(sentBefore.length);
  });
});

async function facilitatorWallet(): Promise<Address> {
  const res = await t.request({ method: "GET", url: "/api/v1/x402/supported", headers: bearer(ws.liveKey) });
  const [signer] = res.json().signers["eip155:*"] as Address[];
  if (!signer) throw new Error("no facilitator signer");
  return signer;
}

/** The payment the watcher detected with `txHash`. */
function untilDetected(txHash: Hex) {
  return until(
    "the settlement's payment detected",
    () =>
      t.database.db
        .selectFrom("payments")
        .select("id")
        .where("detected_tx_hash", "=", txHash.toLowerCase())
        .executeTakeFirst(),
    (row) => row !== undefined,
    30_000,
  ).then((row) => {
    if (!row) throw new Error("not detected");
    return row;
  });
}
