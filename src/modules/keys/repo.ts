import { type Kysely, sql } from "kysely";
import type { Environment } from "../../config.ts";
import { columnsOf } from "../../platform/db/columns.ts";
import type { ApiKeyRow, ApiKeysTable, DatabaseSchema } from "../../platform/db/schema.ts";

/** An API key's whole row, named column by column (platform/db/columns.ts). */
export const API_KEY_COLUMNS = columnsOf<ApiKeysTable>({
  id: true,
  workspace_id: true,
  environment: true,
  name: true,
  prefix: true,
  key_hash: true,
  created_at: true,
  last_used_at: true,
  revoked_at: true,
});

export async function insertKey(
  db: Kysely<DatabaseSchema>,
  values: {
    workspaceId: string;
    environment: Environment;
    name: string | null;
    prefix: string;
    keyHash: string;
  },
): Promise<ApiKeyRow> {
  return db
    .insertInto("api_keys")
    .values({
      workspace_id: values.workspaceId,
      environment: values.environment,
      name: values.name,
      prefix: values.prefix,
      key_hash: values.keyHash,
    })
    .returning(API_KEY_COLUMNS)
    .executeTakeFirstOrThrow();
}

/** The keys with these hashes, by hash (one statement whatever the number of hashes). */
export async function findKeysByHashes(
  db: Kysely<DatabaseSchema>,
  keyHashes: readonly string[],
): Promise<Map<string, ApiKeyRow>> {
  const rows = await db
    .selectFrom("api_keys")
    .select(API_KEY_COLUMNS)
    .where(sql<boolean>`key_hash = any(${[...keyHashes]}::text[])`)
    .execute();
  return new Map(rows.map((row) => [row.key_hash, row]));
}

export async function listKeys(
  db: Kysely<DatabaseSchema>,
  workspaceId: string,
  environment: Environment,
): Promise<ApiKeyRow[]> {
  return db
    .selectFrom("api_keys")
    .select(API_KEY_COLUMNS)
    .where("workspace_id", "=", workspaceId)
    .where("environment", "=", environment)
    .orderBy("created_at", "asc")
    .orderBy("id", "asc")
    .execute();
}

/** Revokes a key of the workspace and environment; the first revocation time is kept. */
export async function revokeKey(
  db: Kysely<DatabaseSchema>,
  workspaceId: string,
  environment: Environment,
  id: string,
  at: Date,
): Promise<boolean> {
  const result = await db
    .updateTable("api_keys")
    .set((eb) => ({ revoked_at: eb.fn.coalesce("revoked_at", eb.val(at)) }))
    .where("id", "=", id)
    .where("workspace_id", "=", workspaceId)
    .where("environment", "=", environment)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

export async function touchKey(db: Kysely<DatabaseSchema>, id: string, at: Date): Promise<void> {
  await db.updateTable("api_keys").set({ last_used_at: at }).where("id", "=", id).execute();
}
