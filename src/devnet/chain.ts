import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  type Address,
  createPublicClient,
  createWalletClient,
  defineChain,
  getAddress,
  type Hash,
  type Hex,
  http,
  parseAbi,
  parseUnits,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { TOKEN_DECIMALS } from "../domain/money.ts";
import { type Bundler, deployAccountAbstraction, startBundler } from "./account-abstraction.ts";
import {
  multicall3Artifact,
  permit2Artifact,
  testTokenArtifact,
  testTokenWithAuthorizationArtifact,
  x402UptoPermit2ProxyArtifact,
} from "./compile.ts";
import { registerDeployer, withDeployer } from "./deployer.ts";
import { launch } from "./launcher.ts";
import { installMulticall3, MULTICALL3_ADDRESS } from "./multicall3.ts";
import { type PaymasterService, startPaymasterService } from "./paymaster-service.ts";
import { installPermit2 } from "./permit2.ts";
import { rpc } from "./rpc.ts";
import type { Devnet, DevnetAccount, DevnetOptions, TokenSymbol } from "./types.ts";
import { deployUniswap, loadUniswapArtifacts } from "./uniswap.ts";

// A local EVM chain for development and tests (D3, D13, D14): a Hardhat 3 node (EDR) run as a
// child process on 127.0.0.1, mining a block every second and on each transaction, with the
// service's test tokens deployed and a payer account holding plenty of each (USDC with ERC-3009's
// transferWithAuthorization, EIP-712 domain "USDC" version "2", as x402's `exact` scheme settles
// it), Multicall3 at its canonical address (src/devnet/multicall3.ts), Permit2 and x402's `upto`
// Permit2 proxy at theirs (src/devnet/permit2.ts); optionally the ERC-4337 stack too (D11):
// EntryPoint v0.8, SimpleAccountFactory, a verifying paymaster with the ERC-7677 endpoint that signs
// for it (src/devnet/paymaster-service.ts), a bare sponsoring one and an Alto bundler
// (src/devnet/account-abstraction.ts); optionally WETH9 and Uniswap v3 with seeded pools (D16,
// src/devnet/uniswap.ts).

// The devnet's public face: tests and benches import from this module alone, so it passes on the
// names that its parts (deployer.ts, launcher.ts, multicall3.ts, permit2.ts, rpc.ts, types.ts,
// uniswap.ts, uniswap-abi.ts) define.
export { type DeployerClients, withDeployer } from "./deployer.ts";
export { freePort, type NodeExit } from "./launcher.ts";
export { MULTICALL3_ABI, MULTICALL3_ADDRESS } from "./multicall3.ts";
export { PERMIT2_ABI, PERMIT2_ADDRESS, X402_UPTO_PROXY_ADDRESS } from "./permit2.ts";
export { rpc } from "./rpc.ts";
export type {
  Devnet,
  DevnetAccount,
  DevnetAccountAbstraction,
  DevnetOptions,
  DevnetSwap,
  DevnetSwapPool,
  SwapAsset,
  SwapPair,
  TokenSymbol,
} from "./types.ts";
export {
  fullRangeTicks,
  type MoveSwapPoolRequest,
  moveSwapPool,
  type PoolSwap,
  poolAddress,
  SEEDED_POOLS,
  type SeededPool,
  sqrtPriceX96,
  TICK_SPACINGS,
} from "./uniswap.ts";
export {
  POOL_INIT_CODE_HASH,
  POSITION_MANAGER_ABI,
  QUOTER_V2_ABI,
  SWAP_ROUTER_ABI,
  UNISWAP_V3_FACTORY_ABI,
  UNISWAP_V3_POOL_ABI,
  WETH9_ABI,
} from "./uniswap-abi.ts";

/** The test tokens the devnet deploys, with the decimals the service's catalogue gives them. */
export const TOKENS: Record<TokenSymbol, { name: string; decimals: number }> = {
  // Its name is its EIP-712 domain's name too (TestTokenWithAuthorization), as on Base Sepolia.
  USDC: { name: "USDC", decimals: TOKEN_DECIMALS.USDC },
  ADAO: { name: "ADAO (devnet)", decimals: TOKEN_DECIMALS.ADAO },
  DAI: { name: "Dai Stablecoin (devnet)", decimals: TOKEN_DECIMALS.DAI },
};

/**
 * The first well-known accounts of Hardhat's default mnemonic ("test test … junk"), each funded
 * with 10000 ETH at genesis. #0–#3 are used below; #4 and #5 are the bundler's executor and
 * utility keys, so that the payer stays an account of its own (D13); #6 is the key the devnet's
 * paymaster service signs with (it needs no ETH).
 */
export const WELL_KNOWN_ACCOUNTS: readonly DevnetAccount[] = [
  {
    address: "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
    privateKey: "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
  },
  {
    address: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
    privateKey: "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
  },
  {
    address: "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
    privateKey: "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
  },
  {
    address: "0x90F79bf6EB2c4f870365E785982E1f101E93b906",
    privateKey: "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
  },
  {
    address: "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65",
    privateKey: "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
  },
  {
    address: "0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc",
    privateKey: "0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba",
  },
  {
    address: "0x976EA74026E726554dB657fA54763abd0C3a0aa9",
    privateKey: "0x92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e",
  },
];

function wellKnown(index: number): DevnetAccount {
  const account = WELL_KNOWN_ACCOUNTS[index];
  if (!account) throw new Error(`No well-known account #${index}`);
  return account;
}

/**
 * The EIP-712 domain of the devnet's USDC (EIP-3009), without chainId and verifyingContract: what
 * x402 payment requirements give as `extra` for it.
 */
export const USDC_EIP712 = { name: TOKENS.USDC.name, version: "2" } as const;

/** Whole tokens minted to the payer at start, per token. */
export const PAYER_TOKEN_BALANCE = 1_000_000_000n;

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const HARDHAT_CLI = join(ROOT, "node_modules", "hardhat", "dist", "src", "cli.js");
const MINT_ABI = parseAbi(["function mint(address to, uint256 amount)"]);

export async function startDevnet(options: DevnetOptions = {}): Promise<Devnet> {
  const blockTimeMs = options.blockTimeMs ?? 1000;
  // Compiled (or loaded from the cache) while the node starts; USDC alone has EIP-3009.
  const artifactPromises = {
    token: testTokenArtifact(),
    usdc: testTokenWithAuthorizationArtifact(),
    multicall3: multicall3Artifact(),
    permit2: permit2Artifact(),
    uptoProxy: x402UptoPermit2ProxyArtifact(),
  };
  // Awaited below; no unhandled rejection meanwhile.
  for (const p of Object.values(artifactPromises)) p.catch(() => {});
  const uniswapArtifacts = options.swaps ? loadUniswapArtifacts() : undefined; // likewise
  uniswapArtifacts?.catch(() => {});

  const node = await launch({ port: options.port, freeOn: "127.0.0.1" }, async (port) => {
    const url = `http://127.0.0.1:${port}`;
    return {
      name: "the Hardhat node",
      args: [
        HARDHAT_CLI,
        "node",
        "--hostname",
        "127.0.0.1",
        "--port",
        `${port}`,
        ...(options.chainId === undefined ? [] : ["--chain-id", `${options.chainId}`]),
      ],
      cwd: ROOT,
      env: { ...process.env, FORCE_COLOR: "0", NO_COLOR: "1" },
      url,
      startTimeoutMs: options.startTimeoutMs,
      onOutput: options.onOutput,
      probe: async () => {
        const chainId = await rpc(url, "eth_chainId", [], 500).catch(() => undefined);
        return typeof chainId === "string" ? Number(BigInt(chainId)) : undefined;
      },
    };
  });
  const { url: rpcUrl, ready: chainId, exited, startMs: nodeStartMs } = node;
  const stopNode = node.stop;
  let bundler: Bundler | undefined;
  let paymasterService: PaymasterService | undefined;
  const stop = once(async () => {
    // The bundler first: it would keep calling a node that is gone.
    try {
      await Promise.all([bundler?.stop(), paymasterService?.stop()]);
    } finally {
      await stopNode();
    }
  });
  try {
    // `hardhat node` logs (and decodes) every RPC call; nobody reads it unless onOutput is given,
    // and on a simulation-heavy call (the bundler's) the logging costs more than the call.
    if (!options.onOutput) await rpc(rpcUrl, "hardhat_setLoggingEnabled", [false]);
    if (blockTimeMs > 0) {
      await rpc(rpcUrl, "evm_setAutomine", [true]);
      await rpc(rpcUrl, "evm_setIntervalMining", [blockTimeMs]);
    }
    const chain = defineChain({
      id: chainId,
      name: "Devnet",
      nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
      rpcUrls: { default: { http: [rpcUrl] } },
      contracts: { multicall3: { address: MULTICALL3_ADDRESS } },
    });
    const accounts = {
      deployer: wellKnown(0),
      treasury: wellKnown(1),
      gasFunder: wellKnown(2),
      payer: wellKnown(3),
    };
    const transport = http(rpcUrl, { retryCount: 0 });
    const publicClient = createPublicClient({ chain, transport, pollingInterval: 50 });
    const deployer = createWalletClient({
      chain,
      transport,
      account: privateKeyToAccount(accounts.deployer.privateKey),
      pollingInterval: 50,
    });

    const deployStart = performance.now();
    const artifacts = { token: await artifactPromises.token, usdc: await artifactPromises.usdc };
    const symbols = Object.keys(TOKENS) as TokenSymbol[];
    let nonce = await publicClient.getTransactionCount({ address: accounts.deployer.address });
    const deployHashes: Hash[] = [];
    for (const symbol of symbols) {
      const artifact = symbol === "USDC" ? artifacts.usdc : artifacts.token;
      deployHashes.push(
        await deployer.deployContract({
          abi: artifact.abi,
          bytecode: artifact.bytecode,
          args: [TOKENS[symbol].name, symbol, TOKENS[symbol].decimals],
          nonce: nonce++,
        }),
      );
    }
    const tokens = {} as Record<TokenSymbol, Address>;
    for (const [i, hash] of deployHashes.entries()) {
      const receipt = await publicClient.waitForTransactionReceipt({ hash });
      const symbol = symbols[i] as TokenSymbol;
      if (receipt.status !== "success" || !receipt.contractAddress) {
        throw new Error(`Deploying ${symbol} failed (tx ${hash})`);
      }
      tokens[symbol] = getAddress(receipt.contractAddress);
    }
    const mintHashes: Hash[] = [];
    for (const symbol of symbols) {
      mintHashes.push(
        await deployer.writeContract({
          address: tokens[symbol],
          abi: MINT_ABI,
          functionName: "mint",
          args: [accounts.payer.address, PAYER_TOKEN_BALANCE * 10n ** BigInt(TOKENS[symbol].decimals)],
          nonce: nonce++,
        }),
      );
    }
    for (const hash of mintHashes) {
      const receipt = await publicClient.waitForTransactionReceipt({ hash });
      if (receipt.status !== "success") throw new Error(`Minting to the payer failed (tx ${hash})`);
    }
    await installMulticall3(rpcUrl, await artifactPromises.multicall3);
    await installPermit2(rpcUrl, {
      permit2: await artifactPromises.permit2,
      uptoProxy: await artifactPromises.uptoProxy,
    });
    const deployMs = Math.round(performance.now() - deployStart);

    const devnet: Devnet = {
      rpcUrl,
      chainId,
      chain,
      pid: node.pid,
      tokens,
      accounts,
      timings: { nodeStartMs, deployMs },
      exited,
      stop,
    };
    registerDeployer(devnet, { publicClient, deployer });

    // Both go through the deployer's queue: the ERC-4337 contracts first, since the bundler needs
    // them, then Uniswap, deployed while the bundler starts.
    const aaStart = performance.now();
    const signer = wellKnown(6);
    const aaContracts = options.accountAbstraction
      ? deployAccountAbstraction(devnet, { paymasterSigner: signer.address })
      : undefined;
    const uniswap = options.swaps ? deployUniswap(devnet, uniswapArtifacts) : undefined;
    uniswap?.catch(() => {}); // awaited below, once the bundler is up (or failed)
    if (aaContracts) {
      const contracts = await aaContracts;
      const aaDeployMs = Math.round(performance.now() - aaStart);
      paymasterService = await startPaymasterService({
        chainId,
        entryPoint: contracts.entryPoint,
        paymaster: contracts.paymaster,
        signerKey: signer.privateKey,
        port: options.paymasterPort,
      });
      bundler = await startBundler({
        rpcUrl,
        entryPoint: contracts.entryPoint,
        port: options.bundlerPort,
        executorKey: wellKnown(4).privateKey,
        utilityKey: wellKnown(5).privateKey,
        startTimeoutMs: options.startTimeoutMs,
        onOutput: options.onBundlerOutput,
      });
      devnet.aa = {
        ...contracts,
        paymasterUrl: paymasterService.url,
        bundlerUrl: bundler.url,
        bundlerPid: bundler.pid,
        bundlerExited: bundler.exited,
      };
      devnet.timings = { ...devnet.timings, aaDeployMs, bundlerStartMs: bundler.startMs };
    }
    if (uniswap) {
      const { swap, ms } = await uniswap;
      devnet.swap = swap;
      devnet.timings = { ...devnet.timings, swapDeployMs: ms };
    }
    return devnet;
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * Mints `amount` of a test token to `to` from the deployer and waits for the receipt. A bigint is
 * in the token's smallest unit; a string is a decimal amount of whole tokens ("12.5").
 */
export function mintToken(
  devnet: Devnet,
  symbol: TokenSymbol,
  to: Address,
  amount: bigint | string,
): Promise<Hash> {
  const units = typeof amount === "bigint" ? amount : parseUnits(amount, TOKENS[symbol].decimals);
  return withDeployer(devnet, async ({ publicClient, deployer }) => {
    const hash = await deployer.writeContract({
      address: devnet.tokens[symbol],
      abi: MINT_ABI,
      functionName: "mint",
      args: [to, units],
    });
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success") throw new Error(`Minting ${symbol} failed (tx ${hash})`);
    return hash;
  });
}

/** `evm_snapshot`: returns an id for {@link revert}. Hardhat forgets a snapshot once reverted to. */
export async function snapshot(devnet: Devnet): Promise<Hex> {
  return (await rpc(devnet.rpcUrl, "evm_snapshot", [])) as Hex;
}

/** `evm_revert` to a snapshot (blocks, balances, nonces); throws if the id is unknown or used. */
export async function revert(devnet: Devnet, id: Hex): Promise<void> {
  // Wait for deployer transactions in flight so that none straddles the revert.
  await withDeployer(devnet, async () => {
    const ok = await rpc(devnet.rpcUrl, "evm_revert", [id]);
    if (ok !== true) throw new Error(`evm_revert(${id}) failed: unknown or already used snapshot`);
  });
}

/** Mines `blocks` empty blocks at once (`hardhat_mine`), e.g. to reach a confirmation depth. */
export async function mine(devnet: Devnet, blocks = 1): Promise<void> {
  await rpc(devnet.rpcUrl, "hardhat_mine", [`0x${blocks.toString(16)}`]);
}

function once(fn: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  return () => {
    running ??= fn();
    return running;
  };
}
