import type { ColumnType, Generated, JSONColumnType } from "kysely";

// The tables of agents and their wallets (modules/agents), apart from schema.ts to keep each file
// small.

type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
type Json<T extends object | null> = JSONColumnType<T, string, string>;

export interface AgentsTable {
  id: Generated<string>;
  workspace_id: string;
  environment: string;
  name: string;
  description: string | null;
  metadata: Json<Record<string, unknown>>;
  created_at: Generated<Date>;
  updated_at: NullableTimestamp;
  deleted_at: NullableTimestamp;
}

export interface AgentWalletsTable {
  id: Generated<string>;
  workspace_id: string;
  environment: string;
  owner_id: string;
  type: string;
  address: string;
  encrypted_private_key: string;
  currencies: Json<string[]>;
  created_at: Generated<Date>;
}

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type Units = ColumnType<string, string | bigint, string | bigint>;
type NullableJson<T extends object> = ColumnType<T | null, string | null, string | null>;

/** An agent wallet's spending policy (migration 041): amounts as {currency: smallest units}. */
export interface AgentWalletPoliciesTable {
  wallet_id: string;
  workspace_id: string;
  environment: string;
  max_per_payment: NullableJson<Record<string, string>>;
  daily: NullableJson<Record<string, string>>;
  monthly: NullableJson<Record<string, string>>;
  allowed_payees: NullableJson<string[]>;
  allowed_origins: NullableJson<string[]>;
  approval_above: NullableJson<Record<string, string>>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** An x402 payment authorization of an agent wallet (migration 041; domain/agent-payment-state.ts). */
export interface AgentPaymentAuthorizationsTable {
  id: Generated<string>;
  workspace_id: string;
  environment: string;
  wallet_id: string;
  payer: string;
  network: string;
  caip2: string;
  asset: string;
  currency: string;
  amount: Units;
  pay_to: string;
  resource_url: string;
  resource_origin: string;
  payment_required: Json<Record<string, unknown>>;
  nonce: string | null;
  valid_after: NullableTimestamp;
  valid_before: NullableTimestamp;
  status: string;
  created_at: Timestamp;
  decided_at: NullableTimestamp;
  tx_hash: string | null;
  /** An approved payment's PAYMENT-SIGNATURE value, encrypted, until it ends. */
  payment_signature: string | null;
}
