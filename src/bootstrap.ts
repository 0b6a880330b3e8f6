import { existsSync } from "node:fs";
import { join } from "node:path";
import { sql } from "kysely";
import { type Config, ConfigError } from "./config.ts";
import { type Database, type Db, migrate, openDatabase, pgliteDirFor } from "./platform/db/database.ts";
import { loadOrCreateMasterKeyFile, parseMasterKey, SecretBox } from "./platform/secrets/encryption.ts";

/** What the server and the CLI both need before doing anything: a migrated database and the master key. */
export async function openRuntime(
  config: Config,
): Promise<{ database: Database; secrets: SecretBox; newerMigrations: string[] }> {
  const database = await openDatabase({
    databaseUrl: config.databaseUrl,
    preparedStatements: config.databasePreparedStatements,
    pgliteDir: config.databaseUrl ? undefined : pgliteDirFor(config.dataDir),
  });
  try {
    const { newer } = await migrate(database.db);
    const { key, source } = await masterKey(config, database.db);
    const secrets = new SecretBox(key);
    await verifyMasterKey(database.db, secrets, source);
    return { database, secrets, newerMigrations: newer };
  } catch (err) {
    await database.close();
    throw err;
  }
}

/** The start-up refusal of a key that cannot open the database's secrets (main.ts prints it on one line). */
export class MasterKeyMismatch extends ConfigError {
  override name = "MasterKeyMismatch";
}

// The master key check (migration 015): one row holding this text sealed with the key. AES-GCM's
// tag makes any other key fail to open it, so every instance proves at start-up that it uses the
// key the others wrote with, before it writes a secret of its own.
const CHECK_PLAINTEXT = "master key check v1";

export type KeySource = "MASTER_KEY" | { file: string };

async function masterKey(config: Config, db: Db): Promise<{ key: Buffer; source: KeySource }> {
  if (config.masterKey) return { key: parseMasterKey(config.masterKey), source: "MASTER_KEY" };
  const file = join(config.dataDir, "master.key");
  // A new key file over a database that already holds secrets would only make them unreadable.
  if (!existsSync(file) && ((await readCheck(db)) !== undefined || (await sealedSecrets(db)).length > 0)) {
    throw new MasterKeyMismatch(
      `${file} is missing, but this database holds secrets encrypted with a master key: restore the file or set MASTER_KEY to that key`,
    );
  }
  return { key: loadOrCreateMasterKeyFile(file), source: { file } };
}

/**
 * Refuses a key that does not open the check row. The first start writes the row; on a database
 * from before the check it does so only if the key opens the secrets already stored. Instances
 * starting together each insert (the first one wins) and then check what was kept.
 */
export async function verifyMasterKey(db: Db, secrets: SecretBox, source: KeySource): Promise<void> {
  let sealed = await readCheck(db);
  if (sealed === undefined) {
    for (const existing of await sealedSecrets(db)) {
      if (opens(secrets, existing) === undefined) throw mismatch(source);
    }
    await sql`
      INSERT INTO master_key_check (id, sealed) VALUES (true, ${secrets.encrypt(CHECK_PLAINTEXT)})
      ON CONFLICT (id) DO NOTHING`.execute(db);
    sealed = await readCheck(db);
  }
  if (sealed === undefined || opens(secrets, sealed) !== CHECK_PLAINTEXT) throw mismatch(source);
}

async function readCheck(db: Db): Promise<string | undefined> {
  const { rows } = await sql<{ sealed: string }>`SELECT sealed FROM master_key_check WHERE id`.execute(db);
  return rows[0]?.sealed;
}

/** The oldest sealed secret of each kind: the ones the database's first key wrote. */
async function sealedSecrets(db: Db): Promise<string[]> {
  const { rows } = await sql<{ sealed: string }>`
    (SELECT encrypted_private_key AS sealed FROM workspace_wallets
      WHERE encrypted_private_key IS NOT NULL ORDER BY created_at LIMIT 1)
    UNION ALL
    (SELECT encrypted_secret FROM webhook_endpoints ORDER BY created_at LIMIT 1)
    UNION ALL
    (SELECT encrypted_private_key FROM agent_wallets ORDER BY created_at LIMIT 1)`.execute(db);
  return rows.map((row) => row.sealed);
}

/** The plaintext, or undefined when this key cannot open it (GCM's tag does not verify). */
function opens(secrets: SecretBox, sealed: string): string | undefined {
  try {
    return secrets.decrypt(sealed);
  } catch {
    return undefined;
  }
}

function mismatch(source: KeySource): MasterKeyMismatch {
  const which = source === "MASTER_KEY" ? "MASTER_KEY" : `The master key in ${source.file}`;
  return new MasterKeyMismatch(`${which} does not match the key this database's secrets were encrypted with`);
}
