import { createHash } from "node:crypto";
import { type Kysely, sql } from "kysely";
import stringify from "safe-stable-stringify";
import type { DatabaseSchema } from "./schema.ts";

// Idempotency records, claimed inside the caller's transaction. A second request with the same
// key blocks on the uncommitted row (PostgreSQL's unique index does the waiting) and, once the
// first commits, sees its stored response; if the first rolled back, the second proceeds as new.
// Records older than the retention window are reclaimed by the next request with that key.

export interface IdempotencyScope {
  workspaceId: string;
  environment: string;
  scope: string;
  key: string;
}

export type IdempotencyClaim =
  | { kind: "new" }
  | { kind: "replay"; status: number; body: unknown; resourceId: string | null }
  | { kind: "mismatch"; resourceId: string | null }
  /** The other request is still running in this very transaction's view (cannot happen on PostgreSQL). */
  | { kind: "in_progress" };

/** "Same body" means equal JSON after parsing (D13): key order does not matter. */
export function requestFingerprint(body: unknown): string {
  return createHash("sha256")
    .update(stringify(body ?? null) ?? "null")
    .digest("hex");
}

export async function claimIdempotencyKey(
  trx: Kysely<DatabaseSchema>,
  scope: IdempotencyScope,
  fingerprint: string,
  retentionHours = 24,
): Promise<IdempotencyClaim> {
  const inserted = await trx
    .insertInto("idempotency_keys")
    .values({
      workspace_id: scope.workspaceId,
      environment: scope.environment,
      scope: scope.scope,
      key: scope.key,
      request_hash: fingerprint,
      created_at: sql<Date>`now()`,
    })
    .onConflict((oc) =>
      oc
        .columns(["workspace_id", "environment", "scope", "key"])
        .doUpdateSet({
          request_hash: fingerprint,
          resource_id: null,
          response_status: null,
          response_body: null,
          created_at: sql<Date>`now()`,
        })
        .where(sql<boolean>`idempotency_keys.created_at < now() - make_interval(hours => ${retentionHours})`),
    )
    .returning("key")
    .executeTakeFirst();
  if (inserted) return { kind: "new" };

  const existing = await trx
    .selectFrom("idempotency_keys")
    .select(["request_hash", "resource_id", "response_status", "response_body"])
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .where("scope", "=", scope.scope)
    .where("key", "=", scope.key)
    .executeTakeFirstOrThrow();
  if (existing.request_hash !== fingerprint) return { kind: "mismatch", resourceId: existing.resource_id };
  if (existing.response_status === null) return { kind: "in_progress" };
  return {
    kind: "replay",
    status: existing.response_status,
    body: existing.response_body,
    resourceId: existing.resource_id,
  };
}

export async function storeIdempotentResponse(
  trx: Kysely<DatabaseSchema>,
  scope: IdempotencyScope,
  resourceId: string,
  status: number,
  body: unknown,
): Promise<void> {
  await trx
    .updateTable("idempotency_keys")
    .set({ resource_id: resourceId, response_status: status, response_body: JSON.stringify(body) })
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .where("scope", "=", scope.scope)
    .where("key", "=", scope.key)
    .execute();
}

/**
 * Whether a finished request with this key exists (read-only, no claim): lets a caller that must
 * call a third party before its transaction answer a replay or a conflict without calling it.
 */
export async function peekIdempotencyKey(
  db: Kysely<DatabaseSchema>,
  scope: IdempotencyScope,
  retentionHours = 24,
): Promise<boolean> {
  const row = await db
    .selectFrom("idempotency_keys")
    .select("key")
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .where("scope", "=", scope.scope)
    .where("key", "=", scope.key)
    .where("response_status", "is not", null)
    .where(sql<boolean>`created_at >= now() - make_interval(hours => ${retentionHours})`)
    .executeTakeFirst();
  return row !== undefined;
}
