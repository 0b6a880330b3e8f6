import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import {
  type Address,
  createPublicClient,
  createWalletClient,
  encodeAbiParameters,
  encodeFunctionData,
  erc20Abi,
  getContractAddress,
  type Hash,
  type Hex,
  http,
  isAddressEqual,
  keccak256,
  maxUint256,
  parseAbi,
  parseAbiParameters,
  parseEventLogs,
  zeroAddress,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { TOKEN_DECIMALS } from "../domain/money.ts";
import { type Artifact, weth9Artifact } from "./compile.ts";
import { type DeployerClients, withDeployer } from "./deployer.ts";
import type { Devnet, DevnetAccount, DevnetSwap, DevnetSwapPool, SwapAsset, SwapPair } from "./types.ts";
import {
  POOL_INIT_CODE_HASH,
  POSITION_MANAGER_ABI,
  SWAP_ROUTER_ABI,
  UNISWAP_V3_FACTORY_ABI,
  UNISWAP_V3_POOL_ABI,
  WETH9_ABI,
} from "./uniswap-abi.ts";

// Uniswap v3 on the devnet (D16): WETH9 (our own, src/devnet/contracts/WETH9.sol) and the factory,
// SwapRouter, QuoterV2 and NonfungiblePositionManager from the npm artifacts as shipped. They are
// never recompiled: the periphery computes pool addresses from the pool's init-code hash, which a
// different compiler or setting would change. The deployer then seeds the pools of SEEDED_POOLS
// with full-range liquidity.

/** One pool the devnet seeds: `assetAmount` of the asset against `usdcAmount` USDC (whole units). */
export interface SeededPool {
  pair: SwapPair;
  asset: Exclude<SwapAsset, "USDC">;
  /** Fee tier in hundredths of a basis point; its tick spacing is TICK_SPACINGS[fee]. */
  fee: 500 | 3000;
  assetAmount: bigint;
  usdcAmount: bigint;
}

/**
 * The pools the devnet seeds, deep enough that a payment-sized swap barely moves them. Each starts
 * at the price its amounts make: 1 ETH = 3000 USDC, 1 DAI = 1 USDC, 1 ADAO = 0.5 USDC.
 */
export const SEEDED_POOLS: readonly SeededPool[] = [
  { pair: "USDC/ETH", asset: "ETH", fee: 3000, assetAmount: 500n, usdcAmount: 1_500_000n },
  { pair: "USDC/DAI", asset: "DAI", fee: 500, assetAmount: 2_000_000n, usdcAmount: 2_000_000n },
  { pair: "USDC/ADAO", asset: "ADAO", fee: 3000, assetAmount: 2_000_000n, usdcAmount: 1_000_000n },
];

/** The factory's tick spacing of each fee tier it enables at deployment. */
export const TICK_SPACINGS = { 500: 10, 3000: 60, 10000: 200 } as const;

const MINT_ABI = parseAbi(["function mint(address to, uint256 amount)"]);
const WETH_DEPOSIT = encodeFunctionData({ abi: WETH9_ABI, functionName: "deposit" });
const mintData = (to: Address, amount: bigint) =>
  encodeFunctionData({ abi: MINT_ABI, functionName: "mint", args: [to, amount] });
/** A devnet's clock may be moved by tests: no deadline is ever worth failing a seed or a swap for. */
const NO_DEADLINE = maxUint256;
const MAX_TICK = 887272;

/** floor(sqrt(n)) for a bigint, by Newton's method. */
export function isqrt(n: bigint): bigint {
  if (n < 0n) throw new RangeError("isqrt of a negative number");
  if (n < 2n) return n;
  let x = 1n << BigInt((n.toString(2).length + 1) >> 1); // a power of two above sqrt(n)
  for (;;) {
    const y = (x + n / x) >> 1n;
    if (y >= x) return x;
    x = y;
  }
}

/**
 * The sqrtPriceX96 of a pool holding `amount0` of token0 and `amount1` of token1 (smallest units):
 * floor(sqrt(amount1 / amount0) · 2^96), exactly.
 */
export function sqrtPriceX96(amount0: bigint, amount1: bigint): bigint {
  return isqrt((amount1 << 192n) / amount0);
}

/** The widest ticks a position may use at this spacing: ±887272 rounded towards zero to a multiple. */
export function fullRangeTicks(tickSpacing: number): { tickLower: number; tickUpper: number } {
  const tickUpper = Math.trunc(MAX_TICK / tickSpacing) * tickSpacing;
  return { tickLower: -tickUpper, tickUpper };
}

const require = createRequire(import.meta.url);
type DeployedName = "weth" | "factory" | "router" | "quoter" | "positionManager";

async function shippedArtifact(pkg: string, path: string): Promise<Artifact> {
  const file = join(dirname(require.resolve(`${pkg}/package.json`)), "artifacts", "contracts", path);
  const parsed = JSON.parse(await readFile(file, "utf8")) as Artifact;
  if (!/^0x[0-9a-fA-F]+$/.test(parsed.bytecode)) throw new Error(`No bytecode in ${file}`);
  return parsed;
}

/** Compiles WETH9 (or loads the cache) and reads the Uniswap artifacts; start it early, await it later. */
export async function loadUniswapArtifacts(): Promise<Record<DeployedName, Artifact>> {
  const periphery = "@uniswap/v3-periphery";
  const [weth, factory, router, quoter, positionManager] = await Promise.all([
    weth9Artifact(),
    shippedArtifact("@uniswap/v3-core", "UniswapV3Factory.sol/UniswapV3Factory.json"),
    shippedArtifact(periphery, "SwapRouter.sol/SwapRouter.json"),
    shippedArtifact(periphery, "lens/QuoterV2.sol/QuoterV2.json"),
    shippedArtifact(periphery, "NonfungiblePositionManager.sol/NonfungiblePositionManager.json"),
  ]);
  return { weth, factory, router, quoter, positionManager };
}

/**
 * Deploys WETH9 and Uniswap v3 with the devnet's deployer (in its queue) and seeds SEEDED_POOLS;
 * `ms` counts from the moment the queue reaches the task.
 */
export function deployUniswap(
  devnet: Devnet,
  artifacts: Promise<Record<DeployedName, Artifact>> = loadUniswapArtifacts(),
): Promise<{ swap: DevnetSwap; ms: number }> {
  artifacts.catch(() => {}); // awaited in the task; avoid an unhandled rejection meanwhile
  return withDeployer(devnet, async (clients) => {
    const started = performance.now();
    const swap = await deployAndSeed(devnet, clients, await artifacts);
    return { swap, ms: Math.round(performance.now() - started) };
  });
}

async function deployAndSeed(
  devnet: Devnet,
  { publicClient, deployer }: DeployerClients,
  artifacts: Record<DeployedName, Artifact>,
): Promise<DevnetSwap> {
  const from = deployer.account.address;
  const needed = new Map<SwapAsset, bigint>(); // the deployer's side of all the pools
  for (const pool of SEEDED_POOLS) {
    needed.set(pool.asset, (needed.get(pool.asset) ?? 0n) + units(pool.asset, pool.assetAmount));
    needed.set("USDC", (needed.get("USDC") ?? 0n) + units("USDC", pool.usdcAmount));
  }
  const wethNeeded = needed.get("ETH") ?? 0n;
  // The deployer starts with 10000 ETH; the ERC-4337 stack, if any, spent ~100 of it.
  const balance = await publicClient.getBalance({ address: from });
  if (balance < wethNeeded + 10n ** 19n) {
    throw new Error(`The deployer holds ${balance} wei, too little to wrap ${wethNeeded} wei for the pools`);
  }
  const firstNonce = await publicClient.getTransactionCount({ address: from });
  let nonce = firstNonce;
  // Sent in nonce order without waiting for receipts (the node mines each on arrival), then
  // confirmed together, as startDevnet deploys the tokens.
  const send = (to: Address, data: Hex, value?: bigint) =>
    deployer.sendTransaction({ to, data, value, nonce: nonce++ });
  const confirmAll = async (hashes: Hash[], what: string) => {
    const receipts = await Promise.all(
      hashes.map((hash) => publicClient.waitForTransactionReceipt({ hash })),
    );
    const failed = receipts.find((r) => r.status !== "success");
    if (failed) throw new Error(`${what} failed (tx ${failed.transactionHash})`);
    return receipts;
  };

  // 1. The contracts. Their addresses follow from the deployer's nonces, so each constructor gets
  // its arguments without waiting for the deployments before it.
  const at = (i: number) => getContractAddress({ from, nonce: BigInt(firstNonce + i) });
  const [weth, factory, router, quoter, positionManager] = [at(0), at(1), at(2), at(3), at(4)];
  const deployments: [Artifact, readonly unknown[]][] = [
    [artifacts.weth, []],
    [artifacts.factory, []],
    [artifacts.router, [factory, weth]],
    [artifacts.quoter, [factory, weth]],
    // The token descriptor only serves tokenURI (the positions' NFT metadata): none is needed.
    [artifacts.positionManager, [factory, weth, zeroAddress]],
  ];
  const deployHashes: Hash[] = [];
  for (const [{ abi, bytecode }, args] of deployments) {
    deployHashes.push(await deployer.deployContract({ abi, bytecode, args, nonce: nonce++ }));
  }
  for (const [i, receipt] of (await confirmAll(deployHashes, "Deploying Uniswap v3")).entries()) {
    const expected = at(i);
    if (!receipt.contractAddress || !isAddressEqual(receipt.contractAddress, expected)) {
      throw new Error(`Uniswap v3 contract #${i} landed on ${receipt.contractAddress}, not on ${expected}`);
    }
  }

  // 2. The deployer's side of the pools: wrapped ETH, minted tokens, and the manager's allowances.
  const tokenOf = (asset: SwapAsset): Address => (asset === "ETH" ? weth : devnet.tokens[asset]);
  const fundHashes: Hash[] = [];
  const approve = encodeFunctionData({
    abi: erc20Abi,
    functionName: "approve",
    args: [positionManager, maxUint256],
  });
  for (const [asset, amount] of needed) {
    if (asset === "ETH") fundHashes.push(await send(weth, WETH_DEPOSIT, amount));
    else fundHashes.push(await send(tokenOf(asset), mintData(from, amount)));
    fundHashes.push(await send(tokenOf(asset), approve));
  }
  await confirmAll(fundHashes, "Funding the deployer for the pools");

  // 3. Each pool, created at its price and given full-range liquidity in one transaction.
  const pools: DevnetSwapPool[] = [];
  const seedHashes: Hash[] = [];
  for (const { pair, asset, fee, assetAmount, usdcAmount } of SEEDED_POOLS) {
    const sides = [
      { token: tokenOf(asset), symbol: asset === "ETH" ? "WETH" : asset, amount: units(asset, assetAmount) },
      { token: tokenOf("USDC"), symbol: "USDC", amount: units("USDC", usdcAmount) },
    ] as const;
    // Uniswap orders a pool's tokens by address; the price is token1 per token0.
    const [side0, side1] = BigInt(sides[0].token) < BigInt(sides[1].token) ? sides : [sides[1], sides[0]];
    const tickSpacing = TICK_SPACINGS[fee];
    const [token0, token1] = [side0.token, side1.token];
    const create = [token0, token1, fee, sqrtPriceX96(side0.amount, side1.amount)] as const;
    const mint = {
      token0,
      token1,
      fee,
      ...fullRangeTicks(tickSpacing),
      amount0Desired: side0.amount,
      amount1Desired: side1.amount,
      amount0Min: 0n,
      amount1Min: 0n,
      recipient: from,
      deadline: NO_DEADLINE,
    };
    const abi = POSITION_MANAGER_ABI;
    const calls = [
      encodeFunctionData({ abi, functionName: "createAndInitializePoolIfNecessary", args: create }),
      encodeFunctionData({ abi, functionName: "mint", args: [mint] }),
    ];
    seedHashes.push(
      await send(positionManager, encodeFunctionData({ abi, functionName: "multicall", args: [calls] })),
    );
    const address = poolAddress(factory, token0, token1, fee);
    const [token0Symbol, token1Symbol] = [side0.symbol, side1.symbol];
    pools.push({ pair, fee, tickSpacing, address, token0, token1, token0Symbol, token1Symbol });
  }
  await confirmAll(seedHashes, "Seeding the Uniswap v3 pools");

  // The factory must have put each pool where the periphery's init-code hash says, or the router
  // and the quoter would call empty addresses.
  for (const { pair, address, token0, token1, fee } of pools) {
    const getPool = {
      abi: UNISWAP_V3_FACTORY_ABI,
      functionName: "getPool",
      args: [token0, token1, fee],
    } as const;
    const actual = await publicClient.readContract({ address: factory, ...getPool });
    if (!isAddressEqual(actual, address)) {
      throw new Error(`The ${pair} pool is at ${actual}, not at ${address}: init-code hash mismatch`);
    }
  }
  return { factory, router, quoter, positionManager, weth, pools };
}

/** The CREATE2 address the factory deploys a pool to (v3-periphery's PoolAddress.computeAddress). */
export function poolAddress(factory: Address, token0: Address, token1: Address, fee: number): Address {
  const key = encodeAbiParameters(parseAbiParameters("address, address, uint24"), [token0, token1, fee]);
  const salt = keccak256(key);
  return getContractAddress({ opcode: "CREATE2", from: factory, salt, bytecodeHash: POOL_INIT_CODE_HASH });
}

function units(asset: SwapAsset, whole: bigint): bigint {
  return whole * 10n ** BigInt(TOKEN_DECIMALS[asset]);
}

export interface MoveSwapPoolRequest {
  /** A funded account (ETH for gas); test tokens it lacks are minted to it (TestToken's mint is open). */
  account: DevnetAccount;
  sell: SwapAsset;
  buy: SwapAsset;
  /** In the sold asset's smallest unit (wei for ETH). */
  amountIn: bigint;
}

export interface PoolSwap {
  hash: Hash;
  pool: Address;
  amountIn: bigint;
  /** What the account received, in the bought asset's smallest unit. */
  amountOut: bigint;
  /** The pool's price and tick after the swap. */
  sqrtPriceX96: bigint;
  tick: number;
}

/**
 * Swaps `amountIn` of `sell` for `buy` through the SwapRouter (exactInputSingle, no minimum out)
 * from `account`, in the seeded pool of that pair: for a test that moves a pool's price between a
 * quote and its execution. ETH is sent as msg.value, and bought as WETH that the router unwraps.
 */
export async function moveSwapPool(devnet: Devnet, request: MoveSwapPoolRequest): Promise<PoolSwap> {
  const { swap } = devnet;
  if (!swap) throw new Error("The devnet was started without swaps");
  const { account, sell, buy } = request;
  const pool = swap.pools.find(
    (p) => sell !== buy && [sell, buy].every((a) => p.pair.split("/").includes(a)),
  );
  if (!pool) throw new Error(`No seeded pool swaps ${sell} for ${buy}`);
  // The deployer's transactions go through its queue, so that no other helper races it for a nonce.
  if (isAddressEqual(account.address, devnet.accounts.deployer.address)) {
    return withDeployer(devnet, () => swapThrough(devnet, swap, pool, request));
  }
  return swapThrough(devnet, swap, pool, request);
}

async function swapThrough(
  devnet: Devnet,
  swap: DevnetSwap,
  pool: DevnetSwapPool,
  { account, sell, buy, amountIn }: MoveSwapPoolRequest,
): Promise<PoolSwap> {
  const { chain, rpcUrl } = devnet;
  const transport = http(rpcUrl, { retryCount: 0 });
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 50 });
  const signer = privateKeyToAccount(account.privateKey);
  const wallet = createWalletClient({ chain, transport, account: signer, pollingInterval: 50 });
  const me = signer.address;
  const confirm = async (hash: Hash, what: string) => {
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success") throw new Error(`${what} failed (tx ${hash})`);
    return receipt;
  };
  const tokenIn = sell === "ETH" ? swap.weth : devnet.tokens[sell];
  const tokenOut = buy === "ETH" ? swap.weth : devnet.tokens[buy];
  if (sell !== "ETH") {
    const read = { address: tokenIn, abi: erc20Abi } as const;
    const balance = await publicClient.readContract({ ...read, functionName: "balanceOf", args: [me] });
    if (balance < amountIn) {
      await confirm(
        await wallet.sendTransaction({ to: tokenIn, data: mintData(me, amountIn - balance) }),
        "Mint",
      );
    }
    const allowance = await publicClient.readContract({
      ...read,
      functionName: "allowance",
      args: [me, swap.router],
    });
    if (allowance < amountIn) {
      const args = [swap.router, maxUint256] as const;
      await confirm(await wallet.writeContract({ ...read, functionName: "approve", args }), "Approve");
    }
  }
  const params = {
    tokenIn,
    tokenOut,
    fee: pool.fee,
    // Bought ETH arrives as WETH at the router, which unwraps it to the account in the same call.
    recipient: buy === "ETH" ? swap.router : me,
    deadline: NO_DEADLINE,
    amountIn,
    amountOutMinimum: 0n,
    sqrtPriceLimitX96: 0n,
  };
  const abi = SWAP_ROUTER_ABI;
  const calls = [encodeFunctionData({ abi, functionName: "exactInputSingle", args: [params] })];
  if (buy === "ETH") calls.push(encodeFunctionData({ abi, functionName: "unwrapWETH9", args: [0n, me] }));
  const value = sell === "ETH" ? amountIn : 0n;
  const request = { address: swap.router, abi, functionName: "multicall", args: [calls], value } as const;
  // The node estimates in a pending block that can share the pool's last observation's second and
  // so leave out the oracle write (~4,000 gas) the mined block, a second later, makes: an exact
  // estimate then runs out of gas. Half again as much is headroom; only the gas used is paid.
  const estimate = await publicClient.estimateContractGas({ ...request, account: signer });
  const hash = await wallet.writeContract({ ...request, gas: estimate + estimate / 2n });
  const { logs } = await confirm(hash, `Swapping ${sell} for ${buy}`);
  const events = parseEventLogs({ abi: UNISWAP_V3_POOL_ABI, eventName: "Swap", logs });
  const event = events.find((log) => isAddressEqual(log.address, pool.address));
  if (!event) throw new Error(`The swap (tx ${hash}) left no Swap event on ${pool.address}`);
  const { amount0, amount1, sqrtPriceX96, tick } = event.args;
  // The pool's deltas: positive is what it received, negative what it paid out.
  const amountOut = -(isAddressEqual(pool.token0, tokenOut) ? amount0 : amount1);
  return { hash, pool: pool.address, amountIn, amountOut, sqrtPriceX96, tick };
}
