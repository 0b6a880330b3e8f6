import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createWorkspace, startTestApp, type TestApp } from "../support/app.ts";
import {
  E6,
  E18,
  type Json,
  key,
  ok,
  Pools,
  quoteUrl,
  refused,
  sandboxSwaps,
  TX,
  text,
  tick,
  USDC_ETH,
  UUID,
} from "../support/swap-pools.ts";

// Executing a sandbox swap quote (D16) through the HTTP API: from the smart wallet, re-quoting
// against the slippage limits, an expired or unknown quote, Idempotency-Key, a quote executed once,
// and a swap past the balance. The pools' formula (test/support/swap-pools.ts), the quotes and
// swaps against it, per-workspace pools and the request validation are in
// test/swaps/sandbox.test.ts.

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" });
});
afterEach(() => t.setNow(undefined));
afterAll(async () => t?.close());
const { call, swapOf, fund, ledger, events, snapshot, quoteChecked } = sandboxSwaps(() => t);

describe("executing a quote", () => {
  it("swaps from the sandbox smart wallet: its address, its ledger, a userOpHash", async () => {
    const ws = await createWorkspace(t);
    const query = { sellToken: "USDC", buyToken: "ETH", sellAmount: "1", walletType: "smart_wallet" };
    refused(await call("GET", ws.testKey, quoteUrl(query)), 400, {
      error: "No smart wallet for this workspace: create one with POST /api/v1/workspaces/{id}/smart-wallet",
    });
    const created = ok(await call("POST", ws.testKey, `/api/v1/workspaces/${ws.id}/smart-wallet`), 201);
    const smartWallet = (created.smartWallet as Json).address as string;
    await fund(ws, "USDC", "500", "smart_wallet");
    const pools = new Pools();
    const { quote, e } = await quoteChecked(ws, pools, { ...USDC_ETH, amount: "300", smartWallet });
    const swap = ok(await swapOf(ws, { quoteId: quote.quoteId }));
    expect(swap).toMatchObject({ status: "completed", walletType: "smart_wallet", fromAddress: smartWallet });
    expect(swap).toMatchObject({ buyAmount: quote.buyAmount, userOpHash: expect.stringMatching(TX) });
    expect(await events(ws, "swap.completed")).toEqual([swap]);
    expect([await ledger(smartWallet, "USDC"), await ledger(smartWallet, "ETH")]).toEqual([
      200n * E6,
      e.bought,
    ]);
    expect([await ledger(ws.eoaAddress, "USDC"), await ledger(ws.eoaAddress, "ETH")]).toEqual([0n, 0n]);
    // The quote's parameters instead of a quoteId (docs/swaps.md's example): quoted and executed at once.
    pools.apply("USDC", "ETH", e.sold, e.bought);
    const back = pools.expect("ETH", "USDC", "exact_in", E18 / 20n);
    const body = { sellToken: "ETH", buyToken: "USDC", sellAmount: "0.05", walletType: "smart_wallet" };
    const direct = ok(await swapOf(ws, body));
    expect(direct).toMatchObject({
      quoteId: expect.stringMatching(UUID),
      buyAmount: text(back.bought, "USDC"),
    });
    expect(direct).toMatchObject({ fromAddress: smartWallet, userOpHash: expect.stringMatching(TX) });
    expect(await ledger(smartWallet, "ETH")).toBe(e.bought - E18 / 20n);
  });

  it("re-quotes: past the slippage → 409 and nothing moves; within it, at the fresh amounts", async () => {
    const ws = await createWorkspace(t);
    await fund(ws, "USDC", "100000");
    const [pools, now] = [new Pools(), tick()];
    const exactIn = await quoteChecked(ws, pools, { ...USDC_ETH, amount: "1000" }, now);
    const exactOut = await quoteChecked(
      ws,
      pools,
      { ...USDC_ETH, side: "exact_out", amount: "0.5", bps: 100 },
      now,
    );
    const loose = await quoteChecked(ws, pools, { ...USDC_ETH, amount: "1000", bps: 1000 }, now);
    // A swap of the same workspace moves its own pool: 20,000 USDC raise the price of ETH by ~2.7 %.
    const mover = pools.expect("USDC", "ETH", "exact_in", 20_000n * E6);
    const moved = ok(await swapOf(ws, { sellToken: "USDC", buyToken: "ETH", sellAmount: "20000" }));
    expect(moved.buyAmount).toBe(text(mover.bought, "ETH"));
    pools.apply("USDC", "ETH", mover.sold, mover.bought);
    const before = await snapshot(ws);
    const freshIn = pools.expect("USDC", "ETH", "exact_in", 1000n * E6);
    expect(freshIn.bought).toBeLessThan(exactIn.e.minBuy);
    refused(await swapOf(ws, { quoteId: exactIn.quote.quoteId }), 409, {
      error: "Price moved beyond slippage",
      minBuyAmount: exactIn.quote.minBuyAmount,
      buyAmount: text(freshIn.bought, "ETH"),
    });
    const freshOut = pools.expect("USDC", "ETH", "exact_out", E18 / 2n, 100);
    expect(freshOut.sold).toBeGreaterThan(exactOut.e.maxSell);
    refused(await swapOf(ws, { quoteId: exactOut.quote.quoteId }), 409, {
      error: "Price moved beyond slippage",
      ...{ minBuyAmount: "0.50", buyAmount: "0.50", maxSellAmount: exactOut.quote.maxSellAmount },
      sellAmount: text(freshOut.sold, "USDC"),
    });
    expect(await snapshot(ws)).toEqual(before);
    const fresh = pools.expect("USDC", "ETH", "exact_in", 1000n * E6, 1000);
    const swap = ok(await swapOf(ws, { quoteId: loose.quote.quoteId }));
    expect(swap).toMatchObject({ sellAmount: "1000.00", buyAmount: text(fresh.bought, "ETH") });
    expect(swap.minBuyAmount).toBe(loose.quote.minBuyAmount);
    expect(fresh.bought).toBeLessThan(loose.e.bought);
  });

  it("refuses an expired quote (400), an unknown quote (404), an unknown swap (404)", async () => {
    const ws = await createWorkspace(t);
    await fund(ws, "USDC", "100");
    const pools = new Pools();
    const late = await quoteChecked(ws, pools, { ...USDC_ETH, amount: "10" });
    t.setNow(new Date(late.now.getTime() + 30_000));
    refused(await swapOf(ws, { quoteId: late.quote.quoteId }), 400, {
      error: "Quote expired",
      quoteId: late.quote.quoteId,
    });
    // Less than 5 s left counts as expired: the expiry is the swap's deadline on chain.
    const tooLate = await quoteChecked(ws, pools, { ...USDC_ETH, amount: "10" });
    t.setNow(new Date(tooLate.now.getTime() + 25_001));
    refused(await swapOf(ws, { quoteId: tooLate.quote.quoteId }), 400, {
      error: "Quote expired",
      quoteId: tooLate.quote.quoteId,
    });
    const inTime = await quoteChecked(ws, pools, { ...USDC_ETH, amount: "10" });
    t.setNow(new Date(inTime.now.getTime() + 25_000));
    expect(ok(await swapOf(ws, { quoteId: inTime.quote.quoteId })).status).toBe("completed");
    refused(await swapOf(ws, { quoteId: randomUUID() }), 404, { error: "Quote not found" });
    for (const id of [randomUUID(), "not-a-uuid", inTime.quote.quoteId]) {
      refused(await call("GET", ws.testKey, `/api/v1/swaps/${id}`), 404, { error: "Swap not found" });
    }
  });

  it("honours Idempotency-Key (header or body): a replay answers the same swap; another request → 409", async () => {
    const ws = await createWorkspace(t);
    await fund(ws, "USDC", "1000");
    const [pools, now] = [new Pools(), tick()];
    const { quote, e } = await quoteChecked(ws, pools, { ...USDC_ETH, amount: "10" }, now);
    pools.apply("USDC", "ETH", e.sold, e.bought);
    const first = await swapOf(ws, { quoteId: quote.quoteId }, key("rebalance-1"));
    expect(first.headers["idempotent-replayed"]).toBeUndefined();
    const again = await swapOf(ws, { quoteId: quote.quoteId }, key("rebalance-1"));
    expect(again.headers["idempotent-replayed"]).toBe("true");
    expect(ok(again)).toEqual(ok(first));
    const other = await quoteChecked(ws, pools, { ...USDC_ETH, amount: "10" }, now);
    refused(await swapOf(ws, { quoteId: other.quote.quoteId }, key("rebalance-1")), 409, {
      error: "Idempotency key already used",
      swap: first.json(),
    });
    const body = { sellToken: "USDC", buyToken: "ETH", sellAmount: "5", idempotencyKey: "rebalance-2" };
    const byBody = ok(await swapOf(ws, body));
    const replay = await swapOf(ws, body);
    expect(replay.headers["idempotent-replayed"]).toBe("true");
    expect(ok(replay)).toEqual(byBody);
    expect(await ledger(ws.eoaAddress, "USDC")).toBe(985n * E6);
    expect(await events(ws, "swap.completed")).toEqual([first.json(), byBody]);
  });

  it("executes a quote once: a second POST without its key → 409 Quote already executed", async () => {
    const ws = await createWorkspace(t);
    await fund(ws, "USDC", "100");
    const { quote } = await quoteChecked(ws, new Pools(), { ...USDC_ETH, amount: "10" });
    const swap = ok(await swapOf(ws, { quoteId: quote.quoteId }));
    const before = await snapshot(ws);
    for (const headers of [{}, key("another-key")]) {
      const error = { error: "Quote already executed", quoteId: quote.quoteId };
      refused(await swapOf(ws, { quoteId: quote.quoteId }, headers), 409, error);
    }
    expect(await snapshot(ws)).toEqual(before);
    expect(ok(await call("GET", ws.testKey, "/api/v1/swaps")).swaps).toEqual([swap]);
  });

  it("refuses a swap past the balance (400 Insufficient balance), changing nothing; the quote stays usable", async () => {
    const ws = await createWorkspace(t);
    await fund(ws, "USDC", "100");
    const pools = new Pools();
    const { quote } = await quoteChecked(ws, pools, { ...USDC_ETH, amount: "100.000001" });
    const before = await snapshot(ws);
    refused(await swapOf(ws, { quoteId: quote.quoteId }), 400, {
      ...{
        error: "Insufficient balance",
        available: "100.00",
        requested: "100.000001",
        tokenSymbol: "USDC",
        network: "sandbox-a",
      },
    });
    const ethIn = pools.expect("ETH", "USDC", "exact_out", 10n * E6);
    refused(await swapOf(ws, { sellToken: "ETH", buyToken: "USDC", buyAmount: "10" }), 400, {
      ...{
        error: "Insufficient balance",
        available: "0.00",
        requested: text(ethIn.sold, "ETH"),
        tokenSymbol: "ETH",
        network: "sandbox-a",
      },
    });
    expect(await snapshot(ws)).toEqual(before);
    expect(before).toMatchObject({ reserves: {}, swaps: 0, payouts: 0 });
    await fund(ws, "USDC", "0.000001");
    expect(ok(await swapOf(ws, { quoteId: quote.quoteId }))).toMatchObject({
      status: "completed",
      buyAmount: quote.buyAmount,
    });
    expect(await ledger(ws.eoaAddress, "USDC")).toBe(0n);
  });
});
