import type { Address } from "viem";
import { type Devnet, startDevnet } from "../src/devnet/chain.ts";
import { bearer, createWorkspace, startTestApp, type TestApp } from "../test/support/app.ts";
import { devnetClients } from "../test/support/devnet-clients.ts";
import { liveSmartWalletEnv } from "../test/support/devnet-env.ts";
import {
  benchPaymaster,
  dig,
  envInt,
  type Goal,
  goalLines,
  type LatencySummary,
  QUICK,
  QUICK_NOTE,
  QUICK_TAG,
  runAsScript,
  summarize,
} from "./support.ts";

// Token swaps (D16) on the devnet's Uniswap v3 (`startDevnet({ accountAbstraction: true, swaps:
// true })`: Hardhat node with automine plus a block every second, Alto bundler, the seeded pools),
// in-process app (`startTestApp`, in-memory PGlite unless DATABASE_URL is set; requests injected,
// no socket), as bench/smart-wallet-payouts.ts runs its payouts, so the two compare.
// (a) Quote latency: `GET /api/v1/swap/quote`, sequential, after a warm-up, going round USDC→ETH
//     exact in, ETH→USDC exact in and USDC→DAI exact out. Goal: p50 < 15 ms.
// (b) Swap latency: `POST /api/v1/swap {quoteId}` until its 200, the quote fetched before the timer
//     starts, from the workspace EOA (signed transactions) and from its smart wallet (one sponsored
//     user operation; instant bundling as `npm run devnet` configures it), alternating EOA and smart
//     wallet, and USDC→ETH / ETH→USDC with small amounts so the balances last. Goal: smart wallet
//     p50 ≤ 2× the EOA's.
// A missed goal is reported, not an error; a failed request or a swap not `completed` exits 1.
//
// `node bench/swaps.ts` prints a markdown table. Environment: BENCH_SWAP_QUOTES (measured quotes,
// default 200), BENCH_SWAP_QUOTE_WARMUP (default 20), BENCH_SWAPS (measured swaps per wallet,
// default 30), BENCH_SWAP_WARMUP (per wallet, default 3). BENCH_QUICK=1: 30 quotes after 5, 4 swaps
// per wallet after 1.

const GOALS = { quoteP50Ms: 15, swapRatio: 2 };

/** A request's query string, and its name in the table. */
interface Kind {
  name: string;
  query: string;
}

/** The quotes measured, in turn. */
const QUOTE_KINDS: readonly [Kind, ...Kind[]] = [
  { name: "USDC→ETH exact in (sellAmount=100)", query: "sellToken=USDC&buyToken=ETH&sellAmount=100" },
  { name: "ETH→USDC exact in (sellAmount=0.05)", query: "sellToken=ETH&buyToken=USDC&sellAmount=0.05" },
  { name: "USDC→DAI exact out (buyAmount=100)", query: "sellToken=USDC&buyToken=DAI&buyAmount=100" },
];

/** The swaps measured, in turn: about the same value each way (1 ETH ≈ 3000 USDC in the pool). */
const SWAP_KINDS: readonly [Kind, ...Kind[]] = [
  { name: "USDC→ETH", query: "sellToken=USDC&buyToken=ETH&sellAmount=30" },
  { name: "ETH→USDC", query: "sellToken=ETH&buyToken=USDC&sellAmount=0.01" },
];

/** What each wallet starts with: far more than the swaps take (≈ 0.5 ETH and 500 USDC each way). */
const FUNDING = { USDC: "5000", ETH: "5" };

type WalletType = "eoa" | "smart_wallet";

/** The `i`-th of `list`, round and round. */
function nth<T>(list: readonly [T, ...T[]], i: number): T {
  return list[i % list.length] ?? list[0];
}

const log = (message: string) => process.stderr.write(`[bench:swaps] ${message}\n`);

export interface SwapFigures {
  quotes: {
    count: number;
    all: LatencySummary;
    byKind: { name: string; count: number; summary: LatencySummary }[];
  };
  swaps: {
    count: number;
    eoa: LatencySummary;
    smartWallet: LatencySummary;
    /** Per pair and wallet: an EOA's USDC sale is two transactions (approval, swap). */
    byKind: { name: string; count: number; eoa: LatencySummary; smartWallet: LatencySummary }[];
    /** The first smart wallet swap, which deploys the account in its user operation. */
    firstSmartWalletMs: number;
    ratioP50: number;
  };
  goals: Goal[];
}

export async function benchSwaps(): Promise<SwapFigures> {
  const quoteCount = envInt("BENCH_SWAP_QUOTES", QUICK ? 30 : 200);
  const quoteWarmup = envInt("BENCH_SWAP_QUOTE_WARMUP", QUICK ? 5 : 20);
  const swapCount = envInt("BENCH_SWAPS", QUICK ? 4 : 30);
  const swapWarmup = envInt("BENCH_SWAP_WARMUP", QUICK ? 1 : 3);
  let devnet: Devnet | undefined;
  let t: TestApp | undefined;
  try {
    log("starting the devnet with the ERC-4337 stack and Uniswap v3");
    devnet = await startDevnet({ accountAbstraction: true, swaps: true });
    const { aa, swap } = devnet;
    if (!aa || !swap)
      throw new Error("startDevnet({ accountAbstraction: true, swaps: true }) returned no aa/swap");
    // As `npm run devnet` configures it (src/devnet/env-file.ts): instant bundling, the seeded fee tiers.
    t = await startTestApp(
      liveSmartWalletEnv(
        devnet,
        aa,
        {
          LIVE_BUNDLER_INSTANT_BUNDLING: "true",
          LIVE_SWAP_ROUTER_ADDRESS: swap.router,
          LIVE_SWAP_QUOTER_ADDRESS: swap.quoter,
          LIVE_SWAP_FACTORY_ADDRESS: swap.factory,
          LIVE_WETH_ADDRESS: swap.weth,
          LIVE_SWAP_FEE_TIERS: [...new Set(swap.pools.map((p) => p.fee))].sort((a, b) => a - b).join(","),
        },
        benchPaymaster(),
      ),
    );
    const app = t;
    const ws = await createWorkspace(app);
    const headers = bearer(ws.liveKey);
    const created = await app.request({
      method: "POST",
      url: `/api/v1/workspaces/${ws.id}/smart-wallet`,
      headers,
    });
    if (created.statusCode !== 200 && created.statusCode !== 201)
      throw new Error(`smart wallet creation failed: ${created.statusCode} ${created.body}`);
    const smart = dig(created.json(), "smartWallet", "address");
    if (typeof smart !== "string")
      throw new Error(`smart wallet creation answered no address: ${created.body}`);

    log(`funding the EOA and the smart wallet with ${FUNDING.USDC} USDC and ${FUNDING.ETH} ETH each`);
    const clients = devnetClients(devnet);
    for (const address of [ws.eoaAddress, smart] as Address[]) {
      // The workspace's own money: a payer's transfer would be held in the unmatched inbox.
      await clients.credit(address, FUNDING);
    }

    const quote = async (query: string): Promise<{ ms: number; quoteId: string }> => {
      const begin = performance.now();
      const res = await app.request({ method: "GET", url: `/api/v1/swap/quote?${query}`, headers });
      const ms = performance.now() - begin;
      const quoteId = res.statusCode === 200 ? dig(res.json(), "quoteId") : undefined;
      if (typeof quoteId !== "string")
        throw new Error(`quote ${query} failed: ${res.statusCode} ${res.body}`);
      return { ms, quoteId };
    };

    // (a) Quotes
    log(`${quoteWarmup} warm-up quotes, then ${quoteCount} measured, one after the other`);
    for (let i = 0; i < quoteWarmup; i++) await quote(nth(QUOTE_KINDS, i).query);
    const quoteTimes: number[] = [];
    const quoteTimesByKind: number[][] = QUOTE_KINDS.map(() => []);
    for (let i = 0; i < quoteCount; i++) {
      const kind = i % QUOTE_KINDS.length;
      const { ms } = await quote(nth(QUOTE_KINDS, kind).query);
      quoteTimes.push(ms);
      quoteTimesByKind[kind]?.push(ms);
    }

    // (b) Swaps
    const swapOnce = async (walletType: WalletType, kind: number): Promise<number> => {
      const suffix = walletType === "smart_wallet" ? "&walletType=smart_wallet" : "";
      const { quoteId } = await quote(`${nth(SWAP_KINDS, kind).query}${suffix}`);
      const begin = performance.now();
      const res = await app.request({ method: "POST", url: "/api/v1/swap", headers, payload: { quoteId } });
      const ms = performance.now() - begin;
      if (res.statusCode !== 200 || dig(res.json(), "status") !== "completed")
        throw new Error(`${walletType} swap failed: ${res.statusCode} ${res.body.slice(0, 500)}`);
      return ms;
    };
    log(`warm-up: ${swapWarmup} swaps per wallet (the first smart wallet swap deploys the account)`);
    const firstSmartWalletMs = await swapOnce("smart_wallet", 0);
    await swapOnce("eoa", 0);
    for (let i = 1; i < swapWarmup; i++) {
      await swapOnce("eoa", i);
      await swapOnce("smart_wallet", i);
    }
    // Alternated, as in bench/smart-wallet-payouts.ts: both wallets timed under the same load.
    log(`${swapCount} EOA and ${swapCount} smart wallet swaps, one after the other, alternating`);
    const eoaTimes: number[] = [];
    const smartTimes: number[] = [];
    const byKind = SWAP_KINDS.map(() => ({ eoa: [] as number[], smart: [] as number[] }));
    for (let i = 0; i < swapCount; i++) {
      const kind = i % SWAP_KINDS.length;
      const e = await swapOnce("eoa", kind);
      const s = await swapOnce("smart_wallet", kind);
      eoaTimes.push(e);
      smartTimes.push(s);
      byKind[kind]?.eoa.push(e);
      byKind[kind]?.smart.push(s);
    }

    // Every swap the bench made is recorded, once.
    const listed = await app.request({ method: "GET", url: "/api/v1/swaps?limit=1", headers });
    const expected = 2 * (swapWarmup + swapCount);
    if (listed.statusCode !== 200 || dig(listed.json(), "total") !== expected)
      throw new Error(`expected ${expected} swaps listed: ${listed.statusCode} ${listed.body.slice(0, 500)}`);

    const all = summarize(quoteTimes);
    const eoa = summarize(eoaTimes);
    const smartWallet = summarize(smartTimes);
    const ratioP50 = smartWallet.p50 / eoa.p50;
    return {
      quotes: {
        count: quoteCount,
        all,
        byKind: QUOTE_KINDS.map((k, i) => ({
          name: k.name,
          count: quoteTimesByKind[i]?.length ?? 0,
          summary: summarize(quoteTimesByKind[i] ?? []),
        })),
      },
      swaps: {
        count: swapCount,
        eoa,
        smartWallet,
        byKind: SWAP_KINDS.map((k, i) => ({
          name: k.name,
          count: byKind[i]?.eoa.length ?? 0,
          eoa: summarize(byKind[i]?.eoa ?? []),
          smartWallet: summarize(byKind[i]?.smart ?? []),
        })),
        firstSmartWalletMs,
        ratioP50,
      },
      goals: [
        {
          text: `quote p50 < ${GOALS.quoteP50Ms} ms: ${all.p50.toFixed(1)} ms`,
          met: all.p50 < GOALS.quoteP50Ms,
        },
        {
          text: `smart wallet swap p50 within ${GOALS.swapRatio}× of the EOA: ${smartWallet.p50.toFixed(0)} ms vs ${eoa.p50.toFixed(0)} ms = ${ratioP50.toFixed(2)}×`,
          met: ratioP50 <= GOALS.swapRatio,
        },
      ],
    };
  } finally {
    await t?.close();
    await devnet?.stop();
  }
}

export function renderSwapsTable(f: SwapFigures): string {
  const ms = (n: number) => (n < 100 ? n.toFixed(1) : n.toFixed(0));
  const cells = (s: LatencySummary) =>
    `${ms(s.p50)} | ${ms(s.p99)} | ${ms(s.mean)} | ${ms(s.min)} | ${ms(s.max)}`;
  const { quotes, swaps } = f;
  return [
    `| Request${QUICK_TAG} | Count (sequential) | p50 ms | p99 ms | mean ms | min ms | max ms |`,
    "| :-- | --: | --: | --: | --: | --: | --: |",
    `| Quote, all three in turn | ${quotes.count} | ${cells(quotes.all)} |`,
    ...quotes.byKind.map((k) => `| Quote ${k.name} | ${k.count} | ${cells(k.summary)} |`),
    `| Swap from the EOA (signed transactions) | ${swaps.count} | ${cells(swaps.eoa)} |`,
    `| Swap from the smart wallet (user operation, sponsored; instant bundling) | ${swaps.count} | ${cells(swaps.smartWallet)} |`,
    ...swaps.byKind.flatMap((k) => [
      `| Swap ${k.name}, EOA | ${k.count} | ${cells(k.eoa)} |`,
      `| Swap ${k.name}, smart wallet | ${k.count} | ${cells(k.smartWallet)} |`,
    ]),
    "",
    `First smart wallet swap (deploys the account): ${ms(swaps.firstSmartWalletMs)} ms. Smart wallet / EOA at p50: ${swaps.ratioP50.toFixed(2)}× (goal ≤ ${GOALS.swapRatio}×).`,
    "",
    ...goalLines(f.goals),
  ].join("\n");
}

await runAsScript(import.meta.url, log, async () => {
  const figures = await benchSwaps();
  process.stdout.write(
    `\n${renderSwapsTable(figures)}\n\nDevnet (Hardhat node + Alto bundler + Uniswap v3), app and database on one 2-core machine shared with other processes.\n${QUICK ? `\n${QUICK_NOTE}\n` : ""}`,
  );
});
