import type { Db } from "../../platform/db/database.ts";
import {
  claimIdempotencyKey,
  type IdempotencyScope,
  idempotentClaim,
  requestFingerprint,
} from "../../platform/db/idempotency.ts";
import type { Scope } from "./rail.ts";

// A refund's (or a return's) Idempotency-Key (D19: like payouts) in the platform's idempotency
// records: claimed in the transaction that records the refund, naming it, never lapsing. A repeat
// is answered with the refund as it stands; the same key with another request is a conflict.

const REFUND_KEY_SCOPE = "refunds";

export function refundKeyScope(scope: Scope, key: string): IdempotencyScope {
  return { workspaceId: scope.workspaceId, environment: scope.environment, scope: REFUND_KEY_SCOPE, key };
}

/** The key was claimed before: `refundId` names what it made; `sameRequest` whether it asked the same. */
export class RefundKeyTaken extends Error {
  override name = "RefundKeyTaken";
  readonly refundId: string | null;
  readonly sameRequest: boolean;

  constructor(refundId: string | null, sameRequest: boolean) {
    super("Idempotency-Key already claimed");
    this.refundId = refundId;
    this.sameRequest = sameRequest;
  }
}

/** What a refund request asks for, as its record's hash: its subject and its parsed body. */
export function refundFingerprint(subject: string, request: unknown): string {
  return requestFingerprint({ subject, request });
}

/** Claims `key` for refund `id` in the caller's transaction; throws RefundKeyTaken if it was claimed before. */
export async function claimRefundKey(
  trx: Db,
  scope: Scope,
  key: string,
  claim: { id: string; fingerprint: string; at: Date },
): Promise<void> {
  const claimed = await claimIdempotencyKey(trx, refundKeyScope(scope, key), claim.fingerprint, claim.at, {
    retentionHours: null,
    resourceId: claim.id,
  });
  if (claimed.kind === "new") return;
  throw new RefundKeyTaken(claimed.resourceId, claimed.kind !== "mismatch");
}

/** The refund recorded under `key`, as RefundKeyTaken, if any (a repeat is answered from it before anything else). */
export async function refundUnderKey(
  db: Db,
  scope: Scope,
  key: string,
  fingerprint: string,
): Promise<RefundKeyTaken | null> {
  const claim = await idempotentClaim(db, refundKeyScope(scope, key));
  return claim ? new RefundKeyTaken(claim.resourceId, claim.requestHash === fingerprint) : null;
}
