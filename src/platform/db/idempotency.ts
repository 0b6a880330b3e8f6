import { createHash } from "node:crypto";
import type { Kysely } from "kysely";
import stringify from "safe-stable-stringify";
import type { DatabaseSchema } from "./schema.ts";

// Idempotency records, claimed inside the caller's transaction. A second request with the same
// key blocks on the uncommitted row (PostgreSQL's unique index does the waiting) and, once the
// first commits, sees its stored response; if the first rolled back, the second proceeds as new.
// Records older than the retention window are reclaimed by the next request with that key (they
// are never deleted: the lapsed record is what tells a key's later use from its earlier one).
// Ages are measured on the service's clock (`now`), as every other deadline is.

const HOUR_MS = 3_600_000;

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
  now: Date,
  retentionHours = 24,
): Promise<IdempotencyClaim> {
  const lapsedBefore = new Date(now.getTime() - retentionHours * HOUR_MS);
  const inserted = await trx
    .insertInto("idempotency_keys")
    .values({
      workspace_id: scope.workspaceId,
      environment: scope.environment,
      scope: scope.scope,
      key: scope.key,
      request_hash: fingerprint,
      created_at: now,
    })
    .onConflict((oc) =>
      oc
        .columns(["workspace_id", "environment", "scope", "key"])
        .doUpdateSet({
          request_hash: fingerprint,
          resource_id: null,
          response_status: null,
          response_body: null,
          created_at: now,
        })
        .where("idempotency_keys.created_at", "<", lapsedBefore),
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

export type IdempotencyPeek =
  /** A finished request inside the window: the claim will replay it or refuse. */
  | { kind: "answered" }
  /**
   * Free for a new request. `previous` names the key's lapsed earlier use (its resource id), null
   * for a first use: an id derived from the key must also derive from it, or the key's second
   * life would get its first life's ids back (the same payment id, the provider's old session).
   */
  | { kind: "free"; previous: string | null };

/**
 * What the key's record says, read-only (no claim): lets a caller that must call a third party
 * before its transaction answer a replay or a conflict without calling it, and derive ids that
 * differ from those of the key's lapsed earlier use.
 */
export async function peekIdempotencyKey(
  db: Kysely<DatabaseSchema>,
  scope: IdempotencyScope,
  now: Date,
  retentionHours = 24,
): Promise<IdempotencyPeek> {
  const row = await db
    .selectFrom("idempotency_keys")
    .select(["resource_id", "response_status", "created_at"])
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .where("scope", "=", scope.scope)
    .where("key", "=", scope.key)
    .executeTakeFirst();
  if (!row) return { kind: "free", previous: null };
  const lapsed = row.created_at.getTime() < now.getTime() - retentionHours * HOUR_MS;
  if (!lapsed && row.response_status !== null) return { kind: "answered" };
  return { kind: "free", previous: row.resource_id ?? row.created_at.toISOString() };
}
