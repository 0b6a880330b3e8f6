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
  TOKENS,
  type Token,
  type Trade,
  TX,
  text,
  tick,
  USDC_ETH,
  UUID,
} from "../support/swap-pools.ts";

// Sandbox swaps (D16) through the HTTP API, against the documented constant-product pools
// (docs/swaps.md) recomputed in test/support/swap-pools.ts with Uniswap v2's own formulas: quotes,
// ledger balances, pool reserves, the swap object and its event, per-workspace pools, and the
// request validation, No liquidity and live-key refusals. Executing a quote (the smart wallet,
// re-quoting against the slippage limits, expiry, idempotency, a quote executed once, the balance)
// is in test/swaps/sandbox-execution.test.ts.

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" });
});
afterEach(() => t.setNow(undefined));
afterAll(async () => t?.close());
const { db, call, swapOf, fund, ledger, reservesOf, events, quoteChecked } = sandboxSwaps(() => t);

describe("sandbox pools: quotes and swaps against the constant-product formula", () => {
  const TRADES: Trade[] = [
    { ...USDC_ETH, amount: "3000" },
    { ...USDC_ETH, amount: "45000.5", bps: 137 },
    { sell: "ETH", buy: "USDC", side: "exact_in", amount: "1.234567890123456789", bps: 0 },
    { ...USDC_ETH, side: "exact_out", amount: "0.75", bps: 1000 },
    { sell: "ETH", buy: "USDC", side: "exact_out", amount: "2500.25", bps: 33 },
    { sell: "USDC", buy: "DAI", side: "exact_in", amount: "10000" },
    { sell: "DAI", buy: "USDC", side: "exact_in", amount: "4999.999999999999999999", bps: 1 },
    { sell: "USDC", buy: "DAI", side: "exact_out", amount: "1234.000000000000000001", bps: 999 },
    { sell: "DAI", buy: "USDC", side: "exact_out", amount: "777.77" },
    { sell: "USDC", buy: "ADAO", side: "exact_in", amount: "2500" },
    { sell: "USDC", buy: "ADAO", side: "exact_out", amount: "1000", bps: 250 },
    { sell: "ADAO", buy: "USDC", side: "exact_in", amount: "1500.5" },
    { sell: "ADAO", buy: "USDC", side: "exact_out", amount: "99.99" },
  ];

  it("quotes, executes and moves the ledger and the reserves exactly, swap after swap", async () => {
    const ws = await createWorkspace(t);
    const pools = new Pools();
    await fund(ws, "USDC", "200000");
    await fund(ws, "ETH", "20");
    await fund(ws, "ADAO", "5000");
    const wallet = { USDC: 200_000n * E6, ETH: 20n * E18, DAI: 0n, ADAO: 5000n * E18 };
    const swaps: Json[] = [];
    const totals = new Map<
      string,
      { sellToken: Token; buyToken: Token; count: number; sold: bigint; bought: bigint }
    >();
    for (const [i, trade] of TRADES.entries()) {
      const label = `${i}: ${JSON.stringify(trade)}`;
      const { quote, e, now, pool } = await quoteChecked(
        ws,
        pools,
        trade,
        tick(),
        i % 2 ? "/swap/quote" : undefined,
      );
      const poolBefore = await ledger(pool, trade.sell);
      const at = new Date(now.getTime() + 1000).toISOString();
      t.setNow(new Date(at));
      const swap = ok(await swapOf(ws, { quoteId: quote.quoteId }, {}, i % 2 ? "/swap" : "/api/v1/swap"));
      const { quoteId, side, sellToken, buyToken, sellAmount, buyAmount, minBuyAmount, maxSellAmount } =
        quote;
      expect(swap, label).toEqual({
        ...{ quoteId, side, sellToken, buyToken, sellAmount, buyAmount, minBuyAmount, maxSellAmount },
        swapId: expect.stringMatching(UUID),
        status: "completed",
        network: "sandbox-a",
        slippageBps: trade.bps ?? 50,
        walletType: "eoa",
        fromAddress: ws.eoaAddress,
        txHash: expect.stringMatching(TX),
        createdAt: at,
        completedAt: at,
      });
      swaps.push(swap);
      pools.apply(trade.sell, trade.buy, e.sold, e.bought);
      wallet[trade.sell] -= e.sold;
      wallet[trade.buy] += e.bought;
      for (const token of TOKENS)
        expect(await ledger(ws.eoaAddress, token), `${label} ${token}`).toBe(wallet[token]);
      expect(await ledger(pool, trade.sell), label).toBe(poolBefore + e.sold);
      const other = trade.sell === "USDC" ? trade.buy : trade.sell;
      expect((await reservesOf(ws))[`USDC/${other}`], label).toEqual(pools.reserves.get(other));
      const pair = `${trade.sell}>${trade.buy}`;
      const total = totals.get(pair) ?? {
        sellToken: trade.sell,
        buyToken: trade.buy,
        count: 0,
        sold: 0n,
        bought: 0n,
      };
      totals.set(pair, {
        ...total,
        count: total.count + 1,
        sold: total.sold + e.sold,
        bought: total.bought + e.bought,
      });
    }

    const balance = ok(await call("GET", ws.testKey, "/api/v1/wallet/balance"));
    const balances = Object.fromEntries(TOKENS.map((k) => [k, text(wallet[k], k)]));
    expect(balance.eoa).toEqual({ address: ws.eoaAddress, balances });
    const stats = ok(await call("GET", ws.testKey, "/api/v1/wallet/stats"));
    const perPair = [...totals.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, v]) => v);
    expect(stats.swaps).toEqual(
      perPair.map((v) => ({ ...v, sold: text(v.sold, v.sellToken), bought: text(v.bought, v.buyToken) })),
    );
    // Swaps are not payouts (docs/swaps.md).
    expect(stats.payouts).toEqual([]);
    expect(ok(await call("GET", ws.testKey, "/api/v1/payouts")).total).toBe(0);
    // One swap.completed per swap, its data the swap object as POST answered it.
    expect(await events(ws, "swap.completed")).toEqual(swaps);
    expect(await events(ws, "swap.failed")).toEqual([]);

    // Newest first, paged; each swap by id as POST answered it.
    const newest = [...swaps].reverse();
    for (const [limit = 0, offset = 0] of ["5,0", "5,5", "5,10", "50,13", "1,12"].map((x) =>
      x.split(",").map(Number),
    )) {
      const page = ok(await call("GET", ws.testKey, `/api/v1/swaps?limit=${limit}&offset=${offset}`));
      expect(page).toEqual({ swaps: newest.slice(offset, offset + limit), total: 13, limit, offset });
    }
    for (const swap of swaps)
      expect(ok(await call("GET", ws.testKey, `/api/v1/swaps/${swap.swapId}`))).toEqual(swap);
  });

  it("keeps one set of pools per workspace: a swap in A changes neither B's quote nor B's reserves", async () => {
    const [a, b] = [await createWorkspace(t), await createWorkspace(t)];
    await fund(a, "USDC", "60000");
    const poolsA = new Pools();
    const first = await quoteChecked(a, poolsA, { ...USDC_ETH, amount: "60000" });
    const swap = ok(await swapOf(a, { quoteId: first.quote.quoteId }));
    poolsA.apply("USDC", "ETH", first.e.sold, first.e.bought);
    const second = await quoteChecked(a, poolsA, { ...USDC_ETH, amount: "300" });
    const ofB = await quoteChecked(b, new Pools(), { ...USDC_ETH, amount: "300" });
    expect(ofB.quote.buyAmount).toBe("0.099680123783317606"); // docs/swaps.md's example
    expect(ofB.pool).not.toBe(first.pool);
    expect(await reservesOf(b)).toEqual({});
    expect(await reservesOf(a)).toEqual({ "USDC/ETH": poolsA.reserves.get("ETH") });
    // Neither A's swap nor A's quote is B's.
    refused(await call("GET", b.testKey, `/api/v1/swaps/${swap.swapId}`), 404, { error: "Swap not found" });
    expect(ok(await call("GET", b.testKey, "/api/v1/swaps"))).toEqual({
      swaps: [],
      total: 0,
      limit: 50,
      offset: 0,
    });
    refused(await swapOf(b, { quoteId: second.quote.quoteId }), 404, { error: "Quote not found" });
  });
});

describe("the swap's rules, through the HTTP API", () => {
  it("answers each validation message of D16 as a 400 {error}, and records no quote or swap", async () => {
    const ws = await createWorkspace(t);
    const amount = "sellAmount must be a positive number with at most 6 decimals for USDC";
    const slippage = "slippageBps must be an integer from 0 to 1000";
    // One request per line: the query string (after "?") or the JSON body, " → ", the message.
    const QUERIES = `
      ? → Missing required fields: sellToken, buyToken
      ?sellToken=&buyToken=ETH&sellAmount=1 → Missing required fields: sellToken
      ?sellToken=USDC&buyToken=ETH&sellToken=DAI&sellAmount=1 → sellToken must be given once
      ?sellToken=USDC&buyToken=ETH&sellAmount=1&sellAmount=2 → sellAmount must be given once
      ?sellToken=BTC&buyToken=ETH&sellAmount=1 → Invalid sellToken: use ETH, USDC, ADAO or DAI
      ?sellToken=USD&buyToken=ETH&sellAmount=1 → Invalid sellToken: use ETH, USDC, ADAO or DAI
      ?sellToken=USDC&buyToken=usdc&sellAmount=1 → Invalid buyToken: use ETH, USDC, ADAO or DAI
      ?sellToken=USDC&buyToken=USDC&sellAmount=1 → sellToken and buyToken must differ
      ?sellToken=USDC&buyToken=ETH → Give exactly one of sellAmount and buyAmount
      ?sellToken=USDC&buyToken=ETH&sellAmount=1&buyAmount=1 → Give exactly one of sellAmount and buyAmount
      ?sellToken=USDC&buyToken=ETH&buyAmount=0.0000000000000000001 → buyAmount must be a positive number with at most 18 decimals for ETH
      ?sellToken=DAI&buyToken=USDC&buyAmount=1.5000001 → buyAmount must be a positive number with at most 6 decimals for USDC
      ?sellToken=USDC&buyToken=ETH&sellAmount=1&walletType=smart → Invalid walletType: use eoa or smart_wallet
      {"quoteId": "abc"} → Invalid quoteId
      {"quoteId": 7} → Invalid quoteId
      {"quoteId": "${randomUUID()}", "sellToken": "USDC"} → Give either quoteId or the quote's parameters, not both
      {"quoteId": "${randomUUID()}", "slippageBps": 5} → Give either quoteId or the quote's parameters, not both
      {} → Give quoteId or the quote's parameters: sellToken, buyToken and sellAmount or buyAmount
      {"quoteId": null, "idempotencyKey": "k"} → Give quoteId or the quote's parameters: sellToken, buyToken and sellAmount or buyAmount
      [] → Request body must be a JSON object
      [{"quoteId": "${randomUUID()}"}] → Request body must be a JSON object
      {"buyToken": "ETH", "sellAmount": "1"} → Missing required fields: sellToken
      {"sellToken": "WETH", "buyToken": "ETH", "sellAmount": "1"} → Invalid sellToken: use ETH, USDC, ADAO or DAI
      {"sellToken": "ETH", "buyToken": "ETH", "sellAmount": "1"} → sellToken and buyToken must differ
      {"sellToken": "USDC", "buyToken": "ETH", "sellAmount": "1", "buyAmount": "1"} → Give exactly one of sellAmount and buyAmount
      {"sellToken": "USDC", "buyToken": "ETH", "sellAmount": 1} → ${amount}
      {"sellToken": "USDC", "buyToken": "ETH", "sellAmount": "1", "slippageBps": 50.5} → ${slippage}
      {"sellToken": "USDC", "buyToken": "ETH", "sellAmount": "1", "slippageBps": "1001"} → ${slippage}
      {"sellToken": "USDC", "buyToken": "ETH", "sellAmount": "1", "walletType": "EOA"} → Invalid walletType: use eoa or smart_wallet
      {"sellToken": "USDC", "buyToken": "ETH", "sellAmount": "1", "idempotencyKey": ""} → idempotencyKey must be a string of 1 to 255 characters
      {"quoteId": "${randomUUID()}", "idempotencyKey": 5} → idempotencyKey must be a string of 1 to 255 characters`;
    const cases = QUERIES.trim()
      .split("\n")
      .map((line) => line.trim().split(" → ") as [string, string]);
    for (const v of ["0", "", "-1", "1.0000001", "1e3", "0x10", " 1"]) {
      cases.push([`?sellToken=USDC&buyToken=ETH&sellAmount=${encodeURIComponent(v)}`, amount]);
    }
    for (const v of ["1001", "-1", "1.5", "abc", "", "10000"]) {
      cases.push([`?sellToken=USDC&buyToken=ETH&sellAmount=1&slippageBps=${v}`, slippage]);
    }
    for (const [i, [request, error]] of cases.entries()) {
      const res = request.startsWith("?")
        ? await call("GET", ws.testKey, `${i % 2 ? "/swap/quote" : "/api/v1/swap/quote"}${request}`)
        : await swapOf(ws, JSON.parse(request), {}, i % 2 ? "/swap" : "/api/v1/swap");
      refused(res, 400, { error });
    }
    const p = { sellToken: "USDC", buyToken: "ETH", sellAmount: "1" };
    refused(await swapOf(ws, { ...p, idempotencyKey: "k".repeat(256) }), 400, {
      error: "idempotencyKey must be a string of 1 to 255 characters",
    });
    const longKey = key("k".repeat(256));
    refused(await swapOf(ws, p, longKey), 400, { error: "Idempotency-Key must be 1 to 255 characters" });
    for (const table of ["swap_quotes", "swaps", "sandbox_swap_pools"] as const) {
      expect(
        await db().selectFrom(table).selectAll().where("workspace_id", "=", ws.id).execute(),
        table,
      ).toEqual([]);
    }
  });

  it("answers 400 No liquidity for a pair no pool holds, and for an amount past the reserves", async () => {
    const ws = await createWorkspace(t);
    await fund(ws, "ETH", "1");
    const NONE = { error: "No liquidity for this pair" };
    for (const query of [
      "sellToken=ETH&buyToken=DAI&sellAmount=1",
      "sellToken=DAI&buyToken=ADAO&buyAmount=1",
      "sellToken=ADAO&buyToken=ETH&sellAmount=1",
      "sellToken=USDC&buyToken=ETH&buyAmount=500",
      "sellToken=ETH&buyToken=USDC&buyAmount=1500000.000001",
      // 1 wei of ETH is worth 0.000000000003 USDC: not one smallest unit.
      "sellToken=ETH&buyToken=USDC&sellAmount=0.000000000000000001",
    ]) {
      refused(await call("GET", ws.testKey, `/api/v1/swap/quote?${query}`), 400, NONE);
    }
    refused(await swapOf(ws, { sellToken: "ETH", buyToken: "DAI", sellAmount: "0.5" }), 400, NONE);
    expect(await ledger(ws.eoaAddress, "ETH")).toBe(E18);
    // All of a pool but one smallest unit is still quoted.
    await quoteChecked(ws, new Pools(), { ...USDC_ETH, side: "exact_out", amount: "499.999999999999999999" });
  });

  it("answers a live key with a clear 503 while Uniswap is not configured for live", async () => {
    const ws = await createWorkspace(t);
    const error = `Swaps are not configured for live: set ${["ROUTER", "QUOTER", "FACTORY"].map((c) => `LIVE_SWAP_${c}_ADDRESS`).join(", ")} and LIVE_WETH_ADDRESS`;
    const q = quoteUrl({ sellToken: "USDC", buyToken: "ETH", sellAmount: "1" });
    refused(await call("GET", ws.liveKey, q), 503, { error });
    refused(
      await call("POST", ws.liveKey, "/swap", { sellToken: "USDC", buyToken: "ETH", sellAmount: "1" }),
      503,
      { error },
    );
    refused(await call("POST", ws.liveKey, "/api/v1/swap", { quoteId: randomUUID() }), 503, { error });
    expect(ok(await call("GET", ws.liveKey, "/api/v1/swaps"))).toEqual({
      swaps: [],
      total: 0,
      limit: 50,
      offset: 0,
    });
  });
});
