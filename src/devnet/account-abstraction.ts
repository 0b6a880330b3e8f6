import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  type Abi,
  type Address,
  concat,
  encodeAbiParameters,
  getAddress,
  getContractAddress,
  type Hex,
  parseAbi,
  parseEther,
  parseTransaction,
} from "viem";
import { type Artifact, sponsoringPaymasterArtifact, verifyingPaymasterArtifact } from "./compile.ts";
import { type DeployerClients, withDeployer } from "./deployer.ts";
import { type LaunchSpec, launch, type NodeExit } from "./launcher.ts";
import { rpc } from "./rpc.ts";
import type { Devnet } from "./types.ts";

// The ERC-4337 stack of the devnet (D11, D14): EntryPoint v0.8 at its canonical address, the
// SimpleAccountFactory that permissionless expects for v0.8, two paymasters (a VerifyingPaymaster
// that pays for what its signer signed, which the devnet's ERC-7677 endpoint signs for, and a bare
// one that sponsors every user operation), and a Pimlico Alto bundler run as a child process
// against the devnet's chain.

/** Arachnid's deterministic CREATE2 deployer (the "0x4e59…" proxy every chain shares). */
export const CREATE2_DEPLOYER: Address = "0x4e59b44847b379578588920cA78FbF26c0B4956C";
/**
 * Its standard presigned, chain-id-less deployment transaction (nonce 0, gas 100000 at 100 gwei,
 * signed by a key nobody holds). Alto ships a copy of it that is corrupted (some "0" replaced by
 * "V"), so the devnet deploys the proxy itself before Alto starts.
 */
const CREATE2_DEPLOYER_TX: Hex =
  "0xf8a58085174876e800830186a08080b853604580600e600039806000f350fe7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffe03601600081602082378035828234f58015156039578182fd5b8082525050506014600cf31ba02222222222222222222222222222222222222222222222222222222222222222a02222222222222222222222222222222222222222222222222222222222222222";
const CREATE2_DEPLOYER_SIGNER: Address = "0x3fAB184622Dc19b6109349B94811493BF2a45362";

/** EntryPoint v0.8. Alto recognises v0.8 by this address's 0x433708 prefix only. */
export const ENTRYPOINT_V08: Address = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108";
/** The official CREATE2 salt that puts EntryPoint v0.8 on {@link ENTRYPOINT_V08}. */
const ENTRYPOINT_V08_SALT: Hex = "0x0a59dbff790c23c976a548690c27297883cc66b4c67024f9117b0238995e35e9";
/** SimpleAccountFactory(EntryPoint v0.8) at CREATE2 salt 0: permissionless's default for v0.8. */
export const SIMPLE_ACCOUNT_FACTORY_V08: Address = "0x13E9ed32155810FDbd067D4522C492D6f68E5944";
const ZERO_SALT: Hex = `0x${"00".repeat(32)}`;

const PAYMASTER_ABI = parseAbi([
  "function deposit() payable",
  "function getDeposit() view returns (uint256)",
]);

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const AA_ARTIFACTS = join(
  dirname(require.resolve("@account-abstraction/contracts/package.json")),
  "artifacts",
);
const NODE_MODULES = join(here, "..", "..", "node_modules");
// Alto's package "exports" hide both its package.json and its CLI: address the file directly.
const ALTO_CLI = join(NODE_MODULES, "@pimlico", "alto", "esm", "cli", "alto.js");
const NODE_COMPILE_CACHE_DIR = join(NODE_MODULES, ".cache", "payments-devnet", "node-compile-cache");

export interface AccountAbstraction {
  entryPoint: Address;
  accountFactory: Address;
  /** The devnet's VerifyingPaymaster (signer {@link paymasterSigner}), with a deposit at the EntryPoint. */
  paymaster: Address;
  /** The key whose signature the VerifyingPaymaster checks. */
  paymasterSigner: Address;
  /** The devnet's SponsoringPaymaster (pays for anything), with a deposit at the EntryPoint. */
  sponsoringPaymaster: Address;
}

export interface DeployAccountAbstractionOptions {
  /** The VerifyingPaymaster's signer. */
  paymasterSigner: Address;
  /** ETH deposited at the EntryPoint for each paymaster, in wei. Default 100 ETH. */
  paymasterDeposit?: bigint;
}

/**
 * Deploys the ERC-4337 contracts with the devnet's deployer account: the CREATE2 deployer, the
 * EntryPoint v0.8 and the SimpleAccountFactory (each skipped when already on chain, and checked to
 * land on its canonical address), then a new SponsoringPaymaster and VerifyingPaymaster, each with
 * a deposit (in that order on every chain, so that both land on the same addresses everywhere).
 */
export function deployAccountAbstraction(
  devnet: Devnet,
  options: DeployAccountAbstractionOptions,
): Promise<AccountAbstraction> {
  return withDeployer(devnet, async (clients) => {
    const entryPoint = await deployEntryPoint(clients);
    return { entryPoint, ...(await deployAccountContracts(clients, entryPoint, options)) };
  });
}

/**
 * Step one of {@link deployAccountAbstraction}, all a bundler needs to start: the CREATE2 deployer
 * and EntryPoint v0.8. The caller serialises the deployer's transactions.
 */
async function deployEntryPoint(clients: DeployerClients): Promise<Address> {
  const { publicClient, deployer } = clients;
  // 1. The CREATE2 deployer: fund the presigned transaction's signer, then broadcast it.
  if (!(await hasCode(clients, CREATE2_DEPLOYER))) {
    const tx = parseTransaction(CREATE2_DEPLOYER_TX);
    const cost = (tx.gas ?? 0n) * (tx.gasPrice ?? 0n);
    const balance = await publicClient.getBalance({ address: CREATE2_DEPLOYER_SIGNER });
    if (balance < cost) {
      await confirm(
        clients,
        await deployer.sendTransaction({ to: CREATE2_DEPLOYER_SIGNER, value: cost - balance }),
        "Funding the CREATE2 deployer's signer",
      );
    }
    await confirm(
      clients,
      await publicClient.sendRawTransaction({ serializedTransaction: CREATE2_DEPLOYER_TX }),
      "Deploying the CREATE2 deployer",
    );
    if (!(await hasCode(clients, CREATE2_DEPLOYER))) throw new Error("The CREATE2 deployer has no code");
  }
  // 2. EntryPoint v0.8 at its canonical address.
  const artifact = await loadArtifact("EntryPoint");
  return create2(clients, ENTRYPOINT_V08_SALT, artifact.bytecode, ENTRYPOINT_V08, "EntryPoint v0.8");
}

/**
 * Step two of {@link deployAccountAbstraction}: the SimpleAccountFactory and the paymasters with
 * their deposits. The caller serialises the deployer's transactions.
 */
async function deployAccountContracts(
  clients: DeployerClients,
  entryPoint: Address,
  options: DeployAccountAbstractionOptions,
): Promise<Omit<AccountAbstraction, "entryPoint">> {
  // Compiled (or loaded from the cache) meanwhile; awaited below (no unhandled rejection meanwhile).
  const artifacts = Promise.all([sponsoringPaymasterArtifact(), verifyingPaymasterArtifact()]);
  artifacts.catch(() => {});

  // 3. SimpleAccountFactory(entryPoint) at its canonical address.
  const factoryArtifact = await loadArtifact("SimpleAccountFactory");
  const accountFactory = await create2(
    clients,
    ZERO_SALT,
    concat([factoryArtifact.bytecode, encodeAbiParameters([{ type: "address" }], [entryPoint])]),
    SIMPLE_ACCOUNT_FACTORY_V08,
    "SimpleAccountFactory",
  );

  // 4. The paymasters (their constructors check the EntryPoint's interface) and their deposits.
  const [sponsoring, verifying] = await artifacts;
  const amount = options.paymasterDeposit ?? parseEther("100");
  const sponsoringPaymaster = await deployPaymaster(clients, sponsoring, [entryPoint], amount);
  const paymaster = await deployPaymaster(clients, verifying, [entryPoint, options.paymasterSigner], amount);
  return { accountFactory, paymaster, paymasterSigner: options.paymasterSigner, sponsoringPaymaster };
}

/** Deploys one paymaster and deposits `amount` for it at the EntryPoint. */
async function deployPaymaster(
  clients: DeployerClients,
  artifact: Artifact,
  args: readonly unknown[],
  amount: bigint,
): Promise<Address> {
  const { publicClient, deployer } = clients;
  const name = artifact.contractName;
  const deployed = await confirm(
    clients,
    await deployer.deployContract({ abi: artifact.abi, bytecode: artifact.bytecode, args }),
    `Deploying the ${name}`,
  );
  if (!deployed.contractAddress) throw new Error(`Deploying the ${name} gave no address`);
  const paymaster = getAddress(deployed.contractAddress);
  if (amount > 0n) {
    await confirm(
      clients,
      await deployer.writeContract({
        address: paymaster,
        abi: PAYMASTER_ABI,
        functionName: "deposit",
        value: amount,
      }),
      `Depositing for the ${name}`,
    );
  }
  const deposit = await publicClient.readContract({
    address: paymaster,
    abi: PAYMASTER_ABI,
    functionName: "getDeposit",
  });
  if (deposit !== amount) throw new Error(`The ${name}'s deposit is ${deposit} wei, not ${amount}`);
  return paymaster;
}

/** Deploys `initCode` through the CREATE2 deployer unless `expected` already has code. */
async function create2(
  clients: DeployerClients,
  salt: Hex,
  initCode: Hex,
  expected: Address,
  what: string,
): Promise<Address> {
  const address = getContractAddress({ opcode: "CREATE2", from: CREATE2_DEPLOYER, salt, bytecode: initCode });
  if (address !== expected) {
    throw new Error(`${what} would land on ${address}, not on ${expected}: wrong bytecode or salt`);
  }
  if (await hasCode(clients, address)) return address;
  // The proxy takes salt ++ init code as calldata and reverts if CREATE2 fails.
  await confirm(
    clients,
    await clients.deployer.sendTransaction({ to: CREATE2_DEPLOYER, data: concat([salt, initCode]) }),
    `Deploying ${what}`,
  );
  if (!(await hasCode(clients, address))) throw new Error(`${what} has no code at ${address}`);
  return address;
}

async function hasCode({ publicClient }: DeployerClients, address: Address): Promise<boolean> {
  return ((await publicClient.getCode({ address })) ?? "0x") !== "0x";
}

async function confirm({ publicClient }: DeployerClients, hash: Hex, what: string) {
  const receipt = await publicClient.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success") throw new Error(`${what} failed (tx ${hash})`);
  return receipt;
}

async function loadArtifact(name: string): Promise<{ abi: Abi; bytecode: Hex }> {
  const parsed = JSON.parse(await readFile(join(AA_ARTIFACTS, `${name}.json`), "utf8")) as {
    abi: Abi;
    bytecode: Hex;
  };
  if (!/^0x[0-9a-fA-F]+$/.test(parsed.bytecode)) throw new Error(`No bytecode in the ${name} artifact`);
  return parsed;
}

// ---------------------------------------------------------------------------------------------
// The bundler (Pimlico Alto)

export interface BundlerOptions {
  /** The chain's JSON-RPC URL. */
  rpcUrl: string;
  /** The EntryPoint the bundler serves (v0.8, canonical address). */
  entryPoint: Address;
  /** Port to listen on (Alto always binds 0.0.0.0); a free one when omitted. */
  port?: number;
  /** Key of the account that sends the bundles (funded, used by nothing else). */
  executorKey: Hex;
  /** Key of the account that deploys Alto's simulation contracts (funded, distinct). */
  utilityKey: Hex;
  /** How long to wait for the bundler to answer. Default 30 s. */
  startTimeoutMs?: number;
  /** Receives Alto's stdout/stderr (its log, warnings and up). Dropped when omitted. */
  onOutput?: (text: string) => void;
}

export interface Bundler {
  /** http://127.0.0.1:<port> */
  url: string;
  /** Process id of the Alto process. */
  pid: number;
  /** Milliseconds from spawn to the first eth_supportedEntryPoints answer listing the EntryPoint. */
  startMs: number;
  /** Resolves when the Alto process has exited, for whatever reason. */
  exited: Promise<NodeExit>;
  /** SIGTERM, SIGKILL after 5 s; resolves once Alto has exited. Idempotent. */
  stop(): Promise<void>;
}

/** Starts Alto as a child process and resolves once it answers `eth_supportedEntryPoints`. */
export async function startBundler(options: BundlerOptions): Promise<Bundler> {
  const alto = await launch({ port: options.port, freeOn: "0.0.0.0" }, (port) => altoSpec(port, options));
  return { url: alto.url, pid: alto.pid, startMs: alto.startMs, exited: alto.exited, stop: alto.stop };
}

async function altoSpec(port: number, options: BundlerOptions): Promise<LaunchSpec<true>> {
  // The config holds private keys: a private directory, removed when Alto stops. Alto also runs
  // there, so that it does not load the project's .env (it calls dotenv).
  const dir = await mkdtemp(join(tmpdir(), "devnet-alto-"));
  const configFile = join(dir, "alto.config.json");
  const config = {
    entrypoints: options.entryPoint,
    "rpc-url": options.rpcUrl,
    port,
    "executor-private-keys": options.executorKey,
    "utility-private-key": options.utilityKey,
    // Hardhat has no JS tracer: with safe mode on, sends fail with "JS Tracer is not enabled".
    "safe-mode": false,
    "deploy-simulations-contract": true,
    // Bundle every 10 ms instead of 100–1,000 ms: one local chain, no competition for block
    // space, and a payout waits for its bundle. Alto adds 10 ms to the interval per operation
    // bundled in the last minute, up to the maximum, so the maximum is what a run of payouts gets
    // (with 50 ms, ~120 ms per payout sent with eth_sendUserOperation instead of ~70 ms).
    "min-bundle-interval": 10,
    "max-bundle-interval": 10,
    // Alto polls for new blocks every block-time / 4 and frees an executor only when its block
    // watcher sees the executor's bundle mined; until then the next operation waits. The devnet
    // mines each transaction at once (automine), so with the default 1,000 ms every operation
    // that followed another within ~250 ms waited for that poll: sequential smart wallet payouts
    // took ~250 ms each, ~100 ms with this (a poll every 25 ms).
    "block-time": 100,
    // pimlico_sendUserOperationNow: the service's payouts wait for their receipt, so it asks for
    // its operation to be bundled at once (LIVE_BUNDLER_INSTANT_BUNDLING in the devnet env file).
    "enable-instant-bundling-endpoint": true,
    // Gas estimation is a binary search, each round a simulation of the whole operation, between
    // the simulated minimum and minimum + allowance (default 30,000,000, sized for any call on a
    // public chain), stopping when the bounds are within the tolerance (default 10,000 gas). The
    // service's operations are token and ETH transfers: 1,000,000 above the minimum bounds them
    // with room to spare, and a 50,000 tolerance over-estimates by at most that (EntryPoint v0.8
    // charges 10% of unused execution gas above 40,000, to the paymaster). Half the rounds:
    // estimation went from ~100 ms to ~50 ms on the local node.
    "binary-search-gas-allowance": "1000000",
    "binary-search-tolerance-delta": "50000",
    // "info" logs whole RPC payloads.
    "log-level": "warn",
    // viem first tries eth_fillTransaction, which Hardhat lacks, then falls back: Alto's wallet
    // client would log that as an ERROR on the first bundle. Bundle failures still show up in the
    // executor's own log lines and in the user operations' status.
    "wallet-client-log-level": "fatal",
  };
  await writeFile(configFile, JSON.stringify(config, null, 2), { mode: 0o600 });

  // ALTO_* variables would override the config file (yargs .env("ALTO")); SENTRY_DSN would report.
  const env: NodeJS.ProcessEnv = {
    FORCE_COLOR: "0",
    NO_COLOR: "1",
    // Loading Alto's modules costs ~2 s of CPU; Node's on-disk compile cache takes a part off.
    NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE ?? NODE_COMPILE_CACHE_DIR,
  };
  for (const [name, value] of Object.entries(process.env)) {
    if (!name.startsWith("ALTO_") && name !== "SENTRY_DSN" && name !== "DOTENV_CONFIG_PATH")
      env[name] ??= value;
  }
  const url = `http://127.0.0.1:${port}`;
  const entryPoint = options.entryPoint.toLowerCase();
  return {
    name: "Alto",
    args: [ALTO_CLI, "--config", configFile],
    cwd: dir,
    env,
    url,
    startTimeoutMs: options.startTimeoutMs,
    onOutput: options.onOutput,
    probe: async () => {
      const supported = await rpc(url, "eth_supportedEntryPoints", [], 500).catch(() => undefined);
      const listed = (a: unknown) => typeof a === "string" && a.toLowerCase() === entryPoint;
      return Array.isArray(supported) && supported.some(listed) ? true : undefined;
    },
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
}
