import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { decodePaymentResponseHeader } from "@x402/fetch";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentFetch } from "../../docs/examples/x402-agent-fetch.ts";
import { weatherApp } from "../../docs/examples/x402-resource.ts";
import { SANDBOX_A } from "../../src/chain/simulated/networks.ts";
import { AgentPaymentOutcomes, EXPIRY_GRACE_MS } from "../../src/modules/wallets/agent-payment-outcomes.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";

// Both sides of x402 in the sandbox (D23), with the code docs/x402.md shows: a merchant's Express
// route behind the stock middleware settled by our facilitator, and an agent wallet paying it
// through the stock fetch wrapper with the documented signer (the service signs under the
// wallet's policy). Then the authorization's end: a spend once its nonce is used, a released
// reservation once it lapses unused.

const NETWORK_A = `eip155:${SANDBOX_A.chainId}` as const;
const USDC = SANDBOX_A.tokens.USDC as string;

let t: TestApp;
let serviceUrl: string;
let ws: CreatedWorkspace;
let merchant: { url: string; close: () => void };
let wallet: { walletId: string; address: string; ownerId: string };
let outcomes: AgentPaymentOutcomes;

async function api(method: "GET" | "POST" | "PUT", url: string, payload?: object) {
  return t.request({ method, url, headers: bearer(ws.testKey), ...(payload ? { payload } : {}) });
}

const authorizations = async (status: string) =>
  (await api("GET", `/api/wallets/${wallet.walletId}/x402/authorizations?status=${status}`)).json().data
    .items;

beforeAll(async () => {
  t = await startTestApp();
  serviceUrl = await t.app.http.listen({ port: 0, host: "127.0.0.1" });
  ws = await createWorkspace(t);
  const server = weatherApp(serviceUrl, ws.testKey, {
    network: NETWORK_A,
    usdc: USDC,
    payTo: ws.eoaAddress,
  }).listen(0, "127.0.0.1");
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  merchant = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/weather`,
    close: () => server.close(),
  };
  const agent = (await api("POST", "/api/agents/create", { name: "Weather agent" })).json().data;
  wallet = (
    await api("POST", "/api/wallets/create", { ownerId: agent.agentId, type: "agent", currencies: ["USDC"] })
  ).json().data;
  await t.app.services.ledger.credit({
    network: SANDBOX_A.id,
    address: wallet.address,
    token: "USDC",
    amount: 5_000_000n,
    reference: `agent:${wallet.walletId}`,
  });
  outcomes = new AgentPaymentOutcomes(t.app.ctx, t.app.services.ledger);
}, 60_000);

afterAll(async () => {
  merchant?.close();
  await t?.close();
});

describe("an agent wallet pays an x402 resource settled by our facilitator (sandbox)", () => {
  it("pays through the stock fetch wrapper with the documented signer; the authorization becomes a spend", async () => {
    const res = await agentFetch(serviceUrl, ws.testKey, wallet.walletId)(merchant.url);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ weather: "sunny" });
    const settled = decodePaymentResponseHeader(res.headers.get("payment-response") ?? "");
    expect(settled).toMatchObject({ success: true, payer: wallet.address, network: NETWORK_A });
    expect(await t.app.services.ledger.balance(SANDBOX_A.id, wallet.address, "USDC")).toBe(4_990_000n);

    expect(await outcomes.tick()).toBe(1);
    const [spend] = await authorizations("settled");
    expect(spend).toMatchObject({
      status: "settled",
      amount: "0.01",
      payTo: ws.eoaAddress,
      resource: merchant.url,
      network: SANDBOX_A.id,
      txHash: settled.transaction,
    });
    const events = await t.database.db
      .selectFrom("outbox_events")
      .select("event_type")
      .where("workspace_id", "=", ws.id)
      .where("event_type", "like", "agent.payment.%")
      .execute();
    expect(events.map((e) => e.event_type)).toEqual(["agent.payment.authorized", "agent.payment.settled"]);
  });

  it("releases the reservation of an authorization that lapses unused", async () => {
    expect(
      (await api("PUT", `/api/wallets/${wallet.walletId}/policy`, { daily: { USDC: "0.05" } })).statusCode,
    ).toBe(200);
    const required = {
      x402Version: 2,
      resource: { url: merchant.url },
      accepts: [
        {
          scheme: "exact",
          network: NETWORK_A,
          asset: USDC,
          amount: "30000",
          payTo: ws.eoaAddress,
          maxTimeoutSeconds: 30,
          extra: { name: "USDC", version: "2" },
        },
      ],
    };
    const pay = () =>
      api("POST", `/api/wallets/${wallet.walletId}/x402/pay`, {
        paymentRequired: required,
        resource: merchant.url,
      });
    const unused = await pay();
    expect(unused.statusCode).toBe(200);
    // 0.01 spent and 0.03 reserved: another 0.03 is over the day's 0.05.
    expect((await pay()).json()).toMatchObject({ success: false, policy: "daily" });

    expect(await outcomes.tick()).toBe(0); // still valid, unused
    t.setNow(new Date(Date.now() + 30_000 + EXPIRY_GRACE_MS + 1_000));
    try {
      expect(await outcomes.tick()).toBe(1);
    } finally {
      t.setNow(undefined);
    }
    const [expired] = await authorizations("expired");
    expect(expired).toMatchObject({ authorizationId: unused.json().data.authorizationId, txHash: null });
    expect((await pay()).statusCode).toBe(200);
  });

  it("waits for a person above approvalAbove; once approved, the agent reads its signature and is served", async () => {
    const wallet2 = (
      await api("POST", "/api/wallets/create", {
        ownerId: wallet.ownerId,
        type: "agent",
        currencies: ["USDC"],
      })
    ).json().data;
    await t.app.services.ledger.credit({
      network: SANDBOX_A.id,
      address: wallet2.address,
      token: "USDC",
      amount: 1_000_000n,
      reference: `agent:${wallet2.walletId}`,
    });
    await api("PUT", `/api/wallets/${wallet2.walletId}/policy`, { approvalAbove: { USDC: "0.005" } });
    // The stock wrapper's first try is refused by the documented signer: the payment waits.
    await expect(agentFetch(serviceUrl, ws.testKey, wallet2.walletId)(merchant.url)).rejects.toThrow(/202/);
    const base = `/api/wallets/${wallet2.walletId}/x402/authorizations`;
    const [waiting] = (await api("GET", `${base}?status=approval_required`)).json().data.items;
    const read = async () => (await api("GET", `${base}/${waiting.authorizationId}`)).json().data;
    expect((await read()).paymentSignature).toBeUndefined();

    expect((await api("POST", `${base}/${waiting.authorizationId}/approve`)).statusCode).toBe(200);
    const approved = await read();
    expect(approved.status).toBe("authorized");
    const res = await fetch(merchant.url, { headers: { "PAYMENT-SIGNATURE": approved.paymentSignature } });
    expect(res.status).toBe(200);
    expect(await t.app.services.ledger.balance(SANDBOX_A.id, wallet2.address, "USDC")).toBe(990_000n);
    // Once it is a spend, the signature is no longer handed out.
    await outcomes.tick();
    expect(await read()).toMatchObject({ status: "settled" });
    expect((await read()).paymentSignature).toBeUndefined();
  });

  it("shows docs/x402.md's examples as the tested files are", () => {
    const doc = readFileSync(new URL("../../docs/x402.md", import.meta.url), "utf8");
    for (const example of ["x402-resource.ts", "x402-agent-fetch.ts"]) {
      const code = readFileSync(new URL(`../../docs/examples/${example}`, import.meta.url), "utf8");
      expect(doc, example).toContain(code.trim());
    }
  });
});
