// What a node's error says: an answer (a JSON-RPC error object: the node refused), as opposed to
// no answer at all (a timeout, a refused connection), which leaves open whether it arrived.

import { firstLine } from "../domain/errors.ts";

type ErrorLink = { name?: string; code?: unknown; cause?: unknown };

/** Whether `err` or an error in its cause chain satisfies `test`. */
function someCause(err: unknown, test: (e: ErrorLink) => boolean): boolean {
  for (let e = err as ErrorLink | undefined; e; e = e.cause as ErrorLink | undefined) {
    if (test(e)) return true;
  }
  return false;
}

/** A JSON-RPC error object from the node (as opposed to a timeout or a refused connection). */
export function isNodeAnswer(err: unknown): boolean {
  return someCause(err, (e) => e.name === "RpcRequestError" || (typeof e.code === "number" && e.code < 0));
}

export function errorText(err: unknown): string {
  const e = err as { details?: string; shortMessage?: string; message?: string };
  return firstLine(e.details || e.shortMessage || e.message || "refused").slice(0, 300);
}

/**
 * EIP-1474's "resource unavailable" (-32002) and "limit exceeded" (-32005): the node is busy or
 * rate-limits us, and says nothing of the transaction. Answered to a broadcast, that is no
 * refusal: the transaction is kept and sent again, never cancelled for it.
 */
const BUSY_CODES = new Set([-32002, -32005]);

export function isNodeBusy(err: unknown): boolean {
  return someCause(err, (e) => typeof e.code === "number" && BUSY_CODES.has(e.code));
}
