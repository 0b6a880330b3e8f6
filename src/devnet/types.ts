import type { Address, Chain, Hex } from "viem";
import type { NodeExit } from "./launcher.ts";

// The shape of a running devnet, apart from the code that starts it (chain.ts) so that the
// modules it uses (account-abstraction.ts, deployer.ts) can name it without importing chain.ts.

export type TokenSymbol = "USDC" | "ADAO" | "DAI";

/** What a devnet swap sells or buys: a test token, or ETH (WETH in the pools). */
export type SwapAsset = TokenSymbol | "ETH";

/** The seeded Uniswap v3 pools, each USDC against one asset. */
export type SwapPair = "USDC/ETH" | "USDC/DAI" | "USDC/ADAO";

export interface DevnetAccount {
  address: Address;
  privateKey: Hex;
}

export interface DevnetOptions {
  /** Port on 127.0.0.1; a free one when omitted. */
  port?: number;
  /** The chain id; Hardhat's 31337 when omitted. A second devnet takes another (D22: one chain per network). */
  chainId?: number;
  /** Interval mining period; 0 leaves only automine (a block per transaction). Default 1000. */
  blockTimeMs?: number;
  /** How long to wait for the node to answer. Default 30 s. */
  startTimeoutMs?: number;
  /** Receives the node's stdout/stderr (it logs every RPC call). Dropped when omitted. */
  onOutput?: (text: string) => void;
  /**
   * Also deploy the ERC-4337 contracts and start an Alto bundler (on a free port, bound to
   * 0.0.0.0) using accounts #4 and #5; see {@link Devnet.aa}. Default false.
   */
  accountAbstraction?: boolean;
  /** The bundler's port (Alto binds it on 0.0.0.0); a free one when omitted. */
  bundlerPort?: number;
  /** The ERC-7677 paymaster endpoint's port on 127.0.0.1; a free one when omitted. */
  paymasterPort?: number;
  /** Receives the bundler's stdout/stderr (Alto's log, warnings and up). Dropped when omitted. */
  onBundlerOutput?: (text: string) => void;
  /**
   * Also deploy WETH9 and Uniswap v3 (factory, SwapRouter, QuoterV2, NonfungiblePositionManager)
   * and seed the pools of SEEDED_POOLS (src/devnet/uniswap.ts); see {@link Devnet.swap}. Default
   * false: it costs most tests time for nothing.
   */
  swaps?: boolean;
}

/** One seeded Uniswap v3 pool: full-range liquidity held by the deployer. */
export interface DevnetSwapPool {
  pair: SwapPair;
  /** Fee tier in hundredths of a basis point (500 = 0.05 %, 3000 = 0.3 %). */
  fee: number;
  tickSpacing: number;
  /** The pool contract, as the factory's getPool gives it. */
  address: Address;
  /** The pool's tokens, sorted by address as Uniswap does (token0 < token1). */
  token0: Address;
  token1: Address;
  token0Symbol: TokenSymbol | "WETH";
  token1Symbol: TokenSymbol | "WETH";
}

/** Uniswap v3 of a devnet started with `swaps: true` (D16). */
export interface DevnetSwap {
  /** UniswapV3Factory (v3-core 1.0.1 artifact, as shipped). */
  factory: Address;
  /** SwapRouter (v3-periphery artifact, as shipped). */
  router: Address;
  /** QuoterV2: its quote functions are non-view, for eth_call only. */
  quoter: Address;
  /** NonfungiblePositionManager; it holds the seeded positions' NFTs for the deployer. */
  positionManager: Address;
  /** The devnet's WETH9, the router's and the quoter's WETH. */
  weth: Address;
  /** The seeded pools, in the order of SEEDED_POOLS. */
  pools: DevnetSwapPool[];
}

/** The ERC-4337 stack of a devnet started with `accountAbstraction: true`. */
export interface DevnetAccountAbstraction {
  /** EntryPoint v0.8, canonical address. */
  entryPoint: Address;
  /** SimpleAccountFactory for that EntryPoint, permissionless's default address for v0.8. */
  accountFactory: Address;
  /**
   * The VerifyingPaymaster (funded at the EntryPoint): it pays for the operations its signer signed,
   * which the devnet's ERC-7677 endpoint ({@link paymasterUrl}) signs for, every gas limit included.
   */
  paymaster: Address;
  /** The address of the key the VerifyingPaymaster checks signatures against. */
  paymasterSigner: Address;
  /** The devnet's ERC-7677 paymaster service (http://127.0.0.1:<port>), signing for {@link paymaster}. */
  paymasterUrl: string;
  /**
   * A bare paymaster (funded too) that sponsors every user operation with no paymaster data: the
   * `<P>_PAYMASTER_ADDRESS` mode. Devnet only: anyone could drain it.
   */
  sponsoringPaymaster: Address;
  /** The Alto bundler's JSON-RPC URL (http://127.0.0.1:<port>). */
  bundlerUrl: string;
  /** Process id of the Alto bundler. */
  bundlerPid: number;
  /** Resolves when the bundler process has exited, for whatever reason. */
  bundlerExited: Promise<NodeExit>;
}

export interface Devnet {
  rpcUrl: string;
  chainId: number;
  chain: Chain;
  /** Process id of the Hardhat node. */
  pid: number;
  tokens: Record<TokenSymbol, Address>;
  accounts: {
    deployer: DevnetAccount;
    treasury: DevnetAccount;
    gasFunder: DevnetAccount;
    payer: DevnetAccount;
  };
  /** Present when started with `accountAbstraction: true`. */
  aa?: DevnetAccountAbstraction;
  /** Present when started with `swaps: true`. */
  swap?: DevnetSwap;
  /**
   * Milliseconds from spawn to the first eth_chainId answer, for deploying and minting the tokens,
   * (with account abstraction) for deploying its contracts and until the bundler answers, and (with
   * swaps) for deploying Uniswap v3 and seeding its pools.
   */
  timings: {
    nodeStartMs: number;
    deployMs: number;
    aaDeployMs?: number;
    bundlerStartMs?: number;
    swapDeployMs?: number;
  };
  /** Resolves when the node process has exited, for whatever reason. */
  exited: Promise<NodeExit>;
  /**
   * Stops the bundler if any, then the node (each SIGTERM, SIGKILL after 5 s), and resolves once
   * both have exited. Idempotent.
   */
  stop(): Promise<void>;
}
