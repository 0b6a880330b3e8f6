import type { Environment } from "../../config.ts";
import { formatAmount, TOKEN_DECIMALS, type TokenSymbol } from "../../domain/money.ts";
import type { OnrampRow } from "./repo.ts";

// The on-ramp session object of D17: the body of POST …/onramp/session and GET …/onramp/sessions,
// and (without its client secret) the `data` of onramp.* events.

export interface OnrampView {
  id: string;
  provider: string;
  /** The network it delivers on (D22). */
  network: string;
  status: string;
  /** For the provider's widget in the customer's browser; never in events. */
  clientSecret?: string | null;
  redirectUrl: string | null;
  walletAddress: string;
  walletType: string;
  destinationCurrency: string;
  destinationNetwork: string;
  /** US dollars, as the provider states them; null until known. */
  sourceAmount: string | null;
  destinationAmount: string | null;
  /** The transaction that sent the crypto, once the provider names it. */
  transactionId: string | null;
  /** What the chain shows reached the wallet, once it does (then `completedAt`). */
  creditedAmount: string | null;
  completedAt: string | null;
  createdAt: string;
  updatedAt: string;
}

export function onrampView(row: OnrampRow, clientSecret?: string | null): OnrampView {
  return {
    id: row.id,
    provider: row.provider,
    network: row.network,
    status: row.status,
    ...(clientSecret !== undefined ? { clientSecret } : {}),
    redirectUrl: row.redirect_url,
    walletAddress: row.wallet_address,
    walletType: row.wallet_type,
    destinationCurrency: row.destination_currency,
    destinationNetwork: row.destination_network,
    sourceAmount: row.source_amount,
    destinationAmount: row.destination_amount,
    transactionId: row.transaction_id,
    creditedAmount:
      row.credited_amount === null
        ? null
        : formatAmount(BigInt(row.credited_amount), TOKEN_DECIMALS[row.destination_currency as TokenSymbol]),
    completedAt: row.completed_at?.toISOString() ?? null,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/** An onramp.* event of `row` (its type set by the caller); never the client secret. */
export function eventOf(row: OnrampRow) {
  return {
    workspaceId: row.workspace_id,
    environment: row.environment as Environment,
    payload: { ...onrampView(row) },
  };
}
