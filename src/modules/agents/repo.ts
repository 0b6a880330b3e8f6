import { type Kysely, sql } from "kysely";
import type { Environment } from "../../config.ts";
import { newestFirst } from "../../platform/db/page.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";
import { idInScope } from "../../platform/db/scope.ts";

// SQL of agent records. A deleted agent keeps its row (deleted_at) and is invisible to every read.

type Db = Kysely<DatabaseSchema>;
type Scope = { workspaceId: string; environment: Environment };

export interface AgentRow {
  id: string;
  name: string;
  description: string | null;
  metadata: Record<string, unknown>;
  created_at: Date;
  updated_at: Date | null;
}

export interface AgentFields {
  name?: string;
  description?: string | null;
  metadata?: Record<string, unknown>;
}

const AGENT_COLUMNS = ["id", "name", "description", "metadata", "created_at", "updated_at"] as const;

export async function insertAgent(
  trx: Db,
  scope: Scope,
  fields: AgentFields & { name: string },
  at: Date,
): Promise<AgentRow> {
  return trx
    .insertInto("agents")
    .values({
      workspace_id: scope.workspaceId,
      environment: scope.environment,
      name: fields.name,
      description: fields.description ?? null,
      metadata: JSON.stringify(fields.metadata ?? {}),
      created_at: at,
    })
    .returning(AGENT_COLUMNS)
    .executeTakeFirstOrThrow();
}

/** A live agent of the scope; `forUpdate` locks it for a change. */
export async function findAgent(
  db: Db,
  scope: Scope,
  id: string,
  forUpdate = false,
): Promise<AgentRow | undefined> {
  let query = db
    .selectFrom("agents")
    .select(AGENT_COLUMNS)
    .where(idInScope(scope, id))
    .where("deleted_at", "is", null);
  if (forUpdate) query = query.forUpdate();
  return query.executeTakeFirst();
}

/**
 * A page of the scope's live agents, newest first, and how many match in all. `search` matches
 * name and description, case-insensitively, as a plain substring (LIKE wildcards escaped).
 */
export async function listAgents(
  db: Db,
  scope: Scope,
  page: { search?: string | undefined; limit: number; offset: number },
): Promise<{ rows: AgentRow[]; total: number }> {
  let base = db
    .selectFrom("agents")
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .where("deleted_at", "is", null);
  if (page.search) {
    const pattern = `%${page.search.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    base = base.where(sql<boolean>`lower(name || ' ' || coalesce(description, '')) LIKE ${pattern}`);
  }
  return newestFirst(
    base.select(AGENT_COLUMNS),
    base.select((eb) => eb.fn.countAll().as("total")),
    page,
  );
}

/** Sets the fields given (and only those) and updated_at. */
export async function updateAgent(trx: Db, id: string, fields: AgentFields, at: Date): Promise<AgentRow> {
  return trx
    .updateTable("agents")
    .set({
      ...(fields.name !== undefined ? { name: fields.name } : {}),
      ...(fields.description !== undefined ? { description: fields.description } : {}),
      ...(fields.metadata !== undefined ? { metadata: JSON.stringify(fields.metadata) } : {}),
      updated_at: at,
    })
    .where("id", "=", id)
    .returning(AGENT_COLUMNS)
    .executeTakeFirstOrThrow();
}

export async function markDeleted(trx: Db, id: string, at: Date): Promise<void> {
  await trx.updateTable("agents").set({ deleted_at: at }).where("id", "=", id).execute();
}
