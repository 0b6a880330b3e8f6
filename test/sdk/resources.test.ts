import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BadRequestError, ConflictError, PaymentsClient } from "../../sdk/src/index.ts";
import { paymentRequired, RESOURCE, requirement } from "../support/agent-payments.ts";
import { createWorkspace, startTestApp, type TestApp } from "../support/app.ts";

// The SDK's resource methods that test/sdk/client.test.ts does not call, against the running
// service (sandbox key): the inbox's actions, the breaker's resume, the smart wallet, webhook
// delivery retries, and agent wallets paying x402 under a policy with an approval queue, walked
// with the page-numbered iterators.

let t: TestApp;
let baseUrl: string;
let workspaceId: string;
let client: PaymentsClient;

beforeAll(async () => {
  t = await startTestApp({ RATE_LIMIT_SANDBOX: "10000" });
  baseUrl = await t.app.http.listen({ port: 0, host: "127.0.0.1" });
  const ws = await createWorkspace(t);
  workspaceId = ws.id;
  client = new PaymentsClient({ apiKey: ws.testKey, baseUrl });
}, 60_000);

afterAll(async () => {
  await t?.close();
});

describe("the SDK's other resources", () => {
  it("keeps, attaches and returns unmatched transfers, once each", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      await client.transfers.simulateIncoming({ tokenSymbol: "USDC", amount: `0.0${i + 1}` });
    }
    for await (const transfer of client.transfers.iterateUnmatched()) ids.push(transfer.id);
    const [kept, attached, returned] = ids;
    if (!kept || !attached || !returned) throw new Error("three unmatched transfers expected");
    await client.transfers.keep(kept);
    await expect(client.transfers.keep(kept)).rejects.toBeInstanceOf(ConflictError);
    const { payment } = await client.payments.create({ tokenSymbol: "USDC", amount: "0.02" });
    const refund = await client.transfers.return(returned, {
      destinationAddress: "0x2222222222222222222222222222222222222222",
    });
    expect(refund.refund).toMatchObject({ unmatchedTransferId: returned });
    // A sandbox payment is forwarded at once: the attach is refused, naming the payment's status.
    const refused = await client.transfers
      .attach(attached, { paymentId: payment.id })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(BadRequestError);
    expect(refused).toMatchObject({
      message: "Only a pending or expired payment can take an unmatched transfer",
      context: { status: "forwarded" },
    });
  });

  it("reads the breaker and resumes payouts; reads and creates the smart wallet", async () => {
    expect(await client.payouts.state(workspaceId)).toBeTruthy();
    expect(await client.payouts.resume(workspaceId)).toBeTruthy();
    const before = await client.smartWallet.get(workspaceId);
    expect(before).toBeTruthy();
    const created = await client.smartWallet.create(workspaceId);
    expect(JSON.stringify(created)).toMatch(/0x[0-9a-fA-F]{40}/);
    await client.smartWallet.setDefault(workspaceId, { defaultWalletType: "smart_wallet" });
    expect(JSON.stringify(await client.smartWallet.get(workspaceId))).toContain('"smart_wallet"');
    // Back to the EOA: the other tests of this workspace fund it with the faucet (which credits the
    // EOA unless told otherwise) and spend from the default wallet.
    await client.smartWallet.setDefault(workspaceId, { defaultWalletType: "workspace" });
  });

  it("retries a webhook delivery", async () => {
    const { webhook } = await client.webhooks.create({
      url: "https://hooks.example.com/retry",
      events: ["payment.created"],
    });
    await client.payments.create({ tokenSymbol: "USDC", amount: "1" });
    const [delivery] = (await client.webhooks.deliveries(String(webhook.id))).deliveries;
    if (!delivery) throw new Error("a delivery expected");
    const walked: string[] = [];
    for await (const d of client.webhooks.iterateDeliveries(String(webhook.id))) walked.push(String(d.id));
    expect(walked).toEqual([String(delivery.id)]);
    expect(await client.webhooks.retryDelivery(String(webhook.id), String(delivery.id))).toBeTruthy();
  });

  it("pays x402 from an agent wallet under its policy, through the approval queue, and walks the pages", async () => {
    const names = ["SDK one", "SDK two", "SDK three"];
    const agentIds: string[] = [];
    for (const name of names) agentIds.push((await client.agents.create({ name })).data.agentId);
    const walked: string[] = [];
    for await (const agent of client.agents.iterate({ search: "SDK" })) walked.push(agent.agentId);
    expect(new Set(walked)).toEqual(new Set(agentIds));

    const ownerId = agentIds[0] as string;
    const { data: wallet } = await client.wallets.create({ ownerId, type: "agent", currencies: ["USDC"] });
    const wallets: string[] = [];
    for await (const w of client.wallets.iterate({ ownerId })) wallets.push(w.walletId);
    expect(wallets).toEqual([wallet.walletId]);
    expect(await client.wallets.balance(wallet.walletId, "USDC")).toMatchObject({ success: true });

    await client.wallets.setPolicy(wallet.walletId, { approvalAbove: { USDC: "1" } });
    const required = paymentRequired(requirement({ amount: "1500000" }));
    const waiting = await client.wallets.payX402(wallet.walletId, {
      paymentRequired: required as never,
      resource: RESOURCE,
    });
    const authorizationId = (waiting as { data: { authorizationId: string } }).data.authorizationId;
    const queued: string[] = [];
    for await (const a of client.wallets.iterateAuthorizations(wallet.walletId, {
      status: "approval_required",
    }))
      queued.push(a.authorizationId);
    expect(queued).toEqual([authorizationId]);
    expect((await client.wallets.authorization(wallet.walletId, authorizationId)).data.status).toBe(
      "approval_required",
    );
    const denied = await client.wallets.deny(wallet.walletId, authorizationId);
    expect(JSON.stringify(denied)).toContain("denied");

    const again = await client.wallets.payX402(wallet.walletId, {
      paymentRequired: required as never,
      resource: RESOURCE,
    });
    const second = (again as { data: { authorizationId: string } }).data.authorizationId;
    const approved = await client.wallets.approve(wallet.walletId, second);
    expect(JSON.stringify(approved)).toContain("authorized");
  });

  it("quotes, executes, lists and reads a swap; starts, reads and lists on-ramp sessions (sandbox)", async () => {
    await client.wallet.faucet({ tokenSymbol: "USDC", amount: "100" });
    const quote = await client.swaps.quote({ sellToken: "USDC", buyToken: "ETH", sellAmount: "1" });
    expect(quote).toMatchObject({ sellToken: "USDC", buyToken: "ETH", sellAmount: "1.00" });
    const { swapId, status } = await client.swaps.execute({ quoteId: quote.quoteId });
    expect(status).toBe("completed");
    expect((await client.swaps.get(swapId)).swapId).toBe(swapId);
    expect((await client.swaps.list()).swaps.map((s) => s.swapId)).toContain(swapId);
    const swaps: string[] = [];
    for await (const swap of client.swaps.iterate()) swaps.push(swap.swapId);
    expect(swaps).toContain(swapId);

    const session = await client.onramp.createSession({ destinationCurrency: "USDC", sourceAmount: "50" });
    const sessionId = session.id;
    expect(await client.onramp.getSession(sessionId)).toMatchObject({ id: sessionId, provider: "sandbox" });
    const sessions: string[] = [];
    for await (const s of client.onramp.iterateSessions()) sessions.push(s.id);
    expect(sessions).toEqual([sessionId]);
  });
});
