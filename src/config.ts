import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { parseEnv } from "node:util";
import ipaddr from "ipaddr.js";
import { parseMasterKey } from "./platform/secrets/encryption.ts";

// Every environment variable the service reads, parsed and validated in one place. A bad value
// stops the start with a message naming the variable; nothing downstream reads process.env.

export const ENVIRONMENTS = ["sandbox", "live"] as const;
export type Environment = (typeof ENVIRONMENTS)[number];

/** One environment's EVM network (D14). Absent when its RPC URL is unset. */
export interface NetworkConfig {
  environment: Environment;
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
  /** ERC-4337 (D11): present when a bundler is configured for this network. */
  accountAbstraction:
    | {
        bundlerUrl: string;
        paymasterAddress: string;
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

/** Uniswap v3 contracts of a network (D16); swaps there answer 503 without them. */
export interface SwapConfig {
  routerAddress: string;
  quoterAddress: string;
  factoryAddress: string;
  wethAddress: string;
  /** The pools' fee tiers (hundredths of a basis point) a quote compares. */
  feeTiers: number[];
}

/** The hosted card checkout provider (Stripe Checkout API) of one environment. */
export interface CardProviderConfig {
  secretKey: string;
  webhookSecret: string | undefined;
}

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  /** Repeated statements run as named prepared statements on PostgreSQL (off behind old PgBouncers). */
  databasePreparedStatements: boolean;
  adminSecret: string | undefined;
  publicBaseUrl: string;
  /** Always set with `databaseUrl`; unset → the embedded database's `DATA_DIR/master.key`. */
  masterKey: string | undefined;
  accountSettlementAddress: string | undefined;
  redisUrl: string | undefined;
  /**
   * Addresses or CIDR ranges of the reverse proxies in front of the service: a request from one
   * of them is counted (rate limits, failed authentication) by the client its X-Forwarded-For names.
   */
  trustProxy: string[];
  rateLimit: { windowMs: number; sandbox: number; live: number };
  /**
   * Prometheus metrics: served at /metrics to a bearer `token`, and/or on a listener of their own
   * (`port` on `host`, loopback by default). Neither set: nothing is collected.
   */
  metrics: { token: string | undefined; port: number | undefined; host: string };
  logLevel: string;
  role: "all" | "api" | "worker";
  smtpUrl: string | undefined;
  /** Lets webhooks of both environments reach non-public addresses, and live ones use plain http (local development, D7, D21). */
  webhookAllowPrivate: boolean;
  networks: { sandbox: NetworkConfig | undefined; live: NetworkConfig | undefined };
  card: {
    sandbox: CardProviderConfig | undefined;
    live: CardProviderConfig | undefined;
    /** A self-hosted Stripe-compatible endpoint (tests point it at a local fake provider). */
    apiBase: string | undefined;
  };
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

type Env = Record<string, string | undefined>;

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!/^[0-9]+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max)
    throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`);
  return value;
}

function boolean(env: Env, name: string, fallback = false): boolean {
  const raw = optional(env, name);
  if (raw === undefined) return fallback;
  if (raw === "false" || raw === "0") return false;
  if (raw === "true" || raw === "1") return true;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

function optional(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === "" ? undefined : value.trim();
}

function url(env: Env, name: string, protocols: string[]): string | undefined {
  const value = optional(env, name);
  if (value === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    throw new ConfigError(`${name} is not a valid URL`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(" or ")}`);
  }
  return value;
}

function metrics(env: Env): Config["metrics"] {
  const token = optional(env, "METRICS_TOKEN");
  if (token !== undefined && token.length < 16)
    throw new ConfigError("METRICS_TOKEN must be at least 16 characters");
  const port = integer(env, "METRICS_PORT", -1, 1, 65535);
  return { token, port: port === -1 ? undefined : port, host: optional(env, "METRICS_HOST") ?? "127.0.0.1" };
}

function trustedProxies(env: Env): string[] {
  const raw = optional(env, "TRUST_PROXY");
  if (raw === undefined) return [];
  const entries = raw.split(",").map((entry) => entry.trim());
  for (const entry of entries) {
    if (!ipaddr.isValid(entry) && !ipaddr.isValidCIDR(entry)) {
      throw new ConfigError(
        `TRUST_PROXY must list IP addresses or CIDR ranges separated by commas, got "${entry}"`,
      );
    }
  }
  return entries;
}

/**
 * Several instances share a server database, and each would otherwise make a key file of its own:
 * secrets one of them writes would be unreadable to the others. A server database needs the key.
 */
function masterKey(env: Env, databaseUrl: string | undefined): string | undefined {
  const value = optional(env, "MASTER_KEY");
  if (value === undefined) {
    if (databaseUrl !== undefined) {
      throw new ConfigError(
        "MASTER_KEY is required when DATABASE_URL is set: every instance on one database must use the same key (64 hex characters, e.g. from `openssl rand -hex 32`)",
      );
    }
    return undefined;
  }
  try {
    parseMasterKey(value);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
  return value;
}

function card(env: Env, suffix: "SANDBOX" | "LIVE"): CardProviderConfig | undefined {
  const secretKey = optional(env, `CARD_SECRET_KEY_${suffix}`);
  const webhookSecret = optional(env, `CARD_WEBHOOK_SECRET_${suffix}`);
  if (!secretKey) {
    if (webhookSecret)
      throw new ConfigError(`CARD_WEBHOOK_SECRET_${suffix} is set without CARD_SECRET_KEY_${suffix}`);
    return undefined;
  }
  if (!/^(sk|rk)_(test|live)_[0-9A-Za-z_]+$/.test(secretKey)) {
    throw new ConfigError(`CARD_SECRET_KEY_${suffix} must be a provider secret key (sk_test_… / sk_live_…)`);
  }
  if (webhookSecret !== undefined && !webhookSecret.startsWith("whsec_")) {
    throw new ConfigError(`CARD_WEBHOOK_SECRET_${suffix} must be a webhook signing secret (whsec_…)`);
  }
  return { secretKey, webhookSecret };
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
  const paymasterAddress = address("PAYMASTER_ADDRESS", false);
  if (!paymasterAddress) {
    throw new ConfigError(
      `${p}_PAYMASTER_ADDRESS is required when ${p}_BUNDLER_URL is set (smart wallet gas is sponsored)`,
    );
  }
  return {
    bundlerUrl,
    paymasterAddress,
    entryPointAddress: address("ENTRYPOINT_ADDRESS", false) ?? CANONICAL_ENTRYPOINT_V08,
    accountFactoryAddress: address("ACCOUNT_FACTORY_ADDRESS", false) ?? SIMPLE_ACCOUNT_FACTORY_V08,
    instantBundling: boolean(env, `${p}_BUNDLER_INSTANT_BUNDLING`),
  };
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

function network(env: Env, environment: Environment): NetworkConfig | undefined {
  const p = environment.toUpperCase();
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
 * Sandbox and live on one chain would share the workspace EOA's funds (one key for both) and see
 * every transfer twice (D21). The message names the variables only: an RPC URL may carry a key.
 */
function distinctNetworks(networks: Config["networks"]): Config["networks"] {
  const { sandbox, live } = networks;
  if (!sandbox || !live) return networks;
  if (sandbox.chainId === live.chainId) {
    throw new ConfigError(
      `SANDBOX_CHAIN_ID and LIVE_CHAIN_ID name the same chain (${live.chainId}): sandbox and live must be different networks`,
    );
  }
  if (endpoint(sandbox.rpcUrl) === endpoint(live.rpcUrl)) {
    throw new ConfigError(
      "SANDBOX_RPC_URL and LIVE_RPC_URL point at the same node: sandbox and live must be different networks",
    );
  }
  return networks;
}

/**
 * Variables from NETWORK_ENV_FILE (written by `npm run devnet`) fill in what the environment
 * leaves unset: variables already set win (D13).
 */
export function withEnvFile(env: Env): Env {
  const file = optional(env, "NETWORK_ENV_FILE");
  if (!file) return env;
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ConfigError(`NETWORK_ENV_FILE cannot be read: ${(err as Error).message}`);
  }
  return { ...parseEnv(text), ...env };
}

export function loadConfig(rawEnv: Env = process.env): Config {
  const env = withEnvFile(rawEnv);
  const port = integer(env, "PORT", 3000, 0, 65535);
  const adminSecret = optional(env, "ADMIN_SECRET");
  if (adminSecret !== undefined && adminSecret.length < 16) {
    throw new ConfigError("ADMIN_SECRET must be at least 16 characters");
  }
  const accountSettlementAddress = optional(env, "ACCOUNT_SETTLEMENT_ADDRESS");
  if (accountSettlementAddress !== undefined && !ADDRESS.test(accountSettlementAddress)) {
    throw new ConfigError("ACCOUNT_SETTLEMENT_ADDRESS must be 0x followed by 40 hex characters");
  }
  const role = optional(env, "ROLE") ?? "all";
  if (role !== "all" && role !== "api" && role !== "worker") {
    throw new ConfigError(`ROLE must be all, api or worker, got "${role}"`);
  }
  const databaseUrl = url(env, "DATABASE_URL", ["postgres:", "postgresql:"]);
  const publicBaseUrl = (
    url(env, "PUBLIC_BASE_URL", ["http:", "https:"]) ?? `http://localhost:${port}`
  ).replace(/\/+$/, "");
  return {
    port,
    host: optional(env, "HOST") ?? "0.0.0.0",
    dataDir: resolve(optional(env, "DATA_DIR") ?? "./data"),
    databaseUrl,
    databasePreparedStatements: boolean(env, "DATABASE_PREPARED_STATEMENTS", true),
    adminSecret,
    publicBaseUrl,
    masterKey: masterKey(env, databaseUrl),
    accountSettlementAddress,
    redisUrl: url(env, "REDIS_URL", ["redis:", "rediss:"]),
    trustProxy: trustedProxies(env),
    rateLimit: {
      windowMs: integer(env, "RATE_LIMIT_WINDOW_SECONDS", 60, 1, 86_400) * 1000,
      sandbox: integer(env, "RATE_LIMIT_SANDBOX", 100, 1, 10_000_000),
      live: integer(env, "RATE_LIMIT_LIVE", 1000, 1, 10_000_000),
    },
    metrics: metrics(env),
    logLevel: optional(env, "LOG_LEVEL") ?? "info",
    role,
    smtpUrl: url(env, "SMTP_URL", ["smtp:", "smtps:"]),
    webhookAllowPrivate: boolean(env, "WEBHOOK_ALLOW_PRIVATE"),
    networks: distinctNetworks({ sandbox: network(env, "sandbox"), live: network(env, "live") }),
    card: {
      sandbox: card(env, "SANDBOX"),
      live: card(env, "LIVE"),
      apiBase: url(env, "CARD_API_BASE", ["http:", "https:"]),
    },
  };
}
