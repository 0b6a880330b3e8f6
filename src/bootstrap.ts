import { join } from "node:path";
import type { Config } from "./config.ts";
import { type Database, migrate, openDatabase, pgliteDirFor } from "./platform/db/database.ts";
import { loadOrCreateMasterKeyFile, parseMasterKey, SecretBox } from "./platform/secrets/encryption.ts";

/** What the server and the CLI both need before doing anything: a migrated database and the master key. */
export async function openRuntime(config: Config): Promise<{ database: Database; secrets: SecretBox }> {
  const masterKey = config.masterKey
    ? parseMasterKey(config.masterKey)
    : loadOrCreateMasterKeyFile(join(config.dataDir, "master.key"));
  const database = await openDatabase({
    databaseUrl: config.databaseUrl,
    preparedStatements: config.databasePreparedStatements,
    pgliteDir: config.databaseUrl ? undefined : pgliteDirFor(config.dataDir),
  });
  try {
    await migrate(database.db);
  } catch (err) {
    await database.close();
    throw err;
  }
  return { database, secrets: new SecretBox(masterKey) };
}
