import type { PaymentRequirements } from "@x402/core/types";
import type { LightMyRequestResponse } from "fastify";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { SANDBOX_A } from "../../src/chain/simulated/networks.ts";
import { bearer, type CreatedWorkspace, createWorkspace, type TestApp } from "../support/app.ts";
import { type Instances, useInstances } from "../support/instances.ts";
import { signedPayment } from "../support/x402.ts";

// An x402 settlement happens once (D23), on one instance and on two sharing a database (on
// PostgreSQL with DATABASE_URL: a pool each): racing settles of one authorization move the payer's
// money once and make one payment; racing settles under one payment-identifier answer alike.

const RACERS = 12;
const setups = useInstances({ RATE_LIMIT_SANDBOX: "100000" });

async function payerWith(app: TestApp, units: bigint) {
  const key = generatePrivateKey();
  const address = privateKeyToAccount(key).address;
  await app.app.services.ledger.credit({
    network: SANDBOX_A.id,
    address,
    token: "USDC",
    amount: units,
    reference: `racer:${address}`,
  });
  return { key, address };
}

function requirements(ws: CreatedWorkspace, amount: string): PaymentRequirements {
  return {
    scheme: "exact",
    network: `eip155:${SANDBOX_A.chainId}`,
    asset: SANDBOX_A.tokens.USDC as string,
    amount,
    payTo: ws.eoaAddress,
    maxTimeoutSeconds: 120,
    extra: { name: "USDC", version: "2" },
  };
}

function race({ a, b }: Instances, ws: CreatedWorkspace, body: object): Promise<LightMyRequestResponse[]> {
  return Promise.all(
    Array.from({ length: RACERS }, (_, i) =>
      (i % 2 === 0 ? a : b).request({
        method: "POST",
        url: "/api/v1/x402/settle",
        headers: bearer(ws.testKey),
        payload: body,
      }),
    ),
  );
}

async function paymentsOf(app: TestApp, ws: CreatedWorkspace) {
  return app.database.db
    .selectFrom("payments")
    .select(["id", "gross_amount"])
    .where("workspace_id", "=", ws.id)
    .execute();
}

describe.each([{ index: 0 }, { index: 1 }])("settles once (setup $index)", ({ index }) => {
  const setup = () => setups[index] as Instances;

  it(`${RACERS} racing settles of one authorization move the money once and make one payment`, async () => {
    const s = setup();
    const ws = await createWorkspace(s.a);
    const payer = await payerWith(s.a, 1_000_000n);
    const accepted = requirements(ws, "300000");
    const body = {
      x402Version: 2,
      paymentPayload: await signedPayment(payer.key, accepted),
      paymentRequirements: accepted,
    };
    const answers = (await race(s, ws, body)).map((res) => ({ status: res.statusCode, body: res.json() }));

    const settled = answers.filter((a) => a.status === 200 && a.body.success);
    // One settled; every other racer either read that answer (same payload) or was told it was in progress.
    expect(new Set(settled.map((a) => a.body.transaction)).size, s.name).toBe(1);
    for (const a of answers.filter((x) => !(x.status === 200 && x.body.success)))
      expect(
        a.status === 409 || a.body.errorReason === "invalid_exact_evm_nonce_already_used",
        JSON.stringify(a),
      ).toBe(true);
    expect(await s.a.app.services.ledger.balance(SANDBOX_A.id, payer.address, "USDC")).toBe(700_000n);
    expect(await paymentsOf(s.a, ws)).toHaveLength(1);
  });

  it(`${RACERS} racing settles under one payment-identifier: one payment, and the same answer to every one that was answered`, async () => {
    const s = setup();
    const ws = await createWorkspace(s.a);
    const payer = await payerWith(s.b, 1_000_000n);
    const accepted = requirements(ws, "250000");
    const signed = await signedPayment(payer.key, accepted);
    const paymentPayload = {
      ...signed,
      extensions: { "payment-identifier": { info: { id: `pay_${"7".repeat(24)}` } } },
    };
    const answers = await race(s, ws, { x402Version: 2, paymentPayload, paymentRequirements: accepted });

    const answered = answers.filter((res) => res.statusCode === 200).map((res) => res.body);
    expect(answered.length, s.name).toBeGreaterThan(0);
    expect(new Set(answered).size).toBe(1);
    expect(JSON.parse(answered[0] ?? "{}")).toMatchObject({ success: true });
    for (const res of answers.filter((r) => r.statusCode !== 200)) expect(res.statusCode).toBe(409);
    expect(await s.a.app.services.ledger.balance(SANDBOX_A.id, payer.address, "USDC")).toBe(750_000n);
    expect(await paymentsOf(s.b, ws)).toHaveLength(1);
  });
});
