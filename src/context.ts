import type { FastifyBaseLogger } from "fastify";
import type { Config } from "./config.ts";
import type { Db } from "./platform/db/database.ts";
import type { SecretBox } from "./platform/secrets/encryption.ts";

/** What every module's service is built from: configuration, the database and shared tools. */
export interface AppContext {
  config: Config;
  db: Db;
  secrets: SecretBox;
  log: FastifyBaseLogger;
  /** Injectable clock: tests move time instead of sleeping. */
  now: () => Date;
}
