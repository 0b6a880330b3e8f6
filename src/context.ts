import type { FastifyBaseLogger } from "fastify";
import type { Chains } from "./chain/chains.ts";
import type { Config } from "./config.ts";
import type { NetworkDirectory } from "./modules/networks/directory.ts";
import type { InFlight } from "./platform/concurrency/in-flight.ts";
import type { Db } from "./platform/db/database.ts";
import type { Metrics } from "./platform/metrics/metrics.ts";
import type { SecretBox } from "./platform/secrets/encryption.ts";
import type { ScryptCost } from "./platform/secrets/hashing.ts";

/** What every module's service is built from: configuration, the database and shared tools. */
export interface AppContext {
  config: Config;
  db: Db;
  secrets: SecretBox;
  log: FastifyBaseLogger;
  /** Each environment's configured EVM networks, with their senders (D3, D14, D22). */
  chains: Chains;
  /** Which networks each environment has, and the one a request goes to (D22). */
  directory: NetworkDirectory;
  /** Injectable clock: tests move time instead of sleeping. */
  now: () => Date;
  /** Requests being answered and writes nobody awaits: shutdown waits for them (graceful-close.ts). */
  inFlight: InFlight;
  /** Counters and gauges for Prometheus (platform/metrics); inert when metrics are off. */
  metrics: Metrics;
  /** scrypt's cost for admin passwords: PASSWORD_COST, unless a suite built the app cheaper. */
  passwordCost: ScryptCost;
}
