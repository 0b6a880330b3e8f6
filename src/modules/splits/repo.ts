import { type Kysely, sql } from "kysely";
import type { Environment } from "../../config.ts";
import type { StoredSplit } from "../../domain/splits.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";

// A workspace's splits configuration per environment: one row (D15), replaced whole.

type Db = Kysely<DatabaseSchema>;

export interface SplitConfig {
  enabled: boolean;
  splits: StoredSplit[];
  updatedAt: Date | null;
}

export interface ConfigScope {
  workspaceId: string;
  environment: Environment;
}

function toConfig(row: { enabled: boolean; splits: StoredSplit[]; updated_at: Date }): SplitConfig {
  return { enabled: row.enabled, splits: row.splits, updatedAt: row.updated_at };
}

/** The configuration; undefined: never configured. */
export async function readConfig(db: Db, scope: ConfigScope): Promise<SplitConfig | undefined> {
  const row = await db
    .selectFrom("split_configs")
    .select(["enabled", "splits", "updated_at"])
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .executeTakeFirst();
  return row ? toConfig(row) : undefined;
}

/**
 * The configuration locked for its replacement in the caller's transaction. A scope never
 * configured gets its (empty, disabled) row first, so there is always a row to lock: two first
 * replacements at once take turns, and the second keeps the ids the first gave its labels.
 */
export async function lockConfig(trx: Db, scope: ConfigScope, now: Date): Promise<SplitConfig> {
  await trx
    .insertInto("split_configs")
    .values({
      workspace_id: scope.workspaceId,
      environment: scope.environment,
      enabled: false,
      splits: "[]",
      updated_at: now,
    })
    .onConflict((oc) => oc.columns(["workspace_id", "environment"]).doNothing())
    .execute();
  const row = await trx
    .selectFrom("split_configs")
    .select(["enabled", "splits", "updated_at"])
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .forUpdate()
    .executeTakeFirstOrThrow();
  return toConfig(row);
}

/** The configurations of several scopes in one query, keyed "workspaceId environment". */
export async function readConfigs(db: Db, keys: readonly string[]): Promise<Map<string, SplitConfig>> {
  const pairs = keys.map((key) => key.split(" "));
  const rows = await sql<{
    workspace_id: string;
    environment: string;
    enabled: boolean;
    splits: StoredSplit[];
    updated_at: Date;
  }>`
    SELECT c.workspace_id, c.environment, c.enabled, c.splits, c.updated_at
    FROM split_configs c
    JOIN unnest(${pairs.map((p) => p[0])}::uuid[], ${pairs.map((p) => p[1])}::text[]) AS k(workspace_id, environment)
      ON c.workspace_id = k.workspace_id AND c.environment = k.environment`.execute(db);
  return new Map(rows.rows.map((row) => [`${row.workspace_id} ${row.environment}`, toConfig(row)]));
}

/** Replaces the configuration whose row the caller locked (lockConfig). */
export async function writeConfig(
  db: Db,
  scope: ConfigScope,
  config: SplitConfig & { updatedAt: Date },
): Promise<void> {
  await db
    .updateTable("split_configs")
    .set({ enabled: config.enabled, splits: JSON.stringify(config.splits), updated_at: config.updatedAt })
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .execute();
}
