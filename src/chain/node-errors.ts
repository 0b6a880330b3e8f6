// What a node's error says: an answer (a JSON-RPC error object: the node refused), as opposed to
// no answer at all (a timeout, a refused connection), which leaves open whether it arrived.

import { firstLine } from "../domain/errors.ts";

/** A JSON-RPC error object from the node (as opposed to a timeout or a refused connection). */
export function isNodeAnswer(err: unknown): boolean {
  for (
    let e = err as { name?: string; code?: unknown; cause?: unknown } | undefined;
    e;
    e = e.cause as typeof e
  ) {
    if (e.name === "RpcRequestError" || (typeof e.code === "number" && e.code < 0)) return true;
  }
  return false;
}

export function errorText(err: unknown): string {
  const e = err as { details?: string; shortMessage?: string; message?: string };
  return firstLine(e.details || e.shortMessage || e.message || "refused").slice(0, 300);
}
