import { createHash } from "node:crypto";
import { type CompiledQuery, type Kysely, type RawBuilder, sql } from "kysely";
import stringify from "safe-stable-stringify";
import type { DatabaseSchema } from "./schema.ts";

// Idempotency records, claimed inside the caller's transaction. A second request with the same
// key blocks on the uncommitted row (PostgreSQL's unique index does the waiting) and, once the
// first commits, sees its stored response; if the first rolled back, the second proceeds as new.
// Records older than the retention window are reclaimed by the next request with that key (they
// are never deleted: the lapsed record is what tells a key's later use from its earlier one).
// Ages are measured on the service's clock (`now`), as every other deadline is.
//
// Two kinds of callers share it. Payments store their response and replay it (D5). Payouts answer
// a repeat from the payout itself as it stands now (D6), so their claim names the payout it
// creates, and their keys never lapse (part 4.10: a repeat returns the original result); a
// sandbox payout's claim is a CTE of its one statement (claimCtes).

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
  /**
   * No response stored: the other request is still running in this very transaction's view
   * (cannot happen on PostgreSQL), or its caller answers from the resource (`resourceId`).
   */
  | { kind: "in_progress"; resourceId: string | null };

export interface ClaimOptions {
  /** After how long a key may be used afresh; null: never. Default 24 h (D5). */
  retentionHours?: number | null;
  /** The resource the claiming request creates, named with the claim (payouts). */
  resourceId?: string;
}

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
  options: ClaimOptions = {},
): Promise<IdempotencyClaim> {
  const retentionHours = options.retentionHours === undefined ? 24 : options.retentionHours;
  const resourceId = options.resourceId ?? null;
  const inserted = await trx
    .insertInto("idempotency_keys")
    .values(keyRow(scope, fingerprint, now, resourceId))
    .onConflict((oc) => {
      const conflict = oc.columns(["workspace_id", "environment", "scope", "key"]);
      if (retentionHours === null) return conflict.doNothing();
      return conflict
        .doUpdateSet({
          request_hash: fingerprint,
          resource_id: resourceId,
          response_status: null,
          response_body: null,
          created_at: now,
        })
        .where("idempotency_keys.created_at", "<", new Date(now.getTime() - retentionHours * HOUR_MS));
    })
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
  if (existing.response_status === null) return { kind: "in_progress", resourceId: existing.resource_id };
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

/** The resource recorded under a key of a caller that answers repeats from it; null: none yet. */
export async function idempotentResource(
  db: Kysely<DatabaseSchema>,
  scope: IdempotencyScope,
): Promise<string | null> {
  const row = await db
    .selectFrom("idempotency_keys")
    .select("resource_id")
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .where("scope", "=", scope.scope)
    .where("key", "=", scope.key)
    .executeTakeFirst();
  return row?.resource_id ?? null;
}

/**
 * The claim of keys that never lapse, as CTEs of a caller's one statement (a sandbox payout is
 * recorded, paid and completed in one): `${name}` returns the `resource_id` of each row of
 * `source` whose key it claimed; a key claimed before, or twice in `source`, returns nothing for
 * the later row, which the caller then leaves unwritten. `source` selects workspace_id,
 * environment, key, request_hash, resource_id and created_at.
 */
export function claimCtes(name: string, scope: string, source: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`${sql.id(name)} AS (
      INSERT INTO idempotency_keys (workspace_id, environment, scope, key, request_hash, resource_id, created_at)
      SELECT s.workspace_id, s.environment, ${scope}, s.key, s.request_hash, s.resource_id, s.created_at
      FROM (${source}) s
      -- One order for every statement's claims, so that two statements claiming the same keys
      -- wait on each other in line, not in a circle.
      ORDER BY s.workspace_id, s.environment, s.key
      ON CONFLICT (workspace_id, environment, scope, key) DO NOTHING
      RETURNING resource_id
    )`;
}

/**
 * The claim of a key that never lapses, naming `resourceId`, as one statement for another module's
 * transaction (platform/db/fences.ts): it returns the key when it claimed it, nothing when the key
 * was claimed before (waiting, as every claim does, for a concurrent one to commit or roll back).
 */
export function claimStatement(
  db: Kysely<DatabaseSchema>,
  scope: IdempotencyScope,
  fingerprint: string,
  now: Date,
  resourceId: string,
): CompiledQuery {
  return db
    .insertInto("idempotency_keys")
    .values(keyRow(scope, fingerprint, now, resourceId))
    .onConflict((oc) => oc.columns(["workspace_id", "environment", "scope", "key"]).doNothing())
    .returning("key")
    .compile();
}

/** The resource recorded under a key and the hash of the request that claimed it; null: none yet. */
export async function idempotentClaim(
  db: Kysely<DatabaseSchema>,
  scope: IdempotencyScope,
): Promise<{ resourceId: string | null; requestHash: string } | null> {
  const row = await db
    .selectFrom("idempotency_keys")
    .select(["resource_id", "request_hash"])
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .where("scope", "=", scope.scope)
    .where("key", "=", scope.key)
    .executeTakeFirst();
  return row ? { resourceId: row.resource_id, requestHash: row.request_hash } : null;
}

/** A key's record as a claim writes it. */
function keyRow(scope: IdempotencyScope, fingerprint: string, now: Date, resourceId: string | null) {
  return {
    workspace_id: scope.workspaceId,
    environment: scope.environment,
    scope: scope.scope,
    key: scope.key,
    request_hash: fingerprint,
    resource_id: resourceId,
    created_at: now,
  };
}
