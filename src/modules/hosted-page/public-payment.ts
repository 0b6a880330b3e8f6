import { formatAmount, NATIVE_TOKEN, TOKEN_DECIMALS, type TokenSymbol } from "../../domain/money.ts";
import type { PaymentStatus } from "../../domain/payment-state.ts";
import type { PayerRow } from "../payments/service.ts";

// What the hosted page may show a payer: never metadata, keys or anything of the workspace
// beyond this payment's own public facts.

export interface PublicPayment {
  id: string;
  status: PaymentStatus;
  paymentMethod: "crypto" | "card";
  environment: "sandbox" | "live";
  amount: string;
  tokenSymbol: string;
  description: string | null;
  receivingAddress: string | null;
  checkoutUrl: string | null;
  returnUrl: string | null;
  expiresAt: string;
  /** EIP-681 payment request for wallets (crypto, live with a network), on `network`. */
  paymentUri: string | null;
  /** The network the page asks the payer to pay on: the payment's, else the one they chose. */
  network: PayerNetwork | null;
  /** A payment payable on several networks and on none yet (D22): those the payer may choose from. */
  choices: PayerNetwork[];
  /** Who is paid (D25): the workspace's display name (its name unless one is set), logo on our origin, brand colour. */
  merchant: Merchant;
  /** The amount in the token's smallest unit: what a wallet's one-click transfer sends, exactly. */
  units: string;
  decimals: number;
  /** The token's contract on `network`; null for ETH (sent as the value) or when the page knows no network. */
  tokenAddress: string | null;
  /** Once a transfer or a card paid it (detected or later): the receipt's facts (D25). */
  receipt: Receipt | null;
  /** Refunds (D19), once any: what went back of what it received, and whether that is all of it. */
  refund: { refunded: string; received: string; full: boolean } | null;
}

export interface PayerNetwork {
  id: string;
  name: string;
  chainId: number;
  /** A block explorer's base URL (`<explorer>/tx/<hash>`) when the network names one. */
  explorerUrl: string | null;
  /** A public RPC endpoint the payer's wallet may add the network with, when the operator names one. */
  walletRpcUrl: string | null;
}

export interface Merchant {
  name: string;
  /** Served by us (`/pay/{id}/logo`), or null when the workspace has none. */
  logoUrl: string | null;
  /** `#rrggbb`, or null for the page's own. */
  brandColor: string | null;
}

export interface Receipt {
  /** The transaction that paid it; null for a card payment. */
  txHash: string | null;
  /** The transaction on the network's explorer, when it names one. */
  txUrl: string | null;
  /** When it was paid (ISO 8601). */
  paidAt: string;
  /** Who paid, as the chain says; null for a card payment. */
  payerAddress: string | null;
}

export interface NetworkFacts extends PayerNetwork {
  tokenAddress: (symbol: string) => string | null;
}

const HTTP_URL = /^https?:\/\//i;

/** What the page says of a payment's refunds (D19): what went back of what it received. */
type RefundColumns = Pick<PayerRow, "refunded_amount" | "amount_received">;

/**
 * `row` holds only what the payments service gives a payer (payer-repo.ts PAYER_COLUMNS); `network` is
 * the network the page shows (the payment's, or the payer's choice among `choices`).
 */
export function toPublicPayment(
  row: PayerRow,
  network: NetworkFacts | null,
  merchant: Merchant,
  choices: readonly NetworkFacts[] = [],
): PublicPayment {
  const decimals = TOKEN_DECIMALS[row.token_symbol as TokenSymbol];
  const units = BigInt(row.gross_amount);
  let paymentUri: string | null = null;
  if (row.payment_method === "crypto" && network && row.receiving_address) {
    if (row.token_symbol === NATIVE_TOKEN) {
      paymentUri = `ethereum:${row.receiving_address}@${network.chainId}?value=${units}`;
    } else {
      const token = network.tokenAddress(row.token_symbol);
      if (token)
        paymentUri = `ethereum:${token}@${network.chainId}/transfer?address=${row.receiving_address}&uint256=${units}`;
    }
  }
  return {
    id: row.id,
    status: row.status as PaymentStatus,
    paymentMethod: row.payment_method === "card" ? "card" : "crypto",
    environment: row.environment === "live" ? "live" : "sandbox",
    amount: formatAmount(units, decimals),
    tokenSymbol: row.token_symbol,
    description: row.description,
    receivingAddress: row.payment_method === "crypto" ? row.receiving_address : null,
    checkoutUrl: row.checkout_url && HTTP_URL.test(row.checkout_url) ? row.checkout_url : null,
    // Only http(s) return URLs ever reach the page (a javascript: URL would run in the payer's browser).
    returnUrl: row.return_url && HTTP_URL.test(row.return_url) ? row.return_url : null,
    expiresAt: row.expires_at.toISOString(),
    paymentUri,
    network: network ? facts(network) : null,
    choices: choices.map(facts),
    refund: refundOf(row, units, decimals),
    merchant,
    units: units.toString(),
    decimals,
    tokenAddress:
      network && row.token_symbol !== NATIVE_TOKEN ? network.tokenAddress(row.token_symbol) : null,
    receipt: receiptOf(row, network),
  };
}

const facts = ({ id, name, chainId, explorerUrl, walletRpcUrl }: NetworkFacts): PayerNetwork => ({
  id,
  name,
  chainId,
  explorerUrl,
  walletRpcUrl,
});

/** Paid: a transfer detected (or a card's payment confirmed) and not given up since. */
const PAID: ReadonlySet<string> = new Set(["detected", "confirmed", "forwarded"]);

function receiptOf(row: PayerRow, network: NetworkFacts | null): Receipt | null {
  const paidAt = row.detected_at ?? row.confirmed_at;
  if (!PAID.has(row.status) || !paidAt) return null;
  const txHash = row.payment_method === "crypto" ? row.detected_tx_hash : null;
  const explorer = network?.explorerUrl?.replace(/\/+$/, "");
  return {
    txHash,
    txUrl: txHash && explorer && HTTP_URL.test(explorer) ? `${explorer}/tx/${txHash}` : null,
    paidAt: paidAt.toISOString(),
    payerAddress: row.payment_method === "crypto" ? row.payer_address : null,
  };
}

function refundOf(columns: RefundColumns, gross: bigint, decimals: number): PublicPayment["refund"] {
  const refunded = BigInt(columns.refunded_amount ?? 0);
  if (refunded <= 0n) return null;
  const received = columns.amount_received === null ? gross : BigInt(columns.amount_received);
  return {
    refunded: formatAmount(refunded, decimals),
    received: formatAmount(received, decimals),
    full: refunded >= received,
  };
}
