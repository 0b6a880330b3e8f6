import { isOnrampStatus, type OnrampStatus } from "../../domain/onramp-state.ts";

// The card provider's crypto on-ramp sessions (D17: Stripe's /v1/crypto/onramp_sessions), read
// from what the provider sends: its answers to create and retrieve, and the object of its
// `crypto.onramp_session_updated` events. The SDK has no type for them, so this is the one place
// their shape is checked: anything unexpected is refused here, not half-read elsewhere.

export const ONRAMP_EVENT = "crypto.onramp_session_updated";
export const ONRAMP_PATH = "/v1/crypto/onramp_sessions";

export type OnrampNetwork = "ethereum" | "base";

/**
 * The provider's name of the network a chain id is (its mainnet or test network); undefined for a
 * network it does not deliver on. The devnet (31337) stands in for the live network, Ethereum.
 */
export function onrampNetworkOf(chainId: number): OnrampNetwork | undefined {
  const networks: Record<number, OnrampNetwork> = {
    1: "ethereum",
    11155111: "ethereum",
    8453: "base",
    84532: "base",
    31337: "ethereum",
  };
  return networks[chainId];
}

export interface OnrampSessionRequest {
  /** Our session's id: the idempotency key and the session's metadata name it. */
  onrampId: string;
  walletAddress: string;
  destinationCurrency: "usdc" | "eth";
  destinationNetwork: OnrampNetwork;
  /** Decimal strings, at most one. */
  sourceAmount: string | null;
  destinationAmount: string | null;
  customerIp: string;
}

export interface ProviderOnrampSession {
  id: string;
  status: OnrampStatus;
  clientSecret: string | null;
  redirectUrl: string | null;
  /** Our session's id, when we made it. */
  onrampId: string | null;
  sourceAmount: string | null;
  destinationAmount: string | null;
  destinationCurrency: string | null;
  destinationNetwork: string | null;
  /** The transaction that sent the crypto (transaction_details.transaction_id), once there is one. */
  transactionId: string | null;
}

/** The provider's form parameters for a new session, the wallet locked (D17). */
export function onrampParams(request: OnrampSessionRequest): Record<string, unknown> {
  return {
    wallet_addresses: { ethereum: request.walletAddress },
    lock_wallet_address: true,
    source_currency: "usd",
    destination_currency: request.destinationCurrency,
    destination_network: request.destinationNetwork,
    destination_currencies: [request.destinationCurrency],
    destination_networks: [request.destinationNetwork],
    customer_ip_address: request.customerIp,
    metadata: { onrampId: request.onrampId },
    ...(request.sourceAmount ? { source_amount: request.sourceAmount } : {}),
    ...(request.destinationAmount ? { destination_amount: request.destinationAmount } : {}),
  };
}

const TX_HASH = /^0x[0-9a-fA-F]{64}$/;
const text = (value: unknown): string | null => (typeof value === "string" && value !== "" ? value : null);

/** The provider sent something that is not an on-ramp session. */
export class NotAnOnrampSession extends Error {
  override name = "NotAnOnrampSession";
}

/** An on-ramp session as the provider sent it; NotAnOnrampSession when it is not one. */
export function onrampSessionOf(raw: unknown): ProviderOnrampSession {
  const object = (typeof raw === "object" && raw !== null ? raw : {}) as Record<string, unknown>;
  const id = text(object.id);
  if (!id || !isOnrampStatus(object.status)) {
    throw new NotAnOnrampSession("not an on-ramp session (no id, or a status we do not know)");
  }
  const details = (
    typeof object.transaction_details === "object" && object.transaction_details !== null
      ? object.transaction_details
      : {}
  ) as Record<string, unknown>;
  const metadata = (
    typeof object.metadata === "object" && object.metadata !== null ? object.metadata : {}
  ) as Record<string, unknown>;
  return {
    id,
    status: object.status,
    clientSecret: text(object.client_secret),
    redirectUrl: text(object.redirect_url),
    onrampId: text(metadata.onrampId),
    sourceAmount: text(details.source_amount),
    destinationAmount: text(details.destination_amount),
    destinationCurrency: text(details.destination_currency),
    destinationNetwork: text(details.destination_network),
    // A hash the chain could be asked about, or none (the job asks the node for it).
    transactionId: TX_HASH.test(text(details.transaction_id) ?? "") ? text(details.transaction_id) : null,
  };
}
