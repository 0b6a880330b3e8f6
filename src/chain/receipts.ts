import type { Db } from "../platform/db/database.ts";
import type { Hex, Network, ReceiptStatus } from "./network.ts";
import * as sent from "./sent-transactions.ts";

// What the chain says of recorded transactions, written down: a receipt settles its transaction,
// and a mined cancellation settles the transaction whose nonce it took as well.

export const CANCELLED = "its nonce was taken by a cancelling transaction";

/** Records the outcome of those of `txs` that are mined; returns the others. */
export async function recordReceipts<T extends { txHash: Hex; replaces: Hex | null }>(
  db: Db,
  network: Pick<Network, "receipt">,
  txs: T[],
): Promise<T[]> {
  const statuses = await Promise.all(txs.map((tx) => network.receipt(tx.txHash)));
  const open: T[] = [];
  for (const [i, tx] of txs.entries()) {
    const status = statuses[i] ?? "not_found";
    if (status === "not_found") open.push(tx);
    else if (tx.replaces) await cancellationMined(db, tx.txHash, status, tx.replaces);
    else await sent.settleTransaction(db, tx.txHash, status, "transaction reverted", new Date());
  }
  return open;
}

/** A cancellation is mined (either way): it took the nonce of the transaction it replaces. */
export async function cancellationMined(
  db: Db,
  cancelHash: Hex,
  status: Exclude<ReceiptStatus, "not_found">,
  replaced: Hex,
): Promise<void> {
  await sent.settleTransaction(db, cancelHash, status, "cancellation reverted", new Date());
  await sent.settleTransaction(db, replaced, "replaced", CANCELLED, new Date());
}
