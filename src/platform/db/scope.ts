import { type RawBuilder, sql } from "kysely";

// A tenant's rows: every table a workspace owns per environment has `workspace_id` and
// `environment` beside its `id`, and every lookup of one row by id for a tenant names all three,
// so that no tenant ever reads or moves another's. Written once here, used in each repo's query.

export interface TenantScope {
  workspaceId: string;
  environment: string;
}

/** The row `id` of `scope` (a WHERE condition for the repo's own single-table query). */
export function idInScope(scope: TenantScope, id: string | number): RawBuilder<boolean> {
  return sql<boolean>`id = ${id} AND workspace_id = ${scope.workspaceId} AND environment = ${scope.environment}`;
}
