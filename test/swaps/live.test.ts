import { type Address, decodeFunctionData, type Hex, isAddressEqual, parseUnits } from "viem";
import { entryPoint08Abi } from "viem/account-abstraction";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Devnet, moveSwapPool, startDevnet } from "../../src/devnet/chain.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { type DevnetClients, devnetClients } from "../support/devnet-clients.ts";
import { liveNetworkEnv, liveSmartWalletEnv } from "../support/devnet-env.ts";
import {
  createSmartWallet,
  expectExactSwap,
  expectNothingSent,
  listSwaps,
  liveSwapEnv,
  type Measured,
  measure,
  postSwap,
  type QuoteParams,
  quoteSwap,
  requestQuote,
  SwapChain,
  type SwapQuote,
  type SwapResult,
  type SwapToken,
  swapEvents,
  swapTotals,
  units,
} from "../support/swaps.ts";

// Live swaps (D16) on a devnet with Uniswap v3 and ERC-4337: every swap is checked against the
// chain — the wallet's balances at the block before and after move by exactly the reported amounts
// (an EOA's ETH also by the gas of its own transactions), which are the pool's Swap event's — and
// every refusal (slippage, expiry, balance) is checked to have sent and recorded nothing.

let devnet: Devnet;
let t: TestApp;
let clients: DevnetClients;
let sc: SwapChain;

beforeAll(async () => {
  devnet = await startDevnet({ accountAbstraction: true, swaps: true });
  if (!devnet.aa) throw new Error("startDevnet returned no account abstraction");
  t = await startTestApp(
    liveSmartWalletEnv(devnet, devnet.aa, { LIVE_GAS_TOPUP_THRESHOLD_WEI: "0", ...liveSwapEnv(devnet) }),
  );
  clients = devnetClients(devnet);
  sc = new SwapChain(clients.chain, devnet);
}, 180_000);

afterAll(async () => {
  await t?.close();
  await devnet?.stop();
});

async function fundedWorkspace(amounts: { USDC?: string; ETH?: string }): Promise<CreatedWorkspace> {
  const ws = await createWorkspace(t);
  await clients.credit(ws.eoaAddress, amounts);
  return ws;
}

const tokensOf = (q: Pick<QuoteParams, "sellToken" | "buyToken">): SwapToken[] => [
  ...new Set<SwapToken>([q.sellToken, q.buyToken, "ETH"]),
];

const USDC_ETH = { sellToken: "USDC", buyToken: "ETH" } as const;
const ETH_USDC = { sellToken: "ETH", buyToken: "USDC" } as const;

/** POSTs `quote` (with an Idempotency-Key if given), watching its wallet on chain. */
const execute = (ws: CreatedWorkspace, quote: SwapQuote, key?: string) =>
  measure(sc, quote.fromAddress, tokensOf(quote), () =>
    postSwap(t, ws.liveKey, { quoteId: quote.quoteId }, key),
  );

/** Quotes `params` from `wallet`, executes the quote and checks it against the chain. */
async function swapExactly(ws: CreatedWorkspace, wallet: string, params: QuoteParams) {
  const quote = await quoteSwap(t, ws.liveKey, params);
  expect(quote.fromAddress).toBe(wallet);
  const m = await execute(ws, quote);
  return { quote, m, ...(await expectExactSwap(sc, m, quote)) };
}

const walletStats = async (ws: CreatedWorkspace) =>
  (await t.request({ method: "GET", url: "/api/v1/wallet/stats", headers: bearer(ws.liveKey) })).json();

/** An EOA's swap: its transactions are an approval when the allowance was short, then the swap. */
async function eoaSwap(ws: CreatedWorkspace, params: QuoteParams) {
  const sell = params.sellToken;
  const allowance = sell === "ETH" ? null : await sc.allowance(sell, ws.eoaAddress);
  const done = await swapExactly(ws, ws.eoaAddress, params);
  const { quote, m, swap, sold } = done;
  const maxSell = units(sell, quote.maxSellAmount);
  const approves = allowance !== null && allowance < maxSell;
  expect(m.transactions.map((tx) => tx.nonce)).toEqual(
    approves ? [m.nonceBefore, m.nonceBefore + 1] : [m.nonceBefore],
  );
  expect(m.nonceAfter).toBe(m.nonceBefore + m.transactions.length);
  const [first, last] = [m.transactions[0], m.transactions.at(-1)];
  expect(last).toMatchObject({ hash: swap.txHash, to: sc.router, status: "success" });
  if (approves && first) {
    expect(first).toMatchObject({ to: sc.tokenAddress(sell), status: "success" });
    const receipt = await sc.chain.getTransactionReceipt({ hash: first.hash });
    expect(sc.approvals(receipt.logs, sell, ws.eoaAddress)).toEqual([maxSell]);
  }
  if (allowance !== null && sell !== "ETH") {
    const left = (approves ? maxSell : allowance) - sold;
    expect(await sc.allowance(sell, ws.eoaAddress)).toBe(left);
  }
  const tx = await sc.chain.getTransaction({ hash: swap.txHash as Hex });
  expect(tx.value).toBe(sell === "ETH" ? maxSell : 0n);
  return done;
}

describe("live swaps from the workspace EOA", () => {
  it("exact input USDC → ETH: an exact approval, then the swap; a second swap approves again", async () => {
    const ws = await fundedWorkspace({ USDC: "1000", ETH: "1" });
    for (const sellAmount of ["300", "200"]) {
      const { quote, m } = await eoaSwap(ws, { sellToken: "USDC", buyToken: "ETH", sellAmount });
      expect(quote).toMatchObject({ side: "exact_in", walletType: "eoa", slippageBps: 50 });
      expect(quote.route).toEqual([
        { protocol: "uniswap-v3", pool: sc.pool("USDC", "ETH").address, fee: 3000 },
      ]);
      expect(units("USDC", quote.sellAmount)).toBe(parseUnits(sellAmount, 6));
      expect(units("ETH", quote.minBuyAmount)).toBe((units("ETH", quote.buyAmount) * 9950n) / 10000n);
      expect(BigInt(quote.gasEstimate)).toBeGreaterThan(0n);
      // Approvals are exact: the previous one was used up, so each swap sends two transactions.
      expect(m.transactions).toHaveLength(2);
      expect(m.gas).toBeGreaterThan(0n);
    }
  });

  it("exact input ETH → USDC: one transaction, the ETH sent as its value; ETH falls by sold + gas", async () => {
    const ws = await fundedWorkspace({ ETH: "1" });
    const { m, sold } = await eoaSwap(ws, { sellToken: "ETH", buyToken: "USDC", sellAmount: "0.05" });
    expect(m.transactions).toHaveLength(1);
    expect(sold).toBe(parseUnits("0.05", 18));
  });

  it("exact output USDC → DAI: exactly the DAI asked; the approval's rest serves a later swap", async () => {
    const ws = await fundedWorkspace({ USDC: "1000", ETH: "1" });
    const params = { sellToken: "USDC", buyToken: "DAI", buyAmount: "100" } as const;
    const { quote, m, bought, sold } = await eoaSwap(ws, params);
    expect(quote).toMatchObject({ side: "exact_out", minBuyAmount: quote.buyAmount });
    expect(bought).toBe(parseUnits("100", 18));
    expect(sold).toBeLessThan(units("USDC", quote.maxSellAmount));
    expect(m.transactions).toHaveLength(2);
    const balance = await t.request({
      method: "GET",
      url: "/api/v1/wallet/balance",
      headers: bearer(ws.liveKey),
    });
    expect(balance.json().eoa.balances.DAI).toBe("100.00");
    // What the exact approval left (maxSell − sold) covers a small swap: no approval this time.
    const left = await sc.allowance("USDC", ws.eoaAddress);
    expect(left).toBe(units("USDC", quote.maxSellAmount) - sold);
    const small = await eoaSwap(ws, { ...USDC_ETH, sellAmount: "0.2" });
    expect(small.m.transactions).toHaveLength(1);
  });

  it("exact output ETH → USDC: the router refunds the unused ETH, so ETH falls by exactly sold + gas", async () => {
    const ws = await fundedWorkspace({ ETH: "1" });
    const { quote, m, bought, sold } = await eoaSwap(ws, { ...ETH_USDC, buyAmount: "10" });
    expect(bought).toBe(parseUnits("10", 6));
    expect(sold).toBeLessThan(units("ETH", quote.maxSellAmount));
    expect(m.delta.get("ETH")).toBe(-sold - m.gas);
  });
});

describe("live swaps from the smart wallet", () => {
  it("approval and swap in one sponsored user operation; balances move exactly, no gas", async () => {
    const ws = await createWorkspace(t);
    const smart = await createSmartWallet(t, ws);
    await clients.credit(smart, { USDC: "500", ETH: "0.1" });
    const cases: QuoteParams[] = [
      { sellToken: "USDC", buyToken: "ETH", sellAmount: "100" },
      { sellToken: "USDC", buyToken: "DAI", buyAmount: "50" },
      { sellToken: "ETH", buyToken: "USDC", buyAmount: "10" },
    ];
    for (const params of cases) {
      const sell = params.sellToken;
      const allowance = sell === "ETH" ? null : await sc.allowance(sell, smart);
      const eoaNonce = await sc.chain.getTransactionCount({ address: ws.eoaAddress as Address });
      const done = await swapExactly(ws, smart, { ...params, walletType: "smart_wallet" });
      const { quote, m, swap, receipt } = done;
      expect(swap).toMatchObject({ walletType: "smart_wallet", fromAddress: smart });
      expect(swap.userOpHash).toMatch(/^0x[0-9a-f]{64}$/);
      expect(m.transactions).toEqual([]);
      expect(m.gas).toBe(0n);
      expect(await sc.chain.getTransactionCount({ address: ws.eoaAddress as Address })).toBe(eoaNonce);
      const ops = sc.userOperations(receipt).filter((op) => isAddressEqual(op.sender, smart));
      expect(ops).toHaveLength(1);
      const paymaster = devnet.aa?.paymaster;
      expect(ops[0]).toMatchObject({ userOpHash: swap.userOpHash, success: true, paymaster });
      // Its call gas is the swap's own limit (at least 250,000: the quoter's figure plus the
      // router's work), not an estimate made at a price the pool may have left by inclusion.
      const bundle = await sc.chain.getTransaction({ hash: receipt.transactionHash });
      const handled = decodeFunctionData({ abi: entryPoint08Abi, data: bundle.input });
      if (handled.functionName !== "handleOps") throw new Error(`the bundle called ${handled.functionName}`);
      const op = handled.args[0].find((packed) => isAddressEqual(packed.sender, smart));
      expect(BigInt(`0x${op?.accountGasLimits.slice(34)}`)).toBeGreaterThanOrEqual(250_000n);
      const maxSell = units(sell, quote.maxSellAmount);
      const expected = allowance !== null && allowance < maxSell ? [maxSell] : [];
      expect(sell === "ETH" ? [] : sc.approvals(receipt.logs, sell, smart)).toEqual(expected);
    }
  });
});

describe("refusals: nothing is sent", () => {
  it("a price moved past the slippage → 409 with the limits and the fresh amounts", async () => {
    const ws = await fundedWorkspace({ USDC: "1000", ETH: "1" });
    const [inParams, outParams] = [
      { ...USDC_ETH, sellAmount: "100" },
      { ...USDC_ETH, buyAmount: "0.05" },
    ];
    const exactIn = await quoteSwap(t, ws.liveKey, inParams);
    const exactOut = await quoteSwap(t, ws.liveKey, outParams);
    // Someone buys ETH with 30 000 USDC: ETH gets dearer, so USDC buys less of it.
    await moveSwapPool(devnet, {
      account: devnet.accounts.deployer,
      sell: "USDC",
      buy: "ETH",
      amountIn: parseUnits("30000", 6),
    });
    const fresh = await quoteSwap(t, ws.liveKey, inParams);
    const freshOut = await quoteSwap(t, ws.liveKey, outParams);
    expect(units("ETH", fresh.buyAmount)).toBeLessThan(units("ETH", exactIn.minBuyAmount));
    expect(units("USDC", freshOut.sellAmount)).toBeGreaterThan(units("USDC", exactOut.maxSellAmount));

    const m = await execute(ws, exactIn);
    expect(m.res.statusCode, m.res.body).toBe(409);
    expect(m.res.json()).toEqual({
      error: "Price moved beyond slippage",
      minBuyAmount: exactIn.minBuyAmount,
      buyAmount: fresh.buyAmount,
    });
    await expectNothingSent(t, ws, m);

    const out = await execute(ws, exactOut);
    expect(out.res.statusCode, out.res.body).toBe(409);
    expect(out.res.json()).toEqual({
      error: "Price moved beyond slippage",
      minBuyAmount: exactOut.minBuyAmount,
      buyAmount: exactOut.buyAmount,
      maxSellAmount: exactOut.maxSellAmount,
      sellAmount: freshOut.sellAmount,
    });
    await expectNothingSent(t, ws, out);
  });

  it("an expired quote → 400 Quote expired; the quote is still good once the clock is back", async () => {
    const ws = await fundedWorkspace({ USDC: "100", ETH: "0.1" });
    const quote = await quoteSwap(t, ws.liveKey, { ...USDC_ETH, sellAmount: "10" });
    t.setNow(new Date(Date.now() + 31_000));
    let m: Measured;
    try {
      m = await execute(ws, quote);
    } finally {
      t.setNow(undefined);
    }
    expect(m.res.statusCode, m.res.body).toBe(400);
    expect(m.res.json()).toEqual({ error: "Quote expired", quoteId: quote.quoteId });
    await expectNothingSent(t, ws, m);
    await expectExactSwap(sc, await execute(ws, quote), quote);
  });

  it("more than the wallet holds → 400 Insufficient balance", async () => {
    const ws = await fundedWorkspace({ USDC: "10", ETH: "0.1" });
    const m = await execute(ws, await quoteSwap(t, ws.liveKey, { ...USDC_ETH, sellAmount: "100" }));
    expect(m.res.statusCode, m.res.body).toBe(400);
    expect(m.res.json()).toEqual({
      error: "Insufficient balance",
      available: "10.00",
      requested: "100.00",
      tokenSymbol: "USDC",
      network: "default",
    });
    await expectNothingSent(t, ws, m);
  });

  it("no pool for the pair → 400 No liquidity; no swap contracts configured → 503 naming them", async () => {
    const ws = await fundedWorkspace({});
    for (const params of [
      { sellToken: "ETH", buyToken: "DAI", sellAmount: "0.1" },
      { sellToken: "DAI", buyToken: "ADAO", buyAmount: "1" },
    ] as const) {
      const res = await requestQuote(t, ws.liveKey, params);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toEqual({ error: "No liquidity for this pair" });
    }
    const bare = await startTestApp(liveNetworkEnv(devnet));
    try {
      const other = await createWorkspace(bare);
      const params = { ...USDC_ETH, sellAmount: "1" };
      for (const res of [
        await requestQuote(bare, other.liveKey, params),
        await postSwap(bare, other.liveKey, params),
      ]) {
        expect(res.statusCode, res.body).toBe(503);
        const named = ["SWAP_ROUTER_ADDRESS", "SWAP_QUOTER_ADDRESS", "SWAP_FACTORY_ADDRESS", "WETH_ADDRESS"];
        for (const name of named) expect(res.json().error).toContain(`LIVE_${name}`);
      }
    } finally {
      await bare.close();
    }
  });
});

describe("repeats, events and stats", () => {
  it("five concurrent posts under one Idempotency-Key: one swap, executed once", async () => {
    const ws = await fundedWorkspace({ USDC: "1000", ETH: "1" });
    const quote = await quoteSwap(t, ws.liveKey, { ...USDC_ETH, sellAmount: "100" });
    const key = `swap-${quote.quoteId}`;
    const posts: Awaited<ReturnType<typeof postSwap>>[] = [];
    const m = await measure(sc, ws.eoaAddress, ["USDC", "ETH"], async () => {
      posts.push(
        ...(await Promise.all(
          Array.from({ length: 5 }, () => postSwap(t, ws.liveKey, { quoteId: quote.quoteId }, key)),
        )),
      );
      const original = posts.find((res) => res.headers["idempotent-replayed"] === undefined);
      if (!original) throw new Error("every answer says it was replayed");
      return original;
    });
    const { swap } = await expectExactSwap(sc, m, quote);
    expect(posts.map((res) => res.json<SwapResult>().swapId)).toEqual(Array(5).fill(swap.swapId));
    const replays = posts.filter((res) => res !== m.res);
    expect(replays.map((res) => res.headers["idempotent-replayed"])).toEqual(Array(4).fill("true"));
    for (const res of replays) expect([200, 202]).toContain(res.statusCode);
    expect(m.transactions).toHaveLength(2); // one approval, one swap

    const later = await postSwap(t, ws.liveKey, { quoteId: quote.quoteId }, key);
    expect(later.statusCode).toBe(200);
    expect(later.headers["idempotent-replayed"]).toBe("true");
    expect(later.json()).toEqual(swap);
    const list = await listSwaps(t, ws.liveKey);
    expect(list.swaps.map((s) => s.swapId)).toEqual([swap.swapId]);
    const completed = await swapEvents(t, ws.id, "swap.completed");
    expect(completed.map((e) => e.payload.swapId)).toEqual([swap.swapId]);

    const unkeyed = await execute(ws, quote);
    expect(unkeyed.res.statusCode, unkeyed.res.body).toBe(409);
    expect(unkeyed.res.json()).toMatchObject({ error: "Quote already executed" });
    const otherBody = await postSwap(t, ws.liveKey, { ...USDC_ETH, sellAmount: "1" }, key);
    expect(otherBody.statusCode, otherBody.body).toBe(409);
    const used = { error: "Idempotency key already used", swap: { swapId: swap.swapId } };
    expect(otherBody.json()).toMatchObject(used);
    expect(unkeyed.transactions).toEqual([]);
    expect((await listSwaps(t, ws.liveKey)).total).toBe(1);
  });

  it("a swap the router refuses on chain → 200 failed with its error, swap.failed; only gas is spent", async () => {
    const ws = await fundedWorkspace({ USDC: "100", ETH: "0.1" });
    // The quote's expiry is the router call's deadline: on an app clock 60 s behind, it has passed.
    t.setNow(new Date(Date.now() - 60_000));
    let m: Measured;
    try {
      m = await execute(ws, await quoteSwap(t, ws.liveKey, { ...USDC_ETH, sellAmount: "10" }));
    } finally {
      t.setNow(undefined);
    }
    expect(m.res.statusCode, m.res.body).toBe(200);
    const swap = m.res.json<SwapResult>();
    expect(swap).toMatchObject({ status: "failed", error: expect.stringMatching(/./) });
    expect(m.transactions.map((tx) => tx.status)).toEqual(["success", "reverted"]); // approval, swap
    expect(m.transactions[1]?.hash).toBe(swap.txHash);
    expect([m.delta.get("USDC"), m.delta.get("ETH")]).toEqual([0n, -m.gas]);
    const events = await swapEvents(t, ws.id);
    expect(events.map((e) => [e.event_type, e.payload])).toEqual([["swap.failed", swap]]);
    expect((await walletStats(ws)).swaps).toEqual([]);
  });

  it("swap.completed carries the amounts received; stats and the list add up", async () => {
    const ws = await fundedWorkspace({ USDC: "1000", ETH: "1" });
    const done: SwapResult[] = [];
    for (const params of [
      { ...USDC_ETH, sellAmount: "50" },
      { ...ETH_USDC, buyAmount: "20" },
      { ...USDC_ETH, buyAmount: "0.01" },
    ] as const) {
      done.push((await swapExactly(ws, ws.eoaAddress, params)).swap);
    }
    const list = await listSwaps(t, ws.liveKey);
    expect(list.total).toBe(3);
    expect(list.swaps).toEqual([...done].reverse());

    type PairTotal = {
      sellToken: SwapToken;
      buyToken: SwapToken;
      count: number;
      sold: string;
      bought: string;
    };
    const rows: PairTotal[] = (await walletStats(ws)).swaps;
    const inUnits = ({ sellToken: s, buyToken: b, count, sold, bought }: PairTotal) =>
      [`${s}/${b}`, { count, sold: units(s, sold), bought: units(b, bought) }] as const;
    expect(new Map(rows.map(inUnits))).toEqual(swapTotals(done));
    expect(rows).toHaveLength(swapTotals(done).size);

    const completed = await swapEvents(t, ws.id, "swap.completed");
    expect(await swapEvents(t, ws.id, "swap.failed")).toEqual([]);
    expect(completed.map((e) => e.environment)).toEqual(["live", "live", "live"]);
    const key = ({ swapId, status, txHash, sellAmount, buyAmount }: Record<string, unknown>) =>
      [swapId, status, txHash, sellAmount, buyAmount].join(" ");
    expect(completed.map((e) => key(e.payload))).toEqual(done.map((s) => key({ ...s })));
    // The event's data is the swap object (D16) as the API answers it, completedAt included.
    expect(completed.map((e) => e.payload)).toEqual(done);
  });
});
