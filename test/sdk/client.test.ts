import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AuthenticationError,
  BadRequestError,
  NotFoundError,
  PaymentsClient,
  PaymentsConnectionError,
  PaymentsTimeoutError,
} from "../../sdk/src/index.ts";
import { createWorkspace, startTestApp, type TestApp } from "../support/app.ts";

// The SDK (sdk/) against the real service, listening on 127.0.0.1 (PGlite): its resources, its
// idempotency keys across its own retries, its retries of a 429 after Retry-After, its typed
// errors and its paged iterators.

const DESTINATION = "0x2222222222222222222222222222222222222222";

let t: TestApp;
let baseUrl: string;
let workspaceId: string;
let client: PaymentsClient;

beforeAll(async () => {
  t = await startTestApp();
  baseUrl = await t.app.http.listen({ port: 0, host: "127.0.0.1" });
  const ws = await createWorkspace(t);
  workspaceId = ws.id;
  client = new PaymentsClient({ apiKey: ws.testKey, baseUrl });
}, 60_000);

afterAll(async () => {
  await t?.close();
});

describe("the SDK's resources", () => {
  it("creates, reads, lists, verifies and cancels payments", async () => {
    const { payment } = await client.payments.create({ tokenSymbol: "USDC", amount: "12.50" });
    expect(payment).toMatchObject({ tokenSymbol: "USDC", status: "forwarded" });
    expect((await client.payments.get(payment.id)).payment.id).toBe(payment.id);
    const page = await client.payments.list({ limit: 5 });
    expect(page.payments.map((p) => p.id)).toContain(payment.id);
    expect((await client.payments.verify(payment.id)).verified).toBe(true);
    await expect(client.payments.cancel(payment.id)).rejects.toBeInstanceOf(BadRequestError);
  });

  it("refunds a payment, and lists its refunds", async () => {
    await client.wallet.faucet({ tokenSymbol: "USDC", amount: "100" });
    const { payment } = await client.payments.create({ tokenSymbol: "USDC", amount: "10" });
    const { refund } = await client.refunds.create(payment.id, {
      amount: "4",
      destinationAddress: DESTINATION,
    });
    expect(refund).toMatchObject({ paymentId: payment.id, amount: "4.00" });
    const listed = await client.refunds.list(payment.id);
    expect(listed.refunds.map((r) => r.id)).toEqual([refund.id]);
    const walked = [];
    for await (const r of client.refunds.iterate(payment.id)) walked.push(r.id);
    expect(walked).toEqual([refund.id]);
  });

  it("sends a payout (its idempotency key in the body), lists payouts and reads the breaker", async () => {
    await client.wallet.faucet({ tokenSymbol: "USDC", amount: "50" });
    const key = `payout-${Date.now()}`;
    const first = await client.payouts.create(
      { tokenSymbol: "USDC", amount: "1.25", destinationAddress: DESTINATION },
      { idempotencyKey: key },
    );
    const again = await client.payouts.create(
      { tokenSymbol: "USDC", amount: "1.25", destinationAddress: DESTINATION },
      { idempotencyKey: key },
    );
    expect(again.payout.txHash).toBe(first.payout.txHash);
    expect(JSON.stringify(await client.payouts.list({ limit: 5 }))).toContain(DESTINATION);
    const payouts = [];
    for await (const payout of client.payouts.iterate()) payouts.push(payout.txHash);
    expect(payouts).toEqual([first.payout.txHash]);
    expect(await client.payouts.state(workspaceId)).toBeTruthy();
    expect(await client.wallet.balance()).toBeTruthy();
    expect(await client.wallet.stats()).toBeTruthy();
  });

  it("manages keys, webhooks, splits, settlements and reads the networks", async () => {
    const created = await client.keys.create({ name: "sdk" });
    expect((await client.keys.list()).apiKeys.map((k) => k.id)).toContain(created.apiKey.id);
    await client.keys.revoke(created.apiKey.id);

    const hook = await client.webhooks.create({
      url: "https://hooks.example.com/sdk",
      events: ["payment.created"],
    });
    const hookId = String(hook.webhook.id);
    expect((await client.webhooks.list()).webhooks.map((w) => String(w.id))).toContain(hookId);
    expect((await client.webhooks.deliveries(hookId)).deliveries).toEqual([]);
    await client.webhooks.delete(hookId);

    const splits = await client.splits.replace({
      enabled: true,
      splits: [{ label: "partner", percentBps: 1000, destination: DESTINATION }],
    });
    expect(splits).toMatchObject({ enabled: true });
    expect(await client.splits.get()).toMatchObject({ enabled: true });
    const { payment } = await client.payments.create({ tokenSymbol: "USDC", amount: "3" });
    const settlements = [];
    for await (const s of client.settlements.iterate({ paymentId: payment.id })) settlements.push(s);
    expect(settlements.length).toBeGreaterThan(0);
    const first = settlements[0];
    if (first)
      expect((await client.settlements.get(first.settlementId)).settlement.settlementId).toBe(
        first.settlementId,
      );
    await client.splits.replace({ enabled: false, splits: [] });

    expect((await client.networks.list()).networks.length).toBeGreaterThan(0);
  });

  it("reads the unmatched inbox and simulates a payer's transfer in the sandbox", async () => {
    const sent = await client.transfers.simulateIncoming({ tokenSymbol: "USDC", amount: "0.77" });
    expect(sent).toBeTruthy();
    const inbox = [];
    for await (const transfer of client.transfers.iterateUnmatched()) inbox.push(transfer);
    expect(inbox.length).toBeGreaterThan(0);
  });

  it("works with agents and their wallets", async () => {
    const agent = await client.agents.create({ name: "SDK agent" });
    const agentId = (agent as { data: { agentId: string } }).data.agentId;
    expect(await client.agents.get(agentId)).toMatchObject({ success: true });
    await client.agents.update(agentId, { description: "from the SDK" });
    expect(JSON.stringify(await client.agents.list({ search: "SDK" }))).toContain(agentId);
    const wallet = await client.wallets.create({ ownerId: agentId, type: "agent", currencies: ["USDC"] });
    const walletId = (wallet as { data: { walletId: string } }).data.walletId;
    expect(JSON.stringify(await client.wallets.get(walletId))).toContain(walletId);
    expect(JSON.stringify(await client.wallets.list({ ownerId: agentId }))).toContain(walletId);
    await client.wallets.addCurrency(walletId, { currency: "ETH" });
    await client.wallets.setPolicy(walletId, { maxPerPayment: { USDC: "1" } });
    expect(JSON.stringify(await client.wallets.policy(walletId))).toContain('"maxPerPayment"');
    await client.agents.delete(agentId);
  });
});

describe("the SDK's transport", () => {
  it("retries a create whose connection dropped after the service made it, with the same key: one payment", async () => {
    let calls = 0;
    const dropping: typeof fetch = async (input, init) => {
      calls++;
      const res = await fetch(input, init);
      if (calls === 1) {
        await res.body?.cancel();
        throw new TypeError("fetch failed", { cause: new Error("socket hang up") });
      }
      return res;
    };
    const ws = await createWorkspace(t);
    const flaky = new PaymentsClient({
      apiKey: ws.testKey,
      baseUrl,
      fetch: dropping,
      retryDelays: { baseMs: 1 },
    });
    const { payment } = await flaky.payments.create({ tokenSymbol: "USDC", amount: "7.00" });
    expect(calls).toBe(2);
    const all = await flaky.payments.list({ limit: 10 });
    expect(all.payments.map((p) => p.id)).toEqual([payment.id]);
  });

  it("does not resend a request without an idempotency key whose connection dropped", async () => {
    let calls = 0;
    const dropping: typeof fetch = async () => {
      calls++;
      throw new TypeError("fetch failed");
    };
    const ws = await createWorkspace(t);
    const flaky = new PaymentsClient({
      apiKey: ws.testKey,
      baseUrl,
      fetch: dropping,
      retryDelays: { baseMs: 1 },
    });
    await expect(
      flaky.webhooks.create({ url: "https://hooks.example.com/x", events: ["payment.created"] }),
    ).rejects.toBeInstanceOf(PaymentsConnectionError);
    expect(calls).toBe(1);
    calls = 0;
    await expect(flaky.payments.list()).rejects.toBeInstanceOf(PaymentsConnectionError);
    expect(calls).toBe(3);
  });

  it("retries a 429 after its Retry-After", async () => {
    const limited = await startTestApp({ RATE_LIMIT_SANDBOX: "2", RATE_LIMIT_WINDOW_SECONDS: "1" });
    try {
      const url = await limited.app.http.listen({ port: 0, host: "127.0.0.1" });
      const ws = await createWorkspace(limited);
      const statuses: number[] = [];
      const watching: typeof fetch = async (input, init) => {
        const res = await fetch(input, init);
        statuses.push(res.status);
        return res;
      };
      const sdk = new PaymentsClient({ apiKey: ws.testKey, baseUrl: url, fetch: watching });
      const started = Date.now();
      for (let i = 0; i < 3; i++) await sdk.payments.list({ limit: 1 });
      expect(statuses).toContain(429);
      expect(statuses.at(-1)).toBe(200);
      expect(Date.now() - started).toBeGreaterThanOrEqual(500);
    } finally {
      await limited.close();
    }
  });

  it("answers errors as typed errors with the body's fields", async () => {
    const wrong = new PaymentsClient({ apiKey: "svc_test_nope", baseUrl });
    await expect(wrong.payments.list()).rejects.toBeInstanceOf(AuthenticationError);
    const missing = await client.payments
      .get("00000000-0000-4000-8000-000000000000")
      .catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(NotFoundError);
    expect(missing).toMatchObject({ status: 404 });
    const bad = await client.payouts
      .create({ tokenSymbol: "USDC", amount: "1000000", destinationAddress: DESTINATION })
      .catch((e: unknown) => e);
    expect(bad).toMatchObject({ status: 400 });
    expect((bad as BadRequestError).context).toHaveProperty("available");
  });

  it("gives up at the call's timeout, and stops at the caller's abort", async () => {
    // Never answers: only the request's signal ends it.
    const slow: typeof fetch = (input) =>
      new Promise((_resolve, reject) => {
        const { signal } = input as Request;
        signal.addEventListener("abort", () => reject(signal.reason));
      });
    const never = new PaymentsClient({ apiKey: "svc_test_x", baseUrl, fetch: slow, timeoutMs: 50 });
    await expect(never.payments.list()).rejects.toBeInstanceOf(PaymentsTimeoutError);
    const controller = new AbortController();
    const pending = never.payments.list({}, { signal: controller.signal, timeoutMs: 10_000 });
    controller.abort(new Error("caller stopped"));
    await expect(pending).rejects.toThrow("caller stopped");
  });

  it("walks 250 payments newest first with the paged iterator", async () => {
    // A rate limit above the 250 creates of this test.
    const roomy = await startTestApp({ RATE_LIMIT_SANDBOX: "1000" });
    const ws = await createWorkspace(roomy);
    const sdk = new PaymentsClient({
      apiKey: ws.testKey,
      baseUrl: await roomy.app.http.listen({ port: 0, host: "127.0.0.1" }),
    });
    const made: string[] = [];
    for (let i = 0; i < 250; i++)
      made.push((await sdk.payments.create({ tokenSymbol: "USDC", amount: "1" })).payment.id);
    const walked: string[] = [];
    for await (const payment of sdk.payments.iterate()) walked.push(payment.id);
    expect(walked).toHaveLength(250);
    expect(new Set(walked)).toEqual(new Set(made));
    expect(walked[0]).toBe(made.at(-1));
    await roomy.close();
  }, 120_000);
});
