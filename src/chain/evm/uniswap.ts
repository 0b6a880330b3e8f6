import { LRUCache } from "lru-cache";
import {
  BaseError,
  ContractFunctionRevertedError,
  createPublicClient,
  decodeEventLog,
  encodeFunctionData,
  erc20Abi,
  http,
  type PublicClient,
  parseAbi,
  zeroAddress,
} from "viem";
import type { NetworkConfig, SwapConfig } from "../../config.ts";
import type { ChainToken, ContractCall, EventLog, Hex } from "../network.ts";
import { chainOf } from "./chain-of.ts";

// Uniswap v3 (D16) as the live networks' swap venue: quotes from QuoterV2 across the configured fee
// tiers, the calls that execute one through SwapRouter (ETH wrapped and unwrapped through WETH by
// the router itself), and what a mined swap sold and bought, read from its pool's Swap event.
// ABIs are declared here, typed, from the contracts' published interfaces.

const FACTORY_ABI = parseAbi(["function getPool(address, address, uint24) view returns (address)"]);
const POOL_ABI = parseAbi([
  "function slot0() view returns (uint160 sqrtPriceX96, int24 tick, uint16, uint16, uint16, uint8, bool)",
  "event Swap(address indexed sender, address indexed recipient, int256 amount0, int256 amount1, uint160 sqrtPriceX96, uint128 liquidity, int24 tick)",
]);
// QuoterV2's quote functions are not `view` on chain (they run the swap and revert with its
// result); they are only ever called with eth_call, so they are declared `view` to read them.
const QUOTER_ABI = parseAbi([
  "function quoteExactInputSingle((address tokenIn, address tokenOut, uint256 amountIn, uint24 fee, uint160 sqrtPriceLimitX96) params) view returns (uint256 amountOut, uint160 sqrtPriceX96After, uint32 initializedTicksCrossed, uint256 gasEstimate)",
  "function quoteExactOutputSingle((address tokenIn, address tokenOut, uint256 amount, uint24 fee, uint160 sqrtPriceLimitX96) params) view returns (uint256 amountIn, uint160 sqrtPriceX96After, uint32 initializedTicksCrossed, uint256 gasEstimate)",
]);
const ROUTER_ABI = parseAbi([
  "function exactInputSingle((address tokenIn, address tokenOut, uint24 fee, address recipient, uint256 deadline, uint256 amountIn, uint256 amountOutMinimum, uint160 sqrtPriceLimitX96) params) payable returns (uint256 amountOut)",
  "function exactOutputSingle((address tokenIn, address tokenOut, uint24 fee, address recipient, uint256 deadline, uint256 amountOut, uint256 amountInMaximum, uint160 sqrtPriceLimitX96) params) payable returns (uint256 amountIn)",
  "function multicall(bytes[] data) payable returns (bytes[] results)",
  "function unwrapWETH9(uint256 amountMinimum, address recipient) payable",
  "function sweepToken(address token, uint256 amountMinimum, address recipient) payable",
  "function refundETH() payable",
]);

/** An ERC-20 approval's gas limit (an EOA's transaction). */
const APPROVE_GAS = 80_000n;
/** The router's own work around the pool's swap (transfers, wrapping, multicall), above the quoter's figure. */
const ROUTER_OVERHEAD_GAS = 150_000n;
const MIN_SWAP_GAS = 250_000n;
/** How long a pool found absent is not asked for again (one may be created meanwhile). */
const ABSENT_POOL_TTL_MS = 60_000;

export type SwapSide = "exact_in" | "exact_out";

/** The best pool's answer for a swap: what it sells and buys, and the pool's price before and after. */
export interface PoolQuote {
  pool: Hex;
  fee: number;
  sellAmount: bigint;
  buyAmount: bigint;
  sqrtPriceBefore: bigint;
  sqrtPriceAfter: bigint;
  gasEstimate: bigint;
}

/** A swap to execute: the limits protect the wallet on chain if the price moves before it is mined. */
export interface SwapOrder {
  sell: ChainToken;
  buy: ChainToken;
  side: SwapSide;
  fee: number;
  /** exact_in: the amount sold; exact_out: the most it may sell. */
  maxSell: bigint;
  /** exact_in: the least it must buy; exact_out: the amount bought. */
  minBuy: bigint;
  wallet: Hex;
  /** Unix seconds after which the router refuses it. */
  deadline: bigint;
  gasEstimate: bigint;
}

export interface SwapCall {
  purpose: "swap_approval" | "swap";
  to: Hex;
  token: ChainToken;
  /** What the call may take from the wallet (reserved while it is on its way). */
  amount: bigint;
  call: ContractCall;
}

export class UniswapV3 {
  readonly config: SwapConfig;
  readonly #client: PublicClient;
  readonly #tokens: Partial<Record<ChainToken, Hex>>;
  /** Pools by pair and fee: a pool once created never moves; an absent one is asked again later. */
  readonly #pools = new LRUCache<string, Hex | typeof zeroAddress>({ max: 1_000 });

  constructor(network: NetworkConfig, swap: SwapConfig) {
    this.config = swap;
    const chain = chainOf(network);
    this.#client = createPublicClient({ chain, transport: http(network.rpcUrl) }) as PublicClient;
    this.#tokens = {
      ETH: swap.wethAddress as Hex,
      USDC: network.tokens.USDC as Hex,
      ADAO: network.tokens.ADAO as Hex,
      ...(network.tokens.DAI ? { DAI: network.tokens.DAI as Hex } : {}),
    };
  }

  /** The ERC-20 the pools hold for `token` (WETH for ETH); undefined if not configured. */
  tokenAddress(token: ChainToken): Hex | undefined {
    return this.#tokens[token];
  }

  /** The best quote across the fee tiers, or null when no pool of the pair can fill it. */
  async bestQuote(
    sell: ChainToken,
    buy: ChainToken,
    side: SwapSide,
    amount: bigint,
  ): Promise<PoolQuote | null> {
    const tokenIn = this.#tokens[sell];
    const tokenOut = this.#tokens[buy];
    if (!tokenIn || !tokenOut) return null;
    const quotes = await Promise.all(
      this.config.feeTiers.map((fee) => this.#quoteTier(tokenIn, tokenOut, fee, side, amount)),
    );
    let best: PoolQuote | null = null;
    for (const quote of quotes) {
      if (!quote) continue;
      const better =
        best === null ||
        (side === "exact_in" ? quote.buyAmount > best.buyAmount : quote.sellAmount < best.sellAmount);
      if (better) best = quote;
    }
    return best;
  }

  async #quoteTier(
    tokenIn: Hex,
    tokenOut: Hex,
    fee: number,
    side: SwapSide,
    amount: bigint,
  ): Promise<PoolQuote | null> {
    const pool = await this.#pool(tokenIn, tokenOut, fee);
    if (pool === zeroAddress) return null;
    const quoter = this.config.quoterAddress as Hex;
    try {
      const [slot0, quoted] = await Promise.all([
        this.#client.readContract({ address: pool, abi: POOL_ABI, functionName: "slot0" }),
        side === "exact_in"
          ? this.#client.readContract({
              address: quoter,
              abi: QUOTER_ABI,
              functionName: "quoteExactInputSingle",
              args: [{ tokenIn, tokenOut, amountIn: amount, fee, sqrtPriceLimitX96: 0n }],
            })
          : this.#client.readContract({
              address: quoter,
              abi: QUOTER_ABI,
              functionName: "quoteExactOutputSingle",
              args: [{ tokenIn, tokenOut, amount, fee, sqrtPriceLimitX96: 0n }],
            }),
      ]);
      const [other, sqrtPriceAfter, , gasEstimate] = quoted;
      if (other === 0n) return null;
      return {
        pool,
        fee,
        sellAmount: side === "exact_in" ? amount : other,
        buyAmount: side === "exact_in" ? other : amount,
        sqrtPriceBefore: slot0[0],
        sqrtPriceAfter,
        gasEstimate,
      };
    } catch (err) {
      // The quoter reverts when the pool cannot fill the amount (no liquidity in range): no quote
      // from this tier. Anything else (the node did not answer) is the caller's to report.
      if (err instanceof BaseError && err.walk((e) => e instanceof ContractFunctionRevertedError))
        return null;
      throw err;
    }
  }

  async #pool(tokenA: Hex, tokenB: Hex, fee: number): Promise<Hex> {
    const key = `${tokenA}:${tokenB}:${fee}`.toLowerCase();
    const known = this.#pools.get(key);
    if (known) return known;
    const pool = await this.#client.readContract({
      address: this.config.factoryAddress as Hex,
      abi: FACTORY_ABI,
      functionName: "getPool",
      args: [tokenA, tokenB, fee],
    });
    this.#pools.set(key, pool, pool === zeroAddress ? { ttl: ABSENT_POOL_TTL_MS } : {});
    return pool;
  }

  /** What the router may still take of `wallet`'s `token` without a new approval. */
  async allowance(wallet: Hex, token: ChainToken): Promise<bigint> {
    const address = this.#tokens[token];
    if (!address) throw new Error(`${token} is not configured for swaps`);
    return this.#client.readContract({
      address,
      abi: erc20Abi,
      functionName: "allowance",
      args: [wallet, this.config.routerAddress as Hex],
    });
  }

  /**
   * The calls of `order`: an approval of exactly what it may sell when `allowance` is short (never
   * an unlimited one), then the router's swap. ETH in is sent as the call's value (the router wraps
   * it, and refunds what an exact-output swap did not use); ETH out is received by the router and
   * unwrapped to the wallet in the same call.
   */
  swapCalls(order: SwapOrder, allowance: bigint): SwapCall[] {
    const router = this.config.routerAddress as Hex;
    const tokenIn = this.#tokens[order.sell];
    const tokenOut = this.#tokens[order.buy];
    if (!tokenIn || !tokenOut) throw new Error(`${order.sell}/${order.buy} is not configured for swaps`);
    const ethIn = order.sell === "ETH";
    const ethOut = order.buy === "ETH";
    // The pool pays the router, which hands the proceeds on to the wallet in the same call: the
    // wallet's chain watcher ignores transfers from the router, so what a swap buys is never
    // mistaken for a customer's payment (or an unmatched transfer) to that wallet.
    const recipient = router;
    const swap =
      order.side === "exact_in"
        ? encodeFunctionData({
            abi: ROUTER_ABI,
            functionName: "exactInputSingle",
            args: [
              {
                tokenIn,
                tokenOut,
                fee: order.fee,
                recipient,
                deadline: order.deadline,
                amountIn: order.maxSell,
                amountOutMinimum: order.minBuy,
                sqrtPriceLimitX96: 0n,
              },
            ],
          })
        : encodeFunctionData({
            abi: ROUTER_ABI,
            functionName: "exactOutputSingle",
            args: [
              {
                tokenIn,
                tokenOut,
                fee: order.fee,
                recipient,
                deadline: order.deadline,
                amountOut: order.minBuy,
                amountInMaximum: order.maxSell,
                sqrtPriceLimitX96: 0n,
              },
            ],
          });
    const handOn = ethOut
      ? encodeFunctionData({
          abi: ROUTER_ABI,
          functionName: "unwrapWETH9",
          args: [order.minBuy, order.wallet],
        })
      : encodeFunctionData({
          abi: ROUTER_ABI,
          functionName: "sweepToken",
          args: [tokenOut, order.minBuy, order.wallet],
        });
    // ETH sent and not taken by the pool (an exact output's rest, or an input the pool could not
    // fill) would stay in the router for anyone to take: it comes back in the same call.
    const refund = ethIn ? [encodeFunctionData({ abi: ROUTER_ABI, functionName: "refundETH" })] : [];
    const data = encodeFunctionData({
      abi: ROUTER_ABI,
      functionName: "multicall",
      args: [[swap, handOn, ...refund]],
    });
    const gas =
      order.gasEstimate + ROUTER_OVERHEAD_GAS > MIN_SWAP_GAS
        ? order.gasEstimate + ROUTER_OVERHEAD_GAS
        : MIN_SWAP_GAS;
    const calls: SwapCall[] = [];
    if (!ethIn && allowance < order.maxSell) {
      calls.push({
        purpose: "swap_approval",
        to: tokenIn,
        token: order.sell,
        amount: 0n,
        call: {
          data: encodeFunctionData({ abi: erc20Abi, functionName: "approve", args: [router, order.maxSell] }),
          value: 0n,
          gas: APPROVE_GAS,
        },
      });
    }
    calls.push({
      purpose: "swap",
      to: router,
      token: order.sell,
      amount: order.maxSell,
      call: { data, value: ethIn ? order.maxSell : 0n, gas },
    });
    return calls;
  }

  /**
   * What the swap sold and bought, from `pool`'s Swap event among `logs` (one operation's or one
   * transaction's): the pool's positive amount is what it received, its negative one what it paid.
   */
  swapAmounts(
    logs: readonly EventLog[],
    /** The route's first pool; undefined for a swap recorded before it was kept: its one pool's. */
    pool: Hex | undefined,
    sell: ChainToken,
    buy: ChainToken,
  ): { sold: bigint; bought: bigint } {
    const sellAddress = this.#tokens[sell]?.toLowerCase();
    const buyAddress = this.#tokens[buy]?.toLowerCase();
    if (!sellAddress || !buyAddress) throw new Error(`${sell}/${buy} is not configured for swaps`);
    const sellIsToken0 = sellAddress < buyAddress;
    for (const log of logs) {
      if (pool && log.address.toLowerCase() !== pool.toLowerCase()) continue;
      let decoded: ReturnType<typeof decodeSwap>;
      try {
        decoded = decodeSwap(log);
      } catch {
        continue; // another event of the pool (a Mint, say)
      }
      const { amount0, amount1 } = decoded.args;
      const [sold, bought] = sellIsToken0 ? [amount0, -amount1] : [amount1, -amount0];
      if (sold > 0n && bought > 0n) return { sold, bought };
    }
    throw new Error(`no Swap event of pool ${pool} in the swap's logs`);
  }
}

function decodeSwap(log: EventLog) {
  return decodeEventLog({ abi: POOL_ABI, eventName: "Swap", data: log.data, topics: log.topics });
}
