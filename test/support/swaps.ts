import type { LightMyRequestResponse } from "fastify";
import {
  type Address,
  decodeEventLog,
  erc20Abi,
  getAddress,
  type Hex,
  isAddressEqual,
  type Log,
  type PublicClient,
  parseAbi,
  parseUnits,
  type TransactionReceipt,
} from "viem";
import { expect } from "vitest";
import type { Devnet, DevnetSwapPool } from "../../src/devnet/chain.ts";
import { type ChainToken, TOKEN_DECIMALS } from "../../src/domain/money.ts";
import { bearer, type TestApp } from "./app.ts";

// Shared helpers for swap tests (D16): the API's quote and swap calls with their bodies typed,
// the swap.* outbox events, and, for live tests, an outside view of the chain — balances at a
// block, the wallet's own transactions and their gas, and the pool's Swap event decoded here
// independently of the service — so that a test can check that a swap moved exactly what it said.

export type SwapToken = ChainToken;
export type SwapSide = "exact_in" | "exact_out";

/** What a quote and a swap both say of a trade. */
interface Trade {
  side: SwapSide;
  sellToken: SwapToken;
  buyToken: SwapToken;
  sellAmount: string;
  buyAmount: string;
  minBuyAmount: string;
  maxSellAmount: string;
  slippageBps: number;
  walletType: string;
  fromAddress: string;
}

export interface SwapQuote extends Trade {
  quoteId: string;
  price: string;
  priceImpactBps: number;
  route: { protocol: string; pool: string; fee: number }[];
  gasEstimate: string;
  expiresAt: string;
}

export interface SwapResult extends Trade {
  swapId: string;
  status: "pending" | "completed" | "failed";
  quoteId: string | null;
  txHash: string | null;
  userOpHash?: string;
  error?: string;
  createdAt: string;
  completedAt: string | null;
}

export interface QuoteParams {
  sellToken: SwapToken;
  buyToken: SwapToken;
  sellAmount?: string;
  buyAmount?: string;
  walletType?: "eoa" | "smart_wallet";
  slippageBps?: number;
}

/** A decimal amount of `token` (the API's strings) in its smallest unit. */
export const units = (token: SwapToken, amount: string): bigint => parseUnits(amount, TOKEN_DECIMALS[token]);

/** The LIVE_SWAP_* variables that point the service at a devnet's Uniswap v3 (startDevnet `swaps: true`). */
export function liveSwapEnv(devnet: Devnet, feeTiers = "500,3000"): Record<string, string> {
  const swap = devnet.swap;
  if (!swap) throw new Error("The devnet was started without swaps");
  return {
    LIVE_SWAP_ROUTER_ADDRESS: swap.router,
    LIVE_SWAP_QUOTER_ADDRESS: swap.quoter,
    LIVE_SWAP_FACTORY_ADDRESS: swap.factory,
    LIVE_WETH_ADDRESS: swap.weth,
    LIVE_SWAP_FEE_TIERS: feeTiers,
  };
}

/** GET /api/v1/swap/quote, as answered. */
export function requestQuote(t: TestApp, key: string, params: QuoteParams): Promise<LightMyRequestResponse> {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value !== undefined) query.set(name, String(value));
  return t.request({ method: "GET", url: `/api/v1/swap/quote?${query}`, headers: bearer(key) });
}

/** A quote the service must give (200), typed. */
export async function quoteSwap(t: TestApp, key: string, params: QuoteParams): Promise<SwapQuote> {
  const res = await requestQuote(t, key, params);
  if (res.statusCode !== 200) throw new Error(`quote refused: ${res.statusCode} ${res.body}`);
  return res.json<SwapQuote>();
}

/** POST /api/v1/swap with `body` ({quoteId} or a quote's parameters) and an optional Idempotency-Key. */
export function postSwap(
  t: TestApp,
  key: string,
  body: Record<string, unknown>,
  idempotencyKey?: string,
): Promise<LightMyRequestResponse> {
  const headers = { ...bearer(key), ...(idempotencyKey ? { "idempotency-key": idempotencyKey } : {}) };
  return t.request({ method: "POST", url: "/api/v1/swap", headers, payload: body });
}

/** GET /api/v1/swaps, typed. */
export async function listSwaps(
  t: TestApp,
  key: string,
): Promise<{ swaps: SwapResult[]; total: number; limit: number; offset: number }> {
  const res = await t.request({ method: "GET", url: "/api/v1/swaps", headers: bearer(key) });
  if (res.statusCode !== 200) throw new Error(`listing swaps failed: ${res.statusCode} ${res.body}`);
  return res.json();
}

/** Completed swaps added up per pair, as GET /api/v1/wallet/stats `swaps` reports them (in units). */
export function swapTotals(swaps: readonly SwapResult[]) {
  const totals = new Map<string, { count: number; sold: bigint; bought: bigint }>();
  for (const s of swaps) {
    const pair = `${s.sellToken}/${s.buyToken}`;
    const sum = totals.get(pair) ?? { count: 0, sold: 0n, bought: 0n };
    sum.count += 1;
    sum.sold += units(s.sellToken, s.sellAmount);
    sum.bought += units(s.buyToken, s.buyAmount);
    totals.set(pair, sum);
  }
  return totals;
}

/** POST /api/v1/workspaces/:id/smart-wallet with the live key: the smart wallet's address. */
export async function createSmartWallet(t: TestApp, ws: { id: string; liveKey: string }): Promise<Address> {
  const res = await t.request({
    method: "POST",
    url: `/api/v1/workspaces/${ws.id}/smart-wallet`,
    headers: bearer(ws.liveKey),
    payload: {},
  });
  if (res.statusCode !== 201) throw new Error(`smart wallet refused: ${res.statusCode} ${res.body}`);
  return res.json().smartWallet.address;
}

/** The workspace's swap.* outbox events (all of them, or of one type), oldest first. */
export function swapEvents(t: TestApp, workspaceId: string, type?: "swap.completed" | "swap.failed") {
  let query = t.database.db
    .selectFrom("outbox_events")
    .select(["event_type", "payload", "environment"])
    .where("workspace_id", "=", workspaceId)
    .where("event_type", "like", "swap.%");
  if (type) query = query.where("event_type", "=", type);
  return query.orderBy("id").execute();
}

const POOL_SWAP_EVENT = parseAbi([
  "event Swap(address indexed sender, address indexed recipient, int256 amount0, int256 amount1, uint160 sqrtPriceX96, uint128 liquidity, int24 tick)",
]);
const USER_OPERATION_EVENT = parseAbi([
  "event UserOperationEvent(bytes32 indexed userOpHash, address indexed sender, address indexed paymaster, uint256 nonce, bool success, uint256 actualGasCost, uint256 actualGasUsed)",
]);

/** One of a wallet's own transactions, with what its gas cost the wallet (gasUsed × effectiveGasPrice). */
export interface WalletTransaction {
  hash: Hex;
  nonce: number;
  to: Address | null;
  blockNumber: bigint;
  gasCost: bigint;
  status: "success" | "reverted";
}

/** A devnet with Uniswap v3 as a test sees it from outside the service. */
export class SwapChain {
  readonly chain: PublicClient;
  readonly devnet: Devnet;

  constructor(chain: PublicClient, devnet: Devnet) {
    if (!devnet.swap) throw new Error("The devnet was started without swaps");
    this.chain = chain;
    this.devnet = devnet;
  }

  get router(): Address {
    return this.#swap().router;
  }

  #swap() {
    const { swap } = this.devnet;
    if (!swap) throw new Error("The devnet was started without swaps");
    return swap;
  }

  /** The ERC-20 a pool holds for `token` (WETH for ETH). */
  tokenAddress(token: SwapToken): Address {
    return token === "ETH" ? this.#swap().weth : this.devnet.tokens[token];
  }

  /** The seeded pool trading `a` against `b`. */
  pool(a: SwapToken, b: SwapToken): DevnetSwapPool {
    const [x, y] = [this.tokenAddress(a), this.tokenAddress(b)];
    const pool = this.#swap().pools.find(
      (p) =>
        (isAddressEqual(p.token0, x) && isAddressEqual(p.token1, y)) ||
        (isAddressEqual(p.token0, y) && isAddressEqual(p.token1, x)),
    );
    if (!pool) throw new Error(`No seeded pool for ${a}/${b}`);
    return pool;
  }

  /** `owner`'s balance of `token` (ETH itself, not WETH) at `blockNumber` (latest when omitted). */
  balance(token: SwapToken, owner: string, blockNumber?: bigint): Promise<bigint> {
    const address = owner as Address;
    if (token === "ETH") return this.chain.getBalance({ address, blockNumber });
    return this.chain.readContract({
      address: this.tokenAddress(token),
      abi: erc20Abi,
      functionName: "balanceOf",
      args: [address],
      blockNumber,
    });
  }

  async balances(owner: string, tokens: readonly SwapToken[], blockNumber?: bigint) {
    const read = await Promise.all(tokens.map((token) => this.balance(token, owner, blockNumber)));
    return new Map(tokens.map((token, i) => [token, read[i] ?? 0n]));
  }

  /** What the router may take of `owner`'s `token`. */
  allowance(token: Exclude<SwapToken, "ETH">, owner: string, blockNumber?: bigint): Promise<bigint> {
    return this.chain.readContract({
      address: this.tokenAddress(token),
      abi: erc20Abi,
      functionName: "allowance",
      args: [owner as Address, this.router],
      blockNumber,
    });
  }

  /** The transactions `from` sent in blocks (after, upTo], with their receipts' gas cost. */
  async walletTransactions(from: string, after: bigint, upTo: bigint): Promise<WalletTransaction[]> {
    const found: WalletTransaction[] = [];
    for (let n = after + 1n; n <= upTo; n++) {
      const block = await this.chain.getBlock({ blockNumber: n, includeTransactions: true });
      for (const tx of block.transactions) {
        if (!isAddressEqual(tx.from, from as Address)) continue;
        const receipt = await this.chain.getTransactionReceipt({ hash: tx.hash });
        found.push({
          hash: tx.hash,
          nonce: tx.nonce,
          to: tx.to && getAddress(tx.to),
          blockNumber: n,
          gasCost: receipt.gasUsed * receipt.effectiveGasPrice,
          status: receipt.status,
        });
      }
    }
    return found;
  }

  /**
   * What `pool` sold and bought for the swapper, from its Swap event among `logs` (the pool's
   * amounts are what it received, positive, and paid out, negative); undefined without one.
   */
  poolSwap(logs: readonly Log[], sell: SwapToken, buy: SwapToken) {
    const pool = this.pool(sell, buy);
    const sellIsToken0 = isAddressEqual(pool.token0, this.tokenAddress(sell));
    const swaps = logs
      .filter((log) => isAddressEqual(log.address, pool.address))
      .flatMap((log) => {
        try {
          return [decodeEventLog({ abi: POOL_SWAP_EVENT, data: log.data, topics: log.topics }).args];
        } catch {
          return [];
        }
      });
    const [only] = swaps;
    if (!only || swaps.length !== 1) throw new Error(`${swaps.length} Swap events of ${pool.address}`);
    const { amount0, amount1, recipient } = only;
    const [sold, bought] = sellIsToken0 ? [amount0, -amount1] : [amount1, -amount0];
    return { pool: pool.address, sold, bought, recipient };
  }

  /** The ERC-4337 UserOperationEvents of a (bundle) transaction's receipt. */
  userOperations(receipt: TransactionReceipt) {
    const entryPoint = this.devnet.aa?.entryPoint;
    if (!entryPoint) throw new Error("The devnet was started without account abstraction");
    return receipt.logs.flatMap((log) => {
      if (!isAddressEqual(log.address, entryPoint)) return [];
      try {
        return [decodeEventLog({ abi: USER_OPERATION_EVENT, data: log.data, topics: log.topics }).args];
      } catch {
        return [];
      }
    });
  }

  /** The Approval events of `token` by `owner` for the router among `logs`: the approved amounts. */
  approvals(logs: readonly Log[], token: SwapToken, owner: string): bigint[] {
    return logs.flatMap((log) => {
      if (!isAddressEqual(log.address, this.tokenAddress(token))) return [];
      try {
        const { eventName, args } = decodeEventLog({ abi: erc20Abi, data: log.data, topics: log.topics });
        if (eventName !== "Approval") return [];
        const mine =
          isAddressEqual(args.owner, owner as Address) && isAddressEqual(args.spender, this.router);
        return mine ? [args.value] : [];
      } catch {
        return [];
      }
    });
  }
}

/** A POST …/swap (or any request) and what the chain shows around it for one wallet. */
export interface Measured {
  res: LightMyRequestResponse;
  before: bigint;
  after: bigint;
  /** The wallet's balance change of each token asked, between `before` and `after`. */
  delta: Map<SwapToken, bigint>;
  /** The wallet's own transactions in between (none for a smart wallet), and their gas. */
  transactions: WalletTransaction[];
  gas: bigint;
  nonceBefore: number;
  nonceAfter: number;
}

/** Runs `send` and reads `wallet`'s balances of `tokens` and its transactions at the block before and after. */
export async function measure(
  sc: SwapChain,
  wallet: string,
  tokens: readonly SwapToken[],
  send: () => Promise<LightMyRequestResponse>,
): Promise<Measured> {
  const address = wallet as Address;
  const before = await sc.chain.getBlockNumber({ cacheTime: 0 }); // not the client's cached one
  const [start, nonceBefore] = await Promise.all([
    sc.balances(wallet, tokens, before),
    sc.chain.getTransactionCount({ address, blockNumber: before }),
  ]);
  const res = await send();
  const after = await sc.chain.getBlockNumber({ cacheTime: 0 });
  const [end, nonceAfter, transactions] = await Promise.all([
    sc.balances(wallet, tokens, after),
    sc.chain.getTransactionCount({ address, blockNumber: after }),
    sc.walletTransactions(wallet, before, after),
  ]);
  const delta = new Map(tokens.map((token) => [token, (end.get(token) ?? 0n) - (start.get(token) ?? 0n)]));
  const gas = transactions.reduce((sum, tx) => sum + tx.gasCost, 0n);
  return { res, before, after, delta, transactions, gas, nonceBefore, nonceAfter };
}

/** Nothing left the wallet during `m`, and the workspace has no swap and no swap event. */
export async function expectNothingSent(t: TestApp, ws: { id: string; liveKey: string }, m: Measured) {
  expect(m.transactions).toEqual([]);
  expect(m.nonceAfter).toBe(m.nonceBefore);
  for (const [token, delta] of m.delta) expect({ token, delta }).toEqual({ token, delta: 0n });
  expect((await listSwaps(t, ws.liveKey)).total).toBe(0);
  expect(await swapEvents(t, ws.id)).toEqual([]);
}

/**
 * Checks a completed swap against the chain: the pool's Swap event (decoded here) sold and bought
 * exactly the reported amounts, within the quote's limits, and the wallet's balances moved by
 * exactly those amounts, less the gas of its own transactions (an EOA's; a smart wallet pays none).
 * Returns the swap's receipt.
 */
export async function expectExactSwap(sc: SwapChain, m: Measured, quote: SwapQuote) {
  expect(m.res.statusCode, m.res.body).toBe(200);
  const swap = m.res.json<SwapResult>();
  expect(swap).toMatchObject({ status: "completed", quoteId: quote.quoteId, side: quote.side });
  const { sellToken: sell, buyToken: buy } = quote;
  const sold = units(sell, swap.sellAmount);
  const bought = units(buy, swap.buyAmount);
  const receipt = await sc.chain.getTransactionReceipt({ hash: swap.txHash as Hex });
  expect(receipt.status).toBe("success");
  expect(receipt.blockNumber).toBeLessThanOrEqual(m.after);
  const event = sc.poolSwap(receipt.logs, sell, buy);
  expect({ sold: event.sold, bought: event.bought }).toEqual({ sold, bought });
  expect(event.pool.toLowerCase()).toBe(quote.route[0]?.pool.toLowerCase());
  expect(sold).toBeLessThanOrEqual(units(sell, quote.maxSellAmount));
  expect(bought).toBeGreaterThanOrEqual(units(buy, quote.minBuyAmount));
  if (quote.side === "exact_in") expect(sold).toBe(units(sell, quote.sellAmount));
  else expect(bought).toBe(units(buy, quote.buyAmount));
  for (const [token, delta] of m.delta) {
    const expected =
      (token === buy ? bought : 0n) - (token === sell ? sold : 0n) - (token === "ETH" ? m.gas : 0n);
    expect({ token, delta }).toEqual({ token, delta: expected });
  }
  return { swap, receipt, sold, bought };
}
