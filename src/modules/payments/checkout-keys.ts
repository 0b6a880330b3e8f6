import { createHash } from "node:crypto";
import type { IdempotencyScope } from "../../platform/db/idempotency.ts";

// A live card payment's id and the provider's idempotency key derive from the merchant's
// Idempotency-Key, so a retried create names the same payment and gets the same checkout session.

/** A UUID-shaped id derived from a string (same input, same id). */
export function deterministicUuid(input: string): string {
  const hex = createHash("sha256").update(input).digest("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-5${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/**
 * The merchant's key scoped to its workspace and environment, and to this use of it: `previous`
 * names the key's lapsed earlier use (null for a first use, which keeps the original form).
 */
export function idempotentName(scope: IdempotencyScope, previous: string | null): string {
  const scoped = `${scope.workspaceId}:${scope.environment}:${scope.key}`;
  return previous === null ? scoped : `${scoped}:after:${previous}`;
}

/** The provider's idempotency key, within its 255 characters. */
export function providerIdempotencyKey(name: string): string {
  return name.length <= 240 ? name : createHash("sha256").update(name).digest("hex");
}
