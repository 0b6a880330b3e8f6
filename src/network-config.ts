import type { Config, Environment } from "./config.ts";
import { ADDRESS, boolean, ConfigError, type Env, integer, optional, url } from "./config-values.ts";

// The networks an environment's money moves on (D14, D22), read from its variables.

/** One of an environment's EVM networks (D14, D22). */
export interface NetworkConfig {
  environment: Environment;
  /** The short lowercase id the API names it by (D22): `default` for one set by `<ENV>_…` variables. */
  id: string;
  /** Its CAIP-2 chain id, `eip155:<chainId>`. */
  caip2: string;
  /** Its name for people (the hosted page, the dashboard). */
  name: string;
  rpcUrl: string;
  chainId: number;
  tokens: { USDC: string; ADAO: string; DAI: string | undefined };
  treasuryAddress: string;
  confirmations: number;
  gasFunderKey: string | undefined;
  /** Workspace EOAs below this many wei of ETH are topped up to `gasTopUpTarget`. */
  gasTopUpThreshold: bigint;
  gasTopUpTarget: bigint;
  pollIntervalMs: number;
  /** A block explorer's base URL (`<explorer>/tx/<hash>`), for the dashboard's links; optional. */
  explorerUrl: string | undefined;
  /**
   * A public RPC endpoint a payer's wallet may add the network with (the hosted page's
   * `wallet_addEthereumChain`); optional. Never `rpcUrl`, which may carry the operator's key.
   */
  walletRpcUrl: string | undefined;
  /** ERC-4337 (D11): present when a bundler is configured for this network. */
  accountAbstraction:
    | {
        bundlerUrl: string;
        /** Who pays the operations' gas. */
        paymaster: PaymasterConfig;
        entryPointAddress: string;
        accountFactoryAddress: string;
        /**
         * The bundler offers `pimlico_sendUserOperationNow` (Alto's instant bundling endpoint,
         * Pimlico's hosted API): an operation is bundled at once and answered with its receipt.
         */
        instantBundling: boolean;
      }
    | undefined;
  swap: SwapConfig | undefined;
}

/**
 * Who pays a smart wallet operation's gas (D11): an ERC-7677 paymaster service, which signs each
 * operation with all its gas limits (`<P>_PAYMASTER_URL`, the URL may carry an API key), or a
 * paymaster contract named by its bare address, whose empty data signs nothing
 * (`<P>_PAYMASTER_ADDRESS`, e.g. the devnet's sponsoring one).
 */
export type PaymasterConfig =
  | {
      kind: "service";
      url: string;
      /** ERC-7677's context object, as the service defines it (a sponsorship policy id, …). */
      context: Record<string, unknown> | undefined;
    }
  | { kind: "address"; address: string };

/** Uniswap v3 contracts of a network (D16); swaps there answer 503 without them. */
export interface SwapConfig {
  routerAddress: string;
  quoterAddress: string;
  factoryAddress: string;
  wethAddress: string;
  /** The pools' fee tiers (hundredths of a basis point) a quote compares. */
  feeTiers: number[];
}

const CANONICAL_ENTRYPOINT_V08 = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108";
const SIMPLE_ACCOUNT_FACTORY_V08 = "0x13E9ed32155810FDbd067D4522C492D6f68E5944";

function accountAbstraction(
  env: Env,
  p: string,
  address: (name: string, required: boolean) => string | undefined,
): NetworkConfig["accountAbstraction"] {
  const bundlerUrl = url(env, `${p}_BUNDLER_URL`, ["http:", "https:"]);
  if (!bundlerUrl) return undefined;
  return {
    bundlerUrl,
    paymaster: paymaster(env, p, address),
    entryPointAddress: address("ENTRYPOINT_ADDRESS", false) ?? CANONICAL_ENTRYPOINT_V08,
    accountFactoryAddress: address("ACCOUNT_FACTORY_ADDRESS", false) ?? SIMPLE_ACCOUNT_FACTORY_V08,
    instantBundling: boolean(env, `${p}_BUNDLER_INSTANT_BUNDLING`),
  };
}

function paymaster(
  env: Env,
  p: string,
  address: (name: string, required: boolean) => string | undefined,
): PaymasterConfig {
  const serviceUrl = url(env, `${p}_PAYMASTER_URL`, ["http:", "https:"]);
  const bare = address("PAYMASTER_ADDRESS", false);
  const rawContext = optional(env, `${p}_PAYMASTER_CONTEXT`);
  if (serviceUrl && bare)
    throw new ConfigError(
      `${p}_PAYMASTER_URL and ${p}_PAYMASTER_ADDRESS are both set: a network has one paymaster, a service or a bare address`,
    );
  if (rawContext !== undefined && !serviceUrl)
    throw new ConfigError(`${p}_PAYMASTER_CONTEXT is set without ${p}_PAYMASTER_URL: it is the service's`);
  if (bare) return { kind: "address", address: bare };
  if (!serviceUrl)
    throw new ConfigError(
      `${p}_PAYMASTER_URL or ${p}_PAYMASTER_ADDRESS is required when ${p}_BUNDLER_URL is set (smart wallet gas is sponsored)`,
    );
  let context: unknown;
  try {
    context = rawContext === undefined ? undefined : JSON.parse(rawContext);
  } catch {
    context = null;
  }
  if (context !== undefined && (typeof context !== "object" || context === null || Array.isArray(context)))
    throw new ConfigError(
      `${p}_PAYMASTER_CONTEXT must be a JSON object, e.g. {"sponsorshipPolicyId":"sp_1"}`,
    );
  return { kind: "service", url: serviceUrl, context: context as Record<string, unknown> | undefined };
}

const SWAP_ADDRESSES = ["SWAP_ROUTER_ADDRESS", "SWAP_QUOTER_ADDRESS", "SWAP_FACTORY_ADDRESS", "WETH_ADDRESS"];

function swap(
  env: Env,
  p: string,
  address: (name: string, required: boolean) => string | undefined,
): SwapConfig | undefined {
  const given = SWAP_ADDRESSES.filter((name) => optional(env, `${p}_${name}`) !== undefined);
  if (given.length === 0) return undefined;
  const missing = SWAP_ADDRESSES.filter((name) => !given.includes(name));
  if (missing.length > 0) {
    throw new ConfigError(
      `${missing.map((name) => `${p}_${name}`).join(", ")} required with ${p}_${given[0]} (swaps need all four Uniswap v3 addresses)`,
    );
  }
  const tiersRaw = optional(env, `${p}_SWAP_FEE_TIERS`) ?? "100,500,3000,10000";
  const feeTiers = tiersRaw.split(",").map((tier) => tier.trim());
  if (feeTiers.some((tier) => !/^[0-9]{1,6}$/.test(tier) || Number(tier) >= 1_000_000)) {
    throw new ConfigError(`${p}_SWAP_FEE_TIERS must be fee tiers separated by commas, e.g. 500,3000,10000`);
  }
  return {
    routerAddress: address("SWAP_ROUTER_ADDRESS", true) as string,
    quoterAddress: address("SWAP_QUOTER_ADDRESS", true) as string,
    factoryAddress: address("SWAP_FACTORY_ADDRESS", true) as string,
    wethAddress: address("WETH_ADDRESS", true) as string,
    feeTiers: [...new Set(feeTiers.map(Number))],
  };
}

/** The id of the one network an environment's `<ENV>_…` variables describe (D22). */
export const DEFAULT_NETWORK_ID = "default";

/** A chain's name for people where the configuration gives none. */
export const chainName = (chainId: number): string => (chainId === 8453 ? "Base" : `Chain ${chainId}`);

/** A network id (D22): a short lowercase slug. */
export const NETWORK_ID = /^[a-z][a-z0-9-]{0,31}$/;

/** The ids the sandbox's simulated networks have (D22): a chain may not take them. */
const SIMULATED_IDS = /^sandbox-/;

/** The prefix of a network's variables: `LIVE` for `default`, `LIVE_BASE` for `base`, `LIVE_DEVNET_B` for `devnet-b`. */
export function networkPrefix(environment: Environment, id: string): string {
  const p = environment.toUpperCase();
  return id === DEFAULT_NETWORK_ID ? p : `${p}_${id.toUpperCase().replaceAll("-", "_")}`;
}

/**
 * An environment's networks, the default first (D22). `<ENV>_NETWORKS` lists their ids (`base,polygon`),
 * each read from `<ENV>_<ID>_…` variables, `default` from the unprefixed `<ENV>_…` ones; without it the
 * environment has `default` when `<ENV>_RPC_URL` is set, and no network otherwise.
 */
export function networks(env: Env, environment: Environment): NetworkConfig[] {
  const p = environment.toUpperCase();
  const listed = optional(env, `${p}_NETWORKS`);
  if (listed === undefined) {
    const one = network(env, environment, DEFAULT_NETWORK_ID);
    return one ? [one] : [];
  }
  const ids = listed.split(",").map((id) => id.trim());
  for (const id of ids) {
    if (!NETWORK_ID.test(id)) {
      throw new ConfigError(
        `${p}_NETWORKS must list network ids (lowercase letters, digits and "-", starting with a letter), got "${id}"`,
      );
    }
    if (SIMULATED_IDS.test(id))
      throw new ConfigError(`${p}_NETWORKS: "${id}" is kept for the sandbox's simulated networks`);
  }
  const twice = ids.find((id, i) => ids.indexOf(id) !== i);
  if (twice !== undefined) throw new ConfigError(`${p}_NETWORKS names ${twice} twice`);
  if (!ids.includes(DEFAULT_NETWORK_ID) && optional(env, `${p}_RPC_URL`) !== undefined) {
    throw new ConfigError(
      `${p}_RPC_URL is set but ${p}_NETWORKS does not list default: list it, or unset ${p}_RPC_URL`,
    );
  }
  return ids.map((id) => {
    const one = network(env, environment, id);
    if (!one)
      throw new ConfigError(
        `${networkPrefix(environment, id)}_RPC_URL is required: ${p}_NETWORKS lists ${id}`,
      );
    return one;
  });
}

/** The network `id` of an environment, from its variables; none when its RPC URL is unset. */
function network(env: Env, environment: Environment, id: string): NetworkConfig | undefined {
  const p = networkPrefix(environment, id);
  const rpcUrl = url(env, `${p}_RPC_URL`, ["http:", "https:", "ws:", "wss:"]);
  if (!rpcUrl) return undefined;
  const address = (name: string, required: boolean): string | undefined => {
    const value = optional(env, `${p}_${name}`);
    if (value === undefined) {
      if (required) throw new ConfigError(`${p}_${name} is required when ${p}_RPC_URL is set`);
      return undefined;
    }
    if (!ADDRESS.test(value)) throw new ConfigError(`${p}_${name} must be 0x followed by 40 hex characters`);
    return value;
  };
  const gasFunderKey = optional(env, `${p}_GAS_FUNDER_KEY`);
  if (gasFunderKey !== undefined && !/^0x[0-9a-fA-F]{64}$/.test(gasFunderKey)) {
    throw new ConfigError(`${p}_GAS_FUNDER_KEY must be 0x followed by 64 hex characters`);
  }
  const chainId = integer(env, `${p}_CHAIN_ID`, -1, 1, 2 ** 53 - 1);
  if (chainId === -1) throw new ConfigError(`${p}_CHAIN_ID is required when ${p}_RPC_URL is set`);
  const wei = (name: string, fallback: bigint): bigint => {
    const raw = optional(env, `${p}_${name}`);
    if (raw === undefined) return fallback;
    if (!/^[0-9]+$/.test(raw)) throw new ConfigError(`${p}_${name} must be a whole number of wei`);
    return BigInt(raw);
  };
  return {
    environment,
    id,
    caip2: `eip155:${chainId}`,
    name: optional(env, `${p}_NAME`) ?? chainName(chainId),
    rpcUrl,
    chainId,
    tokens: {
      USDC: address("USDC_ADDRESS", true) as string,
      ADAO: address("ADAO_ADDRESS", true) as string,
      DAI: address("DAI_ADDRESS", false),
    },
    treasuryAddress: address("TREASURY_ADDRESS", true) as string,
    confirmations: integer(env, `${p}_CONFIRMATIONS`, 2, 1, 1000),
    gasFunderKey,
    gasTopUpThreshold: wei("GAS_TOPUP_THRESHOLD_WEI", 2_000_000_000_000_000n),
    gasTopUpTarget: wei("GAS_TOPUP_TARGET_WEI", 10_000_000_000_000_000n),
    pollIntervalMs: integer(env, `${p}_POLL_INTERVAL_MS`, 1000, 50, 60_000),
    explorerUrl: url(env, `${p}_EXPLORER_URL`, ["http:", "https:"])?.replace(/\/+$/, ""),
    // http too, for a local devnet: the wallet decides which endpoints it accepts.
    walletRpcUrl: url(env, `${p}_WALLET_RPC_URL`, ["http:", "https:"]),
    accountAbstraction: accountAbstraction(env, p, address),
    swap: swap(env, p, address),
  };
}

/** An RPC URL as a node is reached: lower-case scheme and host, no default port or trailing slash, ws as http. */
function endpoint(raw: string): string {
  const parsed = new URL(raw);
  parsed.pathname = parsed.pathname.replace(/\/+$/, "");
  return parsed.href.replace(/^ws(s?):/, "http$1:").replace(/\/+$/, "");
}

/**
 * Two networks on one chain would share the workspace EOA's funds (one key for all) and see every
 * transfer twice (D21, D22): no two of all the environments' networks may name one chain id or one
 * node. The message names the variables only: an RPC URL may carry a key.
 */
export function distinctNetworks(networks: Config["networks"]): Config["networks"] {
  const all = [...networks.sandbox, ...networks.live];
  for (const [i, a] of all.entries()) {
    for (const b of all.slice(i + 1)) {
      const [pa, pb] = [networkPrefix(a.environment, a.id), networkPrefix(b.environment, b.id)];
      const rule =
        a.environment === b.environment
          ? `the networks of ${a.environment} must be different chains`
          : "sandbox and live must be different networks";
      if (a.chainId === b.chainId)
        throw new ConfigError(
          `${pa}_CHAIN_ID and ${pb}_CHAIN_ID name the same chain (${a.chainId}): ${rule}`,
        );
      if (endpoint(a.rpcUrl) === endpoint(b.rpcUrl))
        throw new ConfigError(`${pa}_RPC_URL and ${pb}_RPC_URL point at the same node: ${rule}`);
    }
  }
  return networks;
}
