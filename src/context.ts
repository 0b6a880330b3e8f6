import type { FastifyBaseLogger } from "fastify";
import type { Network } from "./chain/network.ts";
import type { TransactionSender } from "./chain/transaction-sender.ts";
import type { Config, Environment } from "./config.ts";
import type { NetworkDirectory } from "./modules/networks/directory.ts";
import type { InFlight } from "./platform/concurrency/in-flight.ts";
import type { Db } from "./platform/db/database.ts";
import type { Metrics } from "./platform/metrics/metrics.ts";
import type { SecretBox } from "./platform/secrets/encryption.ts";

/** What every module's service is built from: configuration, the database and shared tools. */
export interface AppContext {
  config: Config;
  db: Db;
  secrets: SecretBox;
  log: FastifyBaseLogger;
  /** The EVM network of each environment that has one configured (D3, D14). */
  networks: Partial<Record<Environment, Network>>;
  /** Which networks each environment has, and the one a request goes to (D22). */
  directory: NetworkDirectory;
  /** One nonce-ordered sender per network, shared by settlement, payouts and gas top-ups. */
  senders: Partial<Record<Environment, TransactionSender>>;
  /** Injectable clock: tests move time instead of sleeping. */
  now: () => Date;
  /** Requests being answered and writes nobody awaits: shutdown waits for them (graceful-close.ts). */
  inFlight: InFlight;
  /** Counters and gauges for Prometheus (platform/metrics); inert when metrics are off. */
  metrics: Metrics;
}
