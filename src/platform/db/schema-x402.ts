import type { ColumnType, Generated, JSONColumnType } from "kysely";

// The tables of the x402 facilitator (modules/x402, migration 040), apart from schema.ts to keep
// each file small.

type Json<T extends object | null> = JSONColumnType<T, string, string>;
type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;

/** What a payment settled through the facilitator keeps of its x402 origin (payments.x402). */
export interface X402Origin {
  payer: string;
  resource: string | null;
  scheme: string;
  nonce: string;
  /** The facilitator's transaction that pays it, once signed (live); its ledger transaction (sandbox). */
  txHash?: string;
}

export interface X402SettlementsTable {
  id: Generated<string>;
  workspace_id: string;
  environment: string;
  network: string;
  /** The token contract, lower-case. */
  asset: string;
  /** The authorization's signer, lower-case. */
  payer: string;
  /** The EIP-3009 nonce (bytes32 hex), lower-case. */
  nonce: string;
  /** The payment-identifier extension's id, when the payload carried one. */
  identifier: string | null;
  /** SHA-256 of the settle request (payload and requirements). */
  fingerprint: string;
  payment_id: string | null;
  status: string;
  /** The settle response, once it ended (what a repeat is answered with). */
  response: Json<Record<string, unknown>> | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface X402FacilitatorWalletsTable {
  workspace_id: string;
  address: string;
  encrypted_private_key: string;
  created_at: Generated<Date>;
}
