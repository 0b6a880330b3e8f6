import type { Db } from "../../platform/db/database.ts";
import {
  claimIdempotencyKey,
  type IdempotencyScope,
  requestFingerprint,
} from "../../platform/db/idempotency.ts";
import { type NewTransfer, PAYOUT_KEY_SCOPE, type Scope } from "./repo.ts";

// A payout's idempotencyKey (part 4.10, D6) in the platform's idempotency records: claimed in the
// transaction (or the one statement) that records the payout, naming it, and never lapsing. A
// repeat is answered from the payout as it stands (answers.ts), whatever body it brings.

export function payoutKeyScope(scope: Scope, key: string): IdempotencyScope {
  return { workspaceId: scope.workspaceId, environment: scope.environment, scope: PAYOUT_KEY_SCOPE, key };
}

/** What the payout asks for, as the record's request hash. */
export function payoutFingerprint(payout: NewTransfer): string {
  return requestFingerprint({
    tokenSymbol: payout.tokenSymbol,
    amount: payout.amount.toString(),
    destinationAddress: payout.destinationAddress,
    walletType: payout.walletType,
    description: payout.description,
    metadata: payout.metadata,
  });
}

/**
 * Claims `payout`'s idempotencyKey for it, in the transaction that records it; false when the key
 * was claimed before (the payout is then a repeat, answered from that one). A key waits here for
 * a concurrent claim of it to commit or roll back.
 */
export async function claimPayoutKey(
  trx: Db,
  payout: NewTransfer & { idempotencyKey: string },
): Promise<boolean> {
  const claim = await claimIdempotencyKey(
    trx,
    payoutKeyScope(payout.scope, payout.idempotencyKey),
    payoutFingerprint(payout),
    payout.createdAt,
    // Never lapsing: a repeat returns the original result, however late.
    { retentionHours: null, resourceId: payout.id },
  );
  return claim.kind === "new";
}
