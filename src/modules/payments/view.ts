import type { Selectable } from "kysely";
import type { Environment } from "../../config.ts";
import { formatAmount, TOKEN_DECIMALS, type TokenSymbol } from "../../domain/money.ts";
import type { PaymentMethod, WalletType } from "../../domain/payment-request.ts";
import type { PaymentStatus } from "../../domain/payment-state.ts";
import type { UnmatchedStatus } from "../../domain/unmatched-state.ts";
import type { PaymentRow, UnmatchedTransfersTable } from "../../platform/db/schema.ts";

// The Payment object of part 2, camelCase, amounts per D4. The same object is the `data` of
// every payment.* webhook event, so what merchants read and what they receive never differ.

export interface PaymentView {
  id: string;
  status: PaymentStatus;
  paymentMethod: PaymentMethod;
  paymentProvider: "onchain" | "card";
  tokenSymbol: string;
  grossAmount: string;
  feeAmount: string;
  netAmount: string;
  merchantWallet: string | null;
  walletType: WalletType;
  receivingAddress: string | null;
  environment: Environment;
  /** The network it is paid on (D22); null for a card payment, and for one payable on several until detected. */
  network: string | null;
  /** The networks it may be paid on, when several (D22): present only then. */
  networks?: string[];
  description: string | null;
  metadata: Record<string, string>;
  returnUrl: string | null;
  cancelUrl: string | null;
  expiresAt: string;
  createdAt: string;
  updatedAt: string;
  /** The on-chain transfer that paid it (crypto method), once detected. */
  txHash: string | null;
  payerAddress: string | null;
  /** Settlement transactions once forwarded: net to the merchant, fee to the treasury. */
  settlementTxHashes: { net: string | null; fee: string | null } | null;
  failureReason: string | null;
  /** Card payment method: the provider's hosted checkout, and the last declined attempt (the payer may retry). */
  checkoutUrl: string | null;
  cardCheckoutSessionId: string | null;
  lastPaymentError: Record<string, unknown> | null;
  /** What an attached unmatched transfer paid (D19); null when paid as asked. */
  amountReceived: string | null;
  /** Refunds completed or on their way (D19). */
  refundedAmount: string;
  /** Settled through the x402 facilitator (D23): who paid, for what, by which scheme. Present only then. */
  x402?: { payer: string; resource: string | null; scheme: string };
}

export function toPaymentView(row: PaymentRow): PaymentView {
  const decimals = TOKEN_DECIMALS[row.token_symbol as TokenSymbol];
  return {
    id: row.id,
    status: row.status as PaymentStatus,
    paymentMethod: row.payment_method as PaymentMethod,
    paymentProvider: row.payment_provider as PaymentView["paymentProvider"],
    tokenSymbol: row.token_symbol,
    grossAmount: formatAmount(BigInt(row.gross_amount), decimals),
    feeAmount: formatAmount(BigInt(row.fee_amount), decimals),
    netAmount: formatAmount(BigInt(row.net_amount), decimals),
    merchantWallet: row.merchant_wallet,
    walletType: row.wallet_type as WalletType,
    receivingAddress: row.receiving_address,
    environment: row.environment as Environment,
    network: row.network,
    ...(row.networks ? { networks: row.networks } : {}),
    description: row.description,
    metadata: row.metadata,
    returnUrl: row.return_url,
    cancelUrl: row.cancel_url,
    expiresAt: row.expires_at.toISOString(),
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    txHash: row.detected_tx_hash ?? null,
    payerAddress: row.payer_address ?? null,
    settlementTxHashes:
      row.settlement_net_tx_hash || row.settlement_fee_tx_hash
        ? { net: row.settlement_net_tx_hash ?? null, fee: row.settlement_fee_tx_hash ?? null }
        : null,
    failureReason: row.failure_reason ?? null,
    checkoutUrl: row.checkout_url,
    cardCheckoutSessionId: row.card_checkout_session_id,
    lastPaymentError: row.last_payment_error ?? null,
    amountReceived: row.amount_received == null ? null : formatAmount(BigInt(row.amount_received), decimals),
    refundedAmount: formatAmount(BigInt(row.refunded_amount ?? 0), decimals),
    ...(row.x402
      ? { x402: { payer: row.x402.payer, resource: row.x402.resource, scheme: row.x402.scheme } }
      : {}),
  };
}

/** An incoming transfer that matched no payment (the D13 inbox), as the API lists it. */
export function toUnmatchedView(r: Selectable<UnmatchedTransfersTable>) {
  return {
    id: r.id,
    status: r.status as UnmatchedStatus,
    network: r.network,
    paymentId: r.payment_id,
    amount: formatAmount(BigInt(r.amount), TOKEN_DECIMALS[r.token_symbol as TokenSymbol]),
    token: r.token_symbol,
    from: r.from_address,
    to: r.to_address,
    txHash: r.tx_hash,
    blockNumber: Number(r.block_number),
    reason: r.reason,
    createdAt: r.created_at.toISOString(),
  };
}
