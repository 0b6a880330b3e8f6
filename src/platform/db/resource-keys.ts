import type { Db } from "./database.ts";
import type { Fence } from "./fences.ts";
import { claimStatement, type IdempotencyScope, idempotentClaim, requestFingerprint } from "./idempotency.ts";

// An Idempotency-Key that names the resource its request created (a refund, a swap), answered
// from that resource as it stands, never lapsing: claimed in the transaction that records the
// resource. A repeat with the same request is answered with the resource; the same key with
// another request is a conflict. (Payments store and replay their responses instead.)

type Scope = { workspaceId: string; environment: string };

/** The name of a key's claim among a record's fences. */
export const KEY_FENCE = "idempotency-key";

/** The key was claimed before: `resourceId` names what it made; `sameRequest` whether it asked the same. */
export class KeyTaken extends Error {
  override name = "KeyTaken";
  readonly resourceId: string | null;
  readonly sameRequest: boolean;

  constructor(resourceId: string | null, sameRequest: boolean) {
    super("Idempotency-Key already claimed");
    this.resourceId = resourceId;
    this.sameRequest = sameRequest;
  }
}

export class ResourceKeys {
  readonly #scope: string;

  /** `scope`: the records' scope of these keys (one per kind of resource). */
  constructor(scope: string) {
    this.#scope = scope;
  }

  #of(scope: Scope, key: string): IdempotencyScope {
    return { workspaceId: scope.workspaceId, environment: scope.environment, scope: this.#scope, key };
  }

  /** What a request asks for, as its record's hash: its subject and its parsed body. */
  fingerprint(subject: string, request: unknown): string {
    return requestFingerprint({ subject, request });
  }

  /**
   * The claim of `key` for resource `id` as a fence of another module's record: refused (fence
   * `idempotency-key`) when the key was claimed before; `under` then tells by whom.
   */
  fence(db: Db, scope: Scope, key: string, claim: { id: string; fingerprint: string; at: Date }): Fence {
    const statement = claimStatement(db, this.#of(scope, key), claim.fingerprint, claim.at, claim.id);
    return { name: KEY_FENCE, statement, required: true };
  }

  /** The resource recorded under `key`, as KeyTaken, if any (a repeat is answered from it before anything else). */
  async under(db: Db, scope: Scope, key: string, fingerprint: string): Promise<KeyTaken | null> {
    const claim = await idempotentClaim(db, this.#of(scope, key));
    return claim ? new KeyTaken(claim.resourceId, claim.requestHash === fingerprint) : null;
  }
}
