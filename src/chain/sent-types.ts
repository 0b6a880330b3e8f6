import type { RawBuilder } from "kysely";
import type { Fence } from "../platform/db/fences.ts";
import type { ChainToken, FeeQuote, Hex, ReceiptStatus, TransferRequest } from "./network.ts";
import type * as sent from "./sent-transactions.ts";

// What TransactionSender takes and answers (transaction-sender.ts).

export interface OutgoingTransfer extends TransferRequest {
  purpose: string;
  paymentId?: string | null;
  payoutId?: string | null;
}

/** What the wallet's turn read from the node before it began. */
export interface TurnReads {
  /** The node's count: it matters only when ahead of what is recorded (sends by something else). */
  pendingNonce: number;
  fees: FeeQuote;
}

/**
 * Fences a send on what must still hold when it is recorded (a payout still processing, a
 * settlement not recorded yet, the worker's lease): nothing is recorded or sent otherwise.
 */
export interface SubmitOptions {
  /**
   * Statements run first in the transaction that records the transfers (platform/db/fences.ts):
   * a required one that takes nothing refuses the record (FenceRefused), and nothing is sent.
   */
  fences?: readonly Fence[];
  /**
   * A data-modifying statement returning rows, run in the same statement as the record (one
   * round trip, no transaction): no row, no record (RecordRefused).
   */
  claim?: RawBuilder<unknown>;
  /**
   * Fences built from the signed transactions' hashes, run after the record in its transaction
   * (not with `claim`): what another module keeps of what is about to be sent (the transaction an
   * x402 payment waits for), written before anything is broadcast.
   */
  signedFences?: (txHashes: readonly Hex[]) => readonly Fence[];
  /**
   * The transfers are legs of one whole (a settlement's net and fee): once one is refused, the
   * ones after it are cancelled instead of sent.
   */
  together?: boolean;
  /**
   * The wallet's count and fees for its turn, begun before the call (TransactionSender.readAhead)
   * so that the node answers while the caller records: used when the call starts a turn.
   */
  reads?: Promise<TurnReads>;
}

/** One caller's transfers (consecutive nonces) and what fences their record. */
export interface RecordRequest {
  privateKey: Hex;
  transfers: OutgoingTransfer[];
  options: SubmitOptions;
}

/** The claim of a record returned nothing: nothing was recorded or sent. */
export class RecordRefused extends Error {
  override name = "RecordRefused";
}

export interface SubmittedTransfer {
  txHash: Hex;
  nonce: number;
  token: ChainToken;
  purpose: string;
  /**
   * The node refused it: why, and the cancelling transaction now holding its nonce (null when
   * that could not be broadcast either: the outcome stays open). `unsent`: nothing was refused
   * (a busy node): it stays open, to be sent again, and the legs sent with it are not withdrawn.
   */
  refusal: { reason: string; cancelHash: Hex | null; unsent?: true } | null;
}

export interface SentTransfer {
  txHash: Hex;
  /** `not_found`: not mined in time, or not sendable yet; still open. */
  status: ReceiptStatus;
  token: ChainToken;
  purpose: string;
  /** Why it failed, when the node refused it and its nonce was taken by a cancellation. */
  error: string | null;
}

export function submittedOf(
  tx: sent.RecordedTransaction,
  refusal: SubmittedTransfer["refusal"],
): SubmittedTransfer {
  return { txHash: tx.txHash, nonce: tx.nonce, token: tx.token, purpose: tx.purpose, refusal };
}
