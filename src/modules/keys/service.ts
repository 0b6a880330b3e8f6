import type { Kysely } from "kysely";
import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { forbidden, notFound } from "../../domain/errors.ts";
import { isUuid } from "../../domain/validation.ts";
import { coalescedLookup } from "../../platform/db/coalesced-lookup.ts";
import type { ApiKeyRow, DatabaseSchema } from "../../platform/db/schema.ts";
import type { KeyResolution } from "../../platform/http/auth.ts";
import { hashApiKey, randomBase62 } from "../../platform/secrets/hashing.ts";
import * as repo from "./repo.ts";

// API keys (D2): `svc_test_`/`svc_live_` + 40 random base62 characters (~238 bits). Only the
// SHA-256 of a key is stored; the full key is shown once, in the response that creates it.

const KEY_RANDOM_LENGTH = 40;
const PREFIX_LENGTH = 12;
/** last_used_at is informational: write it at most once a minute per key and instance. */
const TOUCH_INTERVAL_MS = 60_000;

export interface IssuedKey {
  id: string;
  key: string;
  prefix: string;
  environment: Environment;
  name: string | null;
  createdAt: string;
}

export function keyPrefixFor(environment: Environment): string {
  return environment === "sandbox" ? "svc_test_" : "svc_live_";
}

export async function issueKey(
  db: Kysely<DatabaseSchema>,
  workspaceId: string,
  environment: Environment,
  name: string | null,
): Promise<IssuedKey> {
  const key = `${keyPrefixFor(environment)}${randomBase62(KEY_RANDOM_LENGTH)}`;
  const row = await repo.insertKey(db, {
    workspaceId,
    environment,
    name,
    prefix: key.slice(0, PREFIX_LENGTH),
    keyHash: hashApiKey(key),
  });
  return {
    id: row.id,
    key,
    prefix: row.prefix,
    environment,
    name: row.name,
    createdAt: row.created_at.toISOString(),
  };
}

export function toApiKeyView(row: ApiKeyRow) {
  return {
    id: row.id,
    prefix: row.prefix,
    environment: row.environment as Environment,
    name: row.name,
    createdAt: row.created_at.toISOString(),
    lastUsedAt: row.last_used_at?.toISOString() ?? null,
    revokedAt: row.revoked_at?.toISOString() ?? null,
  };
}

export class KeysService {
  readonly #ctx: AppContext;
  readonly #touched = new Map<string, number>();
  readonly #byHash;

  constructor(ctx: AppContext) {
    this.#ctx = ctx;
    this.#byHash = coalescedLookup((hashes: readonly string[]) => repo.findKeysByHashes(ctx.db, hashes));
  }

  /**
   * Looked up on every request, never cached: a revocation must take effect at once on every
   * instance (D2). Requests arriving together share one query. The key's prefix must agree with
   * the environment it was issued for.
   */
  async resolve(key: string): Promise<KeyResolution> {
    const row = await this.#byHash(hashApiKey(key));
    if (!row || !key.startsWith(keyPrefixFor(row.environment as Environment))) return { status: "unknown" };
    if (row.revoked_at) return { status: "revoked" };
    this.#touch(row.id);
    return {
      status: "ok",
      principal: {
        kind: "key",
        keyId: row.id,
        workspaceId: row.workspace_id,
        environment: row.environment as Environment,
      },
    };
  }

  #touch(id: string): void {
    const nowMs = this.#ctx.now().getTime();
    if (nowMs - (this.#touched.get(id) ?? 0) < TOUCH_INTERVAL_MS) return;
    this.#touched.set(id, nowMs);
    // Not awaited by the request, so counted on its own: shutdown waits for it.
    this.#ctx.inFlight.track(repo.touchKey(this.#ctx.db, id, new Date(nowMs))).catch((err: unknown) => {
      this.#ctx.log.warn({ err, keyId: id }, "could not record key use");
    });
  }

  /** A key manages keys of its own environment only: a test key must not mint live keys. */
  async create(
    workspaceId: string,
    callerEnvironment: Environment,
    environment: Environment,
    name: string | null,
  ) {
    if (environment !== callerEnvironment) {
      throw forbidden(`A ${callerEnvironment} key can only create ${callerEnvironment} keys`);
    }
    return issueKey(this.#ctx.db, workspaceId, environment, name);
  }

  async list(workspaceId: string, environment: Environment) {
    const rows = await repo.listKeys(this.#ctx.db, workspaceId, environment);
    return rows.map(toApiKeyView);
  }

  async revoke(workspaceId: string, environment: Environment, id: string): Promise<void> {
    const revoked =
      isUuid(id) && (await repo.revokeKey(this.#ctx.db, workspaceId, environment, id, this.#ctx.now()));
    if (!revoked) throw notFound("API key not found");
  }
}
