import { coalescedWrite } from "../platform/db/coalesced-write.ts";
import type { Db } from "../platform/db/database.ts";
import type { Hex, Network, ReceiptStatus } from "./network.ts";
import * as sent from "./sent-transactions.ts";
import type { SentTransfer, SubmittedTransfer } from "./sent-types.ts";

// What the chain says of recorded transactions, written down: a receipt settles its transaction,
// and a mined cancellation settles the transaction whose nonce it took as well.

export const CANCELLED = "its nonce was taken by a cancelling transaction";
const REVERTED = "transaction reverted";
/** Why a leg sent together with a refused one was cancelled (TransactionSender's `together`). */
export const WITHDRAWN = "not sent: an earlier transfer sent with it was refused";
const RECEIPT_TIMEOUT_MS = 60_000;

/**
 * Records mined receipts, those asked for in one round of I/O in one statement: the receipts of a
 * wallet's transactions sent together arrive together (one answer of the node to many polls).
 */
export function receiptRecorder(db: Db): (receipt: sent.TransactionOutcome) => Promise<void> {
  return coalescedWrite((receipts: readonly sent.TransactionOutcome[]) =>
    sent.settleTransactions(db, receipts),
  );
}

/**
 * Waits for the receipts of submitted transfers (or of their cancellations) and records their
 * outcome. The transfers are waited for together, not one after another: a move's legs are mined
 * together, so their receipts come in one round of polls and are recorded in one statement.
 */
export function awaitReceipts(
  db: Db,
  network: Pick<Network, "waitForReceipt">,
  submitted: SubmittedTransfer[],
  record: (receipt: sent.TransactionOutcome) => Promise<void>,
): Promise<SentTransfer[]> {
  return Promise.all(submitted.map((tx) => awaitReceipt(db, network, tx, record)));
}

async function awaitReceipt(
  db: Db,
  network: Pick<Network, "waitForReceipt">,
  tx: SubmittedTransfer,
  record: (receipt: sent.TransactionOutcome) => Promise<void>,
): Promise<SentTransfer> {
  const result = { txHash: tx.txHash, token: tx.token, purpose: tx.purpose };
  if (tx.refusal === null) {
    const status = await network.waitForReceipt(tx.txHash, RECEIPT_TIMEOUT_MS);
    if (status !== "not_found")
      await record({ txHash: tx.txHash, outcome: status, error: REVERTED, at: new Date() });
    return { ...result, status, error: null };
  }
  const { reason, cancelHash } = tx.refusal;
  const cancelled = cancelHash ? await network.waitForReceipt(cancelHash, RECEIPT_TIMEOUT_MS) : "not_found";
  if (!cancelHash || cancelled === "not_found") return { ...result, status: "not_found", error: null };
  // The cancellation is mined: the refused transaction can never be.
  await cancellationMined(db, cancelHash, cancelled, tx.txHash);
  const why = reason === WITHDRAWN ? reason : `refused by the node: ${reason}`;
  return { ...result, status: "reverted", error: `${why}; ${CANCELLED}` };
}

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
    else await sent.settleTransaction(db, tx.txHash, status, REVERTED, new Date());
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
