import { formatAmount, TOKEN_DECIMALS, type TokenSymbol } from "../../domain/money.ts";
import { type RefundStatus, refundStatusOfTransfer } from "../../domain/refund-state.ts";
import type { TransferRow } from "../transfers/repo.ts";

// The refund object of D19, the body of POST/GET …/refunds and the `data` of refund.* events.

export interface RefundView {
  id: string;
  /** null for the return of an unmatched transfer. */
  paymentId: string | null;
  amount: string;
  tokenSymbol: string;
  /** The network it goes back on (D22): the payment's or the transfer's; null for a card refund. */
  network: string | null;
  /** null for a card refund (the money goes back to the card). */
  destinationAddress: string | null;
  status: RefundStatus;
  /** The transaction that carried it on chain; a card refund's provider refund id. */
  txHash: string | null;
  reason: string | null;
  createdAt: string;
  /** A smart wallet's user operation (like payouts, D13). */
  userOpHash?: string;
  /** The unmatched transfer a return sends back. */
  unmatchedTransferId?: string;
  /** Why a failed refund failed (the chain's or the provider's word). */
  error?: string;
  /** "provider": a card refund made in the card provider's own dashboard, not through this API. */
  source?: "provider";
}

/** The refund (or return) a transfer out of a workspace wallet carries. */
export function refundOfTransfer(row: TransferRow): RefundView {
  return {
    id: row.id,
    paymentId: row.payment_id,
    amount: formatAmount(BigInt(row.amount), TOKEN_DECIMALS[row.token_symbol as TokenSymbol]),
    tokenSymbol: row.token_symbol,
    network: row.network,
    destinationAddress: row.destination_address,
    status: refundStatusOfTransfer(row.status),
    txHash: row.tx_hash,
    reason: row.reason,
    createdAt: row.created_at.toISOString(),
    ...(row.user_op_hash ? { userOpHash: row.user_op_hash } : {}),
    ...(row.unmatched_transfer_id ? { unmatchedTransferId: row.unmatched_transfer_id } : {}),
    ...(row.status === "failed" && row.error ? { error: row.error } : {}),
  };
}
