import type { IncomingTransfer } from "./network.ts";

// Incoming transfers in the chain's order, and each one's identity within its transaction: what the
// chain watcher claims transfers by (observed_transfers), and what an on-ramp credit claims its
// delivery by, so both name a transfer the same way.

/** Chain order (block, then log index; a block's native transfers first), each transfer once. */
export function inChainOrder(transfers: readonly IncomingTransfer[]): IncomingTransfer[] {
  const seen = new Set<string>();
  const unique = transfers.filter((t) => {
    const key = `${t.txHash}:${t.logIndex}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  // Stable: native transfers (all log index -1) keep their transaction order within a block.
  return unique.sort((a, b) =>
    a.blockNumber === b.blockNumber ? a.logIndex - b.logIndex : a.blockNumber < b.blockNumber ? -1 : 1,
  );
}

/**
 * Each transfer's place within its transaction: the n-th (from 0) transfer of its token to its
 * recipient there. A reorg that re-includes the transaction in another block, or at another
 * position, changes the transfers' log indexes but not this, so (transaction, token, recipient,
 * ordinal) identifies a transfer across rescans. `transfers` in chain order, without repeats.
 */
export function transferOrdinals(transfers: readonly IncomingTransfer[]): number[] {
  const counts = new Map<string, number>();
  return transfers.map((t) => {
    const key = `${t.txHash.toLowerCase()} ${t.token} ${t.to.toLowerCase()}`;
    const ordinal = counts.get(key) ?? 0;
    counts.set(key, ordinal + 1);
    return ordinal;
  });
}
