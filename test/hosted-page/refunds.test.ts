import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";

// The hosted payment page of a refunded payment (D19): it says so, "Refunded" when everything it
// received went back, "Paid" with "Refunded X TOKEN of Y TOKEN" otherwise; an unrefunded one says
// nothing of refunds; metadata is never shown.

const PAYER = "0x3333333333333333333333333333333333333333";
const SECRET = "internal-order-note-7781";
let t: TestApp;
let ws: CreatedWorkspace;

beforeAll(async () => {
  t = await startTestApp({ RATE_LIMIT_SANDBOX: "100000" });
  ws = await createWorkspace(t, { name: "Hosted Refunds Co" });
  const funded = await api("POST", "/api/v1/sandbox/faucet", { tokenSymbol: "USDC", amount: "100.00" });
  expect(funded.statusCode, funded.body).toBe(200);
});

afterAll(async () => {
  await t?.close();
});

function api(method: "GET" | "POST", url: string, payload?: object, headers: Record<string, string> = {}) {
  return t.request({
    method,
    url,
    headers: { ...bearer(ws.testKey), ...headers },
    ...(payload ? { payload } : {}),
  });
}

async function payment(amount: string): Promise<string> {
  const res = await api("POST", "/api/v1/payments", {
    amount,
    tokenSymbol: "USDC",
    paymentMethod: "crypto",
    description: "Blue mug",
    metadata: { note: SECRET },
  });
  expect(res.statusCode, res.body).toBe(201);
  expect(res.json().payment.status).toBe("forwarded");
  return res.json().payment.id;
}

async function refund(paymentId: string, amount?: string) {
  const res = await api(
    "POST",
    `/api/v1/payments/${paymentId}/refunds`,
    { destinationAddress: PAYER, ...(amount ? { amount } : {}) },
    { "idempotency-key": `hosted-${paymentId}-${amount ?? "rest"}` },
  );
  expect(res.statusCode, res.body).toBe(201);
  expect(res.json().refund.status).toBe("completed");
}

async function page(paymentId: string): Promise<string> {
  const res = await t.request({ method: "GET", url: `/pay/${paymentId}` });
  expect(res.statusCode).toBe(200);
  expect(res.body).not.toContain(SECRET);
  return res.body;
}

describe("the hosted page of a refunded payment", () => {
  it("says nothing of refunds before any", async () => {
    const body = await page(await payment("12.00"));
    expect(body).toContain('<h1 id="title">Paid</h1>');
    expect(body).not.toContain('id="refund"');
    expect(body).not.toMatch(/refunded/i);
  });

  it("says what part went back after a partial refund, then Refunded once it all did", async () => {
    const id = await payment("30.00");
    await refund(id, "7.50");
    const partial = await page(id);
    expect(partial).toContain('<p class="refund" id="refund">Refunded 7.50 USDC of 30.00 USDC</p>');
    expect(partial).toContain('<h1 id="title">Paid</h1>');

    await refund(id);
    const full = await page(id);
    expect(full).toContain('<h1 id="title">Refunded</h1>');
    expect(full).not.toContain('id="refund"');
    // The status the page polls is unchanged: only what the page showed before.
    const status = await t.request({ method: "GET", url: `/pay/${id}/status` });
    expect(Object.keys(status.json()).sort()).toEqual(["expiresAt", "id", "status"]);
  });

  it("says Refunded of a payment refunded whole at once", async () => {
    const id = await payment("5.00");
    await refund(id);
    expect(await page(id)).toContain('<h1 id="title">Refunded</h1>');
  });
});
