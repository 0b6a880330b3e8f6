import type { PaymentRequirements } from "@x402/core/types";
import { sql } from "kysely";
import { keccak256, toHex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SANDBOX_A } from "../../src/chain/simulated/networks.ts";
import { STALE_SETTLE_SECONDS } from "../../src/domain/x402-settle-state.ts";
import { claimSettle } from "../../src/modules/x402/repo.ts";
import { parseFacilitatorRequest } from "../../src/modules/x402/request.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { signedPayment } from "../support/x402.ts";

// A settle whose instance stopped between its claim and its answer (a crash) leaves its claim
// `settling`. A repeat of it answers 409 while the claim may still be alive; once it is stale
// (STALE_SETTLE_SECONDS), the repeat ends it from the payments of its authorization, or settles
// afresh when nothing was moved. The crash is arranged in the database: the claim as a stopped
// instance leaves it, made older than a live settle can be.

const USDC = 1_000_000n;
const NETWORK_A = `eip155:${SANDBOX_A.chainId}` as const;

let t: TestApp;
let ws: CreatedWorkspace;
const payerKey = generatePrivateKey();
const payer = privateKeyToAccount(payerKey).address;

beforeAll(async () => {
  t = await startTestApp();
  ws = await createWorkspace(t);
  await t.app.services.ledger.credit({
    network: SANDBOX_A.id,
    address: payer,
    token: "USDC",
    amount: 100n * USDC,
    reference: `test-payer:${payer}`,
  });
}, 60_000);

afterAll(async () => {
  await t?.close();
});

const payerBalance = () => t.app.services.ledger.balance(SANDBOX_A.id, payer, "USDC");

/** A settle request of `amount` carrying a payment-identifier of its own. */
async function settleBody(amount: string) {
  const accepted: PaymentRequirements = {
    scheme: "exact",
    network: NETWORK_A,
    asset: SANDBOX_A.tokens.USDC as string,
    amount,
    payTo: ws.eoaAddress,
    maxTimeoutSeconds: 120,
    extra: { name: "USDC", version: "2" },
  };
  const signed = await signedPayment(payerKey, accepted);
  const id = `pay_${keccak256(toHex(generatePrivateKey())).slice(2, 34)}`;
  const paymentPayload = { ...signed, extensions: { "payment-identifier": { info: { id } } } };
  return { x402Version: 2, paymentPayload, paymentRequirements: accepted };
}

async function settle(body: unknown) {
  return t.request({
    method: "POST",
    url: "/api/v1/x402/settle",
    headers: bearer(ws.testKey),
    payload: body as object,
  });
}

/** The settle claim of `body`'s authorization. */
async function claimOf(body: unknown) {
  const { authorization } = parseFacilitatorRequest(body);
  return t.database.db
    .selectFrom("x402_settlements")
    .select(["id", "status", "payment_id", "response"])
    .where("nonce", "=", (authorization?.nonce ?? "").toLowerCase())
    .executeTakeFirstOrThrow();
}

/** Leaves `body`'s claim as an instance that stopped mid-settle leaves it, `secondsAgo` old. */
async function stopped(body: unknown, secondsAgo: number): Promise<void> {
  const { id } = await claimOf(body);
  await sql`
    UPDATE x402_settlements
    SET status = 'settling', response = NULL, payment_id = NULL,
        updated_at = now() - make_interval(secs => ${secondsAgo})
    WHERE id = ${id}`.execute(t.database.db);
}

/** Claims `body`'s settle as the service would, and stops there (nothing written after it). */
async function claimedOnly(body: unknown, secondsAgo: number): Promise<void> {
  const request = parseFacilitatorRequest(body);
  const claimed = await claimSettle(t.database.db, {
    workspaceId: ws.id,
    environment: "sandbox",
    network: SANDBOX_A.id,
    asset: request.requirements.asset,
    payer: request.authorization?.from ?? "",
    nonce: request.authorization?.nonce ?? "",
    identifier: request.identifier,
    fingerprint: request.fingerprint,
  });
  if (claimed.kind !== "claimed") throw new Error("not claimed");
  await stopped(body, secondsAgo);
}

async function paymentsOf(body: unknown) {
  const { authorization } = parseFacilitatorRequest(body);
  return t.database.db
    .selectFrom("payments")
    .select(["id", "status"])
    .where("workspace_id", "=", ws.id)
    .where(sql<boolean>`x402->>'nonce' = ${authorization?.nonce}`)
    .execute();
}

describe("an x402 settle whose instance stopped before answering", () => {
  it("is in progress (409) to a repeat while it may still be running", async () => {
    const body = await settleBody("1000");
    await claimedOnly(body, STALE_SETTLE_SECONDS - 60);
    const before = await payerBalance();
    const repeat = await settle(body);
    expect(repeat.statusCode).toBe(409);
    expect(repeat.json().error).toMatch(/in progress/);
    expect(await payerBalance()).toBe(before);
    expect((await claimOf(body)).status).toBe("settling");
  });

  it("having moved the money, is answered from its payment once stale: settled, nothing moved twice", async () => {
    const body = await settleBody("2000");
    const first = (await settle(body)).json();
    expect(first).toMatchObject({ success: true, payer, network: NETWORK_A });
    const after = await payerBalance();
    // It stopped after the ledger moved the money with its payment, before its answer was kept.
    await stopped(body, STALE_SETTLE_SECONDS + 60);

    const repeat = await settle(body);
    expect(repeat.statusCode, repeat.body).toBe(200);
    expect(repeat.json()).toEqual({
      success: true,
      payer,
      network: NETWORK_A,
      transaction: first.transaction,
      extra: { paymentId: first.extra.paymentId },
    });
    expect(await payerBalance()).toBe(after);
    expect(await paymentsOf(body)).toEqual([{ id: first.extra.paymentId, status: "forwarded" }]);
    expect(await claimOf(body)).toMatchObject({ status: "settled", payment_id: first.extra.paymentId });
    // Its answer is kept: the next repeat gets the same.
    expect((await settle(body)).json()).toEqual(repeat.json());
  });

  it("having written nothing, is taken over once stale: the repeat settles it, once", async () => {
    const body = await settleBody("3000");
    await claimedOnly(body, STALE_SETTLE_SECONDS + 60);
    const before = await payerBalance();

    const repeats = await Promise.all([settle(body), settle(body), settle(body)]);
    const answered = repeats.filter((r) => r.statusCode === 200).map((r) => r.json());
    // One took the claim over and settled; the others found it taken (409) or read its answer.
    expect(answered.length).toBeGreaterThanOrEqual(1);
    for (const r of repeats) expect([200, 409], r.body).toContain(r.statusCode);
    expect(answered[0]).toMatchObject({ success: true, payer, network: NETWORK_A });
    for (const a of answered) expect(a).toEqual(answered[0]);
    expect(await payerBalance()).toBe(before - 3000n);
    const payments = await paymentsOf(body);
    expect(payments).toEqual([{ id: answered[0].extra.paymentId, status: "forwarded" }]);
    expect(await claimOf(body)).toMatchObject({ status: "settled", payment_id: payments[0]?.id });
  });

  it("is not recovered by another workspace's request, nor by another payload of its authorization", async () => {
    const body = await settleBody("4000");
    await claimedOnly(body, STALE_SETTLE_SECONDS + 60);
    const other = await createWorkspace(t, { name: "Other Co" });
    const foreign = await t.request({
      method: "POST",
      url: "/api/v1/x402/settle",
      headers: bearer(other.testKey),
      payload: { ...body, paymentRequirements: { ...body.paymentRequirements, payTo: other.eoaAddress } },
    });
    expect(foreign.json()).toMatchObject({ success: false, transaction: "" });
    expect((await claimOf(body)).status).toBe("settling");
    expect(await paymentsOf(body)).toEqual([]);
  });
});
