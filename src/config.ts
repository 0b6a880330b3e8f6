import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { parseEnv } from "node:util";
import ipaddr from "ipaddr.js";
import { ADDRESS, boolean, ConfigError, type Env, integer, optional, url } from "./config-values.ts";
import { BACKLOG_PER_SECOND, PROBE_INTERVAL_MS } from "./domain/retry-schedule.ts";
import { distinctNetworks, type NetworkConfig, networks } from "./network-config.ts";
import { inFileTerms, withNetworksFile } from "./networks-file.ts";
import { parseMasterKey } from "./platform/secrets/encryption.ts";

export { ConfigError } from "./config-values.ts";
export type { NetworkConfig, SwapConfig } from "./network-config.ts";

// Every environment variable the service reads, parsed and validated in one place. A bad value
// stops the start with a message naming the variable; nothing downstream reads process.env.

export const ENVIRONMENTS = ["sandbox", "live"] as const;
export type Environment = (typeof ENVIRONMENTS)[number];

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
  /** Open status streams of the hosted page (`/pay/{id}/events`) per instance: per payment, per client address. */
  hostedPageStreams: { perPayment: number; perAddress: number };
  /**
   * How long a live transfer belongs to the instance sending it without a renewal: after a crash,
   * its transfers wait this long before the reconciler finishes them.
   */
  transferLeaseSeconds: number;
  /** How soon another instance takes over a periodic job (the chain watcher…) after its leader stops. */
  jobLeaseSeconds: number;
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
  /**
   * Deliveries a second to one registration when its waiting backlog is sent after it answers 2xx
   * again (issue 43); held in the rows' due times, so for all instances together.
   */
  webhookEndpointRatePerSecond: number;
  /**
   * While a registration fails, its oldest waiting delivery is tried this often without using up a
   * retry (a probe), so a receiver that comes back is found without a new event (issue 43).
   */
  webhookProbeSeconds: number;
  /** Each environment's networks, its default first (D22). */
  networks: Record<Environment, NetworkConfig[]>;
  card: {
    sandbox: CardProviderConfig | undefined;
    live: CardProviderConfig | undefined;
    /** A self-hosted Stripe-compatible endpoint (tests point it at a local fake provider). */
    apiBase: string | undefined;
  };
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
  const networksFile = withNetworksFile(env);
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
    hostedPageStreams: {
      perPayment: integer(env, "HOSTED_PAGE_SSE_PER_PAYMENT", 20, 1, 100_000),
      perAddress: integer(env, "HOSTED_PAGE_SSE_PER_ADDRESS", 50, 1, 100_000),
    },
    transferLeaseSeconds: integer(env, "TRANSFER_LEASE_SECONDS", 20, 4, 3600),
    jobLeaseSeconds: integer(env, "JOB_LEASE_SECONDS", 10, 3, 3600),
    metrics: metrics(env),
    logLevel: optional(env, "LOG_LEVEL") ?? "info",
    role,
    smtpUrl: url(env, "SMTP_URL", ["smtp:", "smtps:"]),
    webhookAllowPrivate: boolean(env, "WEBHOOK_ALLOW_PRIVATE"),
    webhookEndpointRatePerSecond: integer(
      env,
      "WEBHOOK_ENDPOINT_RATE_PER_SECOND",
      BACKLOG_PER_SECOND,
      1,
      10_000,
    ),
    webhookProbeSeconds: integer(env, "WEBHOOK_PROBE_SECONDS", PROBE_INTERVAL_MS / 1000, 1, 3600),
    networks: inFileTerms(networksFile.places, () =>
      distinctNetworks({
        sandbox: networks(networksFile.env, "sandbox"),
        live: networks(networksFile.env, "live"),
      }),
    ),
    card: {
      sandbox: card(env, "SANDBOX"),
      live: card(env, "LIVE"),
      apiBase: url(env, "CARD_API_BASE", ["http:", "https:"]),
    },
  };
}
