import {
  type Address,
  createPublicClient,
  erc20Abi,
  formatUnits,
  http,
  type PublicClient,
  parseEther,
  parseUnits,
} from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Devnet,
  type DevnetSwap,
  moveSwapPool,
  QUOTER_V2_ABI,
  SEEDED_POOLS,
  type SwapAsset,
  sqrtPriceX96,
  startDevnet,
  TICK_SPACINGS,
  TOKENS,
  UNISWAP_V3_FACTORY_ABI,
  UNISWAP_V3_POOL_ABI,
} from "../../src/devnet/chain.ts";
import { envFileText } from "../../src/devnet/env-file.ts";

// Starts the devnet with Uniswap v3 (D16): WETH9, the factory, SwapRouter, QuoterV2 and the
// NonfungiblePositionManager from the npm artifacts, and the seeded USDC pools; quotes through
// QuoterV2 (eth_call: its quote functions are non-view) and moves a pool with a real swap.

const decimals = (asset: SwapAsset) => (asset === "ETH" ? 18 : TOKENS[asset].decimals);

describe("devnet with Uniswap v3", () => {
  let devnet: Devnet;
  let swap: DevnetSwap;
  let client: PublicClient;

  const tokenOf = (asset: SwapAsset): Address => (asset === "ETH" ? swap.weth : devnet.tokens[asset]);
  const poolOf = (pair: string) => {
    const pool = swap.pools.find((p) => p.pair === pair);
    if (!pool) throw new Error(`No ${pair} pool`);
    return pool;
  };
  /** QuoterV2's quoteExactInputSingle, in whole units of `buy`. */
  const quote = async (sell: SwapAsset, buy: SwapAsset, amountIn: string): Promise<number> => {
    const fee = swap.pools.find((p) => [sell, buy].every((a) => p.pair.split("/").includes(a)))?.fee;
    if (fee === undefined) throw new Error(`No pool for ${sell}/${buy}`);
    const { result } = await client.simulateContract({
      address: swap.quoter,
      abi: QUOTER_V2_ABI,
      functionName: "quoteExactInputSingle",
      args: [
        {
          tokenIn: tokenOf(sell),
          tokenOut: tokenOf(buy),
          amountIn: parseUnits(amountIn, decimals(sell)),
          fee,
          sqrtPriceLimitX96: 0n,
        },
      ],
    });
    return Number(formatUnits(result[0], decimals(buy)));
  };

  beforeAll(async () => {
    devnet = await startDevnet({ swaps: true });
    if (!devnet.swap) throw new Error("startDevnet({ swaps: true }) returned no swap");
    swap = devnet.swap;
    client = createPublicClient({
      chain: devnet.chain,
      transport: http(devnet.rpcUrl, { retryCount: 0 }),
      pollingInterval: 50,
    });
    console.log("Swap devnet up", devnet.timings);
  });

  afterAll(async () => {
    await devnet?.stop();
  });

  it("deploys WETH9 and wraps the seeded ETH", async () => {
    const read = <F extends "name" | "symbol" | "decimals" | "totalSupply">(functionName: F) =>
      client.readContract({ address: swap.weth, abi: erc20Abi, functionName });
    expect(await read("name")).toBe("Wrapped Ether");
    expect(await read("symbol")).toBe("WETH");
    expect(await read("decimals")).toBe(18);
    expect(await read("totalSupply")).toBe(parseEther("500"));
    expect(await client.getBalance({ address: swap.weth })).toBe(parseEther("500"));
    expect(devnet.timings.swapDeployMs).toBeGreaterThan(0);
    expect(devnet.aa).toBeUndefined();
  });

  it("creates the three seeded pools, found by the factory in either token order", async () => {
    expect(swap.pools.map((p) => p.pair)).toEqual(SEEDED_POOLS.map((p) => p.pair));
    for (const seeded of SEEDED_POOLS) {
      const pool = poolOf(seeded.pair);
      expect(pool.fee).toBe(seeded.fee);
      expect(pool.tickSpacing).toBe(TICK_SPACINGS[seeded.fee]);
      expect(BigInt(pool.token0) < BigInt(pool.token1)).toBe(true);
      expect([pool.token0, pool.token1].sort()).toEqual([tokenOf("USDC"), tokenOf(seeded.asset)].sort());
      for (const [a, b] of [
        [pool.token0, pool.token1],
        [pool.token1, pool.token0],
      ] as const) {
        const found = await client.readContract({
          address: swap.factory,
          abi: UNISWAP_V3_FACTORY_ABI,
          functionName: "getPool",
          args: [a, b, seeded.fee],
        });
        expect(found).toBe(pool.address);
      }
      const read = <F extends "token0" | "token1" | "fee">(functionName: F) =>
        client.readContract({ address: pool.address, abi: UNISWAP_V3_POOL_ABI, functionName });
      expect(await read("token0")).toBe(pool.token0);
      expect(await read("token1")).toBe(pool.token1);
      expect(await read("fee")).toBe(seeded.fee);
    }
  });

  it("seeds each pool with liquidity at exactly its seeded price", async () => {
    for (const seeded of SEEDED_POOLS) {
      const pool = poolOf(seeded.pair);
      const liquidity = await client.readContract({
        address: pool.address,
        abi: UNISWAP_V3_POOL_ABI,
        functionName: "liquidity",
      });
      expect(liquidity).toBeGreaterThan(0n);
      const [sqrtPrice] = await client.readContract({
        address: pool.address,
        abi: UNISWAP_V3_POOL_ABI,
        functionName: "slot0",
      });
      const assetUnits = seeded.assetAmount * 10n ** BigInt(decimals(seeded.asset));
      const usdcUnits = seeded.usdcAmount * 10n ** BigInt(decimals("USDC"));
      const usdcFirst = pool.token0 === tokenOf("USDC");
      const expected = usdcFirst ? sqrtPriceX96(usdcUnits, assetUnits) : sqrtPriceX96(assetUnits, usdcUnits);
      expect(sqrtPrice).toBe(expected);
      // The pool holds what was deposited, to within the rounding of the liquidity.
      for (const [asset, units] of [
        [seeded.asset, assetUnits],
        ["USDC", usdcUnits],
      ] as const) {
        const held = await client.readContract({
          address: tokenOf(asset),
          abi: erc20Abi,
          functionName: "balanceOf",
          args: [pool.address],
        });
        expect(held).toBeLessThanOrEqual(units);
        expect(held).toBeGreaterThan(units - units / 1_000_000n);
      }
    }
  });

  it("quotes through QuoterV2 at the seeded prices, less the fee", async () => {
    const ethToUsdc = await quote("ETH", "USDC", "1");
    expect(ethToUsdc).toBeGreaterThan(2950);
    expect(ethToUsdc).toBeLessThan(3000);
    const usdcToDai = await quote("USDC", "DAI", "1000");
    expect(usdcToDai).toBeGreaterThan(999);
    expect(usdcToDai).toBeLessThan(1000);
    const usdcToAdao = await quote("USDC", "ADAO", "1000");
    // 2,000 ADAO less 0.3 % (1,994), less the price impact of 0.1 % of the pool.
    expect(usdcToAdao).toBeGreaterThan(1990);
    expect(usdcToAdao).toBeLessThan(1994);
    console.log("Quotes", { ethToUsdc, usdcToDai, usdcToAdao });
  });

  it("moves the USDC/ETH price with a real swap between two quotes", async () => {
    const { payer } = devnet.accounts;
    const usdcBalance = () =>
      client.readContract({
        address: devnet.tokens.USDC,
        abi: erc20Abi,
        functionName: "balanceOf",
        args: [payer.address],
      });
    const before = await quote("ETH", "USDC", "1");
    const usdcBefore = await usdcBalance();
    const sold = await moveSwapPool(devnet, {
      account: payer,
      sell: "ETH",
      buy: "USDC",
      amountIn: parseEther("50"),
    });
    expect(sold.pool).toBe(poolOf("USDC/ETH").address);
    expect(await usdcBalance()).toBe(usdcBefore + sold.amountOut);
    // 50 of the pool's 500 ETH: roughly 50 × 3000 / 1.1, less the fee.
    expect(Number(formatUnits(sold.amountOut, 6))).toBeGreaterThan(130_000);
    expect(Number(formatUnits(sold.amountOut, 6))).toBeLessThan(140_000);
    const afterSell = await quote("ETH", "USDC", "1");
    expect(afterSell).toBeLessThan(before * 0.9); // more ETH in the pool: ETH is cheaper

    // Back the other way, bought as ETH (WETH unwrapped by the router).
    const ethBefore = await client.getBalance({ address: payer.address });
    const bought = await moveSwapPool(devnet, {
      account: payer,
      sell: "USDC",
      buy: "ETH",
      amountIn: sold.amountOut,
    });
    const ethAfter = await client.getBalance({ address: payer.address });
    expect(ethAfter - ethBefore).toBeGreaterThan(bought.amountOut - parseEther("0.01")); // less gas
    expect(ethAfter - ethBefore).toBeLessThan(bought.amountOut);
    const afterBuy = await quote("ETH", "USDC", "1");
    expect(afterBuy).toBeGreaterThan(afterSell);
    expect(afterBuy).toBeLessThan(before); // both fees stayed in the pool
  });

  it("mints the test tokens a swapping account lacks", async () => {
    const { treasury } = devnet.accounts;
    const amountIn = parseUnits("10000", 18);
    const before = await quote("ADAO", "USDC", "1");
    const result = await moveSwapPool(devnet, { account: treasury, sell: "ADAO", buy: "USDC", amountIn });
    expect(result.amountIn).toBe(amountIn);
    expect(Number(formatUnits(result.amountOut, 6))).toBeGreaterThan(4900);
    expect(await quote("ADAO", "USDC", "1")).toBeLessThan(before);
    await expect(
      moveSwapPool(devnet, { account: treasury, sell: "DAI", buy: "ADAO", amountIn: 1n }),
    ).rejects.toThrow(/No seeded pool/);
  });

  it("writes the Uniswap addresses to the env file", () => {
    const text = envFileText(devnet);
    expect(text).toContain("# Uniswap v3 (D16)");
    expect(text).toContain(`\nLIVE_SWAP_ROUTER_ADDRESS=${swap.router}\n`);
    expect(text).toContain(`\nLIVE_SWAP_QUOTER_ADDRESS=${swap.quoter}\n`);
    expect(text).toContain(`\nLIVE_SWAP_FACTORY_ADDRESS=${swap.factory}\n`);
    expect(text).toContain(`\nLIVE_WETH_ADDRESS=${swap.weth}\n`);
    expect(text).not.toContain("LIVE_BUNDLER_URL"); // no ERC-4337 stack on this devnet
  });
});
