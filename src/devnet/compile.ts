import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Abi, Hex } from "viem";

// Compiles the devnet's Solidity sources with solc-js from npm (never a downloaded compiler, never
// the network). Artifacts are kept in memory and on disk under node_modules/.cache (gitignored),
// keyed by a hash of the sources, the compiler version and the settings, so only the first run
// pays for loading the compiler (~1–2 s).

export interface Artifact {
  contractName: string;
  abi: Abi;
  bytecode: Hex;
}

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const ROOT = join(here, "..", "..");
const CACHE_DIR = join(ROOT, "node_modules", ".cache", "payments-devnet");
const CONTRACTS_DIR = join(here, "contracts");
/** Solidity libraries the sources may import from, by import prefix (npm packages, no remappings). */
const LIBRARIES = ["@openzeppelin/contracts", "@account-abstraction/contracts"].map((pkg) => ({
  prefix: `${pkg}/`,
  dir: dirname(require.resolve(`${pkg}/package.json`)),
  version: (require(`${pkg}/package.json`) as { version: string }).version,
}));

const SETTINGS = {
  optimizer: { enabled: true, runs: 200 },
  evmVersion: "cancun",
  outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } },
} as const;

const memory = new Map<string, Artifact>();

/** The TestToken artifact: ERC-20 with constructor(name, symbol, decimals) and an open mint. */
export function testTokenArtifact(): Promise<Artifact> {
  return compileContract("TestToken.sol", "TestToken");
}

/**
 * The TestTokenWithAuthorization artifact: TestToken plus ERC-3009 (transferWithAuthorization, as
 * USDC has it for x402), with the same constructor; its EIP-712 domain is (name, "2").
 */
export function testTokenWithAuthorizationArtifact(): Promise<Artifact> {
  return compileContract("TestTokenWithAuthorization.sol", "TestTokenWithAuthorization");
}

/** The Multicall3 artifact (devnet): Multicall3's aggregate, tryAggregate and aggregate3, no constructor arguments. */
export function multicall3Artifact(): Promise<Artifact> {
  return compileContract("Multicall3.sol", "Multicall3");
}

/**
 * The Permit2 artifact (devnet): Uniswap Permit2's SignatureTransfer (permitWitnessTransferFrom,
 * unordered nonces), no constructor; src/devnet/permit2.ts puts it at Permit2's canonical address.
 */
export function permit2Artifact(): Promise<Artifact> {
  return compileContract("Permit2.sol", "Permit2");
}

/**
 * The x402 `upto` Permit2 proxy artifact (devnet): settle and settleWithPermit as @x402/evm calls
 * them, Permit2's address a constant, no constructor; placed at its canonical address too.
 */
export function x402UptoPermit2ProxyArtifact(): Promise<Artifact> {
  return compileContract("X402UptoPermit2Proxy.sol", "x402UptoPermit2Proxy");
}

/** The WETH9 artifact: wrapped ether on OpenZeppelin's ERC20 (deposit, withdraw, receive), no constructor arguments. */
export function weth9Artifact(): Promise<Artifact> {
  return compileContract("WETH9.sol", "WETH9");
}

/**
 * The SponsoringPaymaster artifact (devnet only): an ERC-4337 v0.8 paymaster with
 * constructor(entryPoint) that sponsors every user operation.
 */
export function sponsoringPaymasterArtifact(): Promise<Artifact> {
  return compileContract("SponsoringPaymaster.sol", "SponsoringPaymaster");
}

/**
 * The VerifyingPaymaster artifact (devnet): an ERC-4337 v0.8 paymaster with
 * constructor(entryPoint, verifyingSigner) that pays only for operations its signer signed.
 */
export function verifyingPaymasterArtifact(): Promise<Artifact> {
  return compileContract("VerifyingPaymaster.sol", "VerifyingPaymaster");
}

/**
 * The CostlyReceiver artifact (devnet tests only): a contract taking plain ETH whose receiving code
 * burns `burnGas` gas or refuses it, with constructor(burnGas, refusing) and set(burnGas, refusing).
 */
export function costlyReceiverArtifact(): Promise<Artifact> {
  return compileContract("CostlyReceiver.sol", "CostlyReceiver");
}

/** Compiles `file` (relative to src/devnet/contracts) and returns contract `name` from it. */
export async function compileContract(file: string, name: string): Promise<Artifact> {
  const source = await readFile(join(CONTRACTS_DIR, file), "utf8");
  const solcVersion = (require("solc/package.json") as { version: string }).version;
  // Imported sources are covered by their package's version.
  const libraries = LIBRARIES.map((l) => `${l.prefix}${l.version}`);
  const key = createHash("sha256")
    .update(JSON.stringify({ file, name, source, solcVersion, libraries, SETTINGS }))
    .digest("hex")
    .slice(0, 16);

  const cached = memory.get(key) ?? (await readCache(key));
  if (cached) {
    memory.set(key, cached);
    return cached;
  }
  const artifact = await runSolc(file, source, name);
  memory.set(key, artifact);
  await writeCache(key, artifact);
  return artifact;
}

interface SolcOutput {
  errors?: { severity: "error" | "warning" | "info"; formattedMessage: string }[];
  contracts?: Record<string, Record<string, { abi: Abi; evm: { bytecode: { object: string } } }>>;
}

async function runSolc(file: string, source: string, name: string): Promise<Artifact> {
  // Loaded on demand: the compiler is large and a cache hit never needs it.
  const { default: solc } = await import("solc");
  const input = {
    language: "Solidity",
    sources: { [file]: { content: source } },
    settings: SETTINGS,
  };
  const findImports = (path: string): { contents: string } | { error: string } => {
    // solc hands over normalised paths: a library's relative imports arrive with its prefix.
    const library = LIBRARIES.find((l) => path.startsWith(l.prefix));
    if (!library || path.includes("..")) return { error: `Import not allowed: ${path}` };
    try {
      return { contents: readFileSync(join(library.dir, path.slice(library.prefix.length)), "utf8") };
    } catch {
      return { error: `Import not found: ${path}` };
    }
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports })) as SolcOutput;
  const errors = (output.errors ?? []).filter((e) => e.severity === "error");
  if (errors.length > 0) {
    throw new Error(`solc failed for ${file}:\n${errors.map((e) => e.formattedMessage).join("\n")}`);
  }
  const contract = output.contracts?.[file]?.[name];
  if (!contract?.evm.bytecode.object) throw new Error(`solc produced no bytecode for ${name} in ${file}`);
  return { contractName: name, abi: contract.abi, bytecode: `0x${contract.evm.bytecode.object}` };
}

async function readCache(key: string): Promise<Artifact | undefined> {
  try {
    const parsed = JSON.parse(await readFile(join(CACHE_DIR, `${key}.json`), "utf8")) as Artifact;
    return Array.isArray(parsed.abi) && /^0x[0-9a-f]+$/.test(parsed.bytecode) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

async function writeCache(key: string, artifact: Artifact): Promise<void> {
  try {
    await mkdir(CACHE_DIR, { recursive: true });
    // Write then rename so a concurrent reader never sees half a file.
    const tmp = join(CACHE_DIR, `${key}.${process.pid}.tmp`);
    await writeFile(tmp, JSON.stringify(artifact));
    await rename(tmp, join(CACHE_DIR, `${key}.json`));
  } catch {
    // The disk cache is an optimisation only; the in-memory artifact is enough.
  }
}
