import type { ColumnType, Generated, JSONColumnType, Selectable } from "kysely";
import type { SettlementRecord, SplitShare, StoredSplit } from "../../domain/splits.ts";
import type {
  CardEventsTable,
  DashboardLoginAttemptsTable,
  DashboardSessionsTable,
  WorkspaceEmailChangesTable,
  WorkspaceLogosTable,
} from "./schema-accounts.ts";
import type {
  AgentPaymentAuthorizationsTable,
  AgentsTable,
  AgentWalletPoliciesTable,
  AgentWalletsTable,
} from "./schema-agents.ts";
import type {
  OnrampSessionsTable,
  SandboxSwapPoolsTable,
  SwapQuotesTable,
  SwapsTable,
} from "./schema-exchange.ts";
import type { LedgerTables } from "./schema-ledger.ts";
import type { X402FacilitatorWalletsTable, X402Origin, X402SettlementsTable } from "./schema-x402.ts";

// The tables as Kysely sees them. Amounts are numeric(78,0) columns holding smallest units; both
// drivers hand them back as strings, converted to bigint in the repos.

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
type Units = ColumnType<string, string | bigint, string | bigint>;
type Json<T extends object | null> = JSONColumnType<T, string, string>;

export interface WorkspacesTable {
  id: Generated<string>;
  name: string;
  settlement_address: string | null;
  /** The wallet used when a request names none, per environment (D21): workspace or smart_wallet. */
  sandbox_default_wallet_type: ColumnType<string, string | undefined, string>;
  live_default_wallet_type: ColumnType<string, string | undefined, string>;
  admin_email: string | null;
  admin_password_hash: string | null;
  created_at: Generated<Date>;
  /** What payers see instead of `name` (1 to 80 characters, D25); null: the name. */
  display_name: ColumnType<string | null, string | null | undefined, string | null>;
  /** Lower-case `#rrggbb`, or null for the page's own colour. */
  brand_color: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface WorkspaceWalletsTable {
  id: Generated<string>;
  workspace_id: string;
  kind: string;
  address: string;
  encrypted_private_key: string | null;
  created_at: Generated<Date>;
}

export interface ApiKeysTable {
  id: Generated<string>;
  workspace_id: string;
  environment: string;
  name: string | null;
  prefix: string;
  key_hash: string;
  created_at: Generated<Date>;
  last_used_at: NullableTimestamp;
  revoked_at: NullableTimestamp;
}

export interface PaymentsTable {
  id: Generated<string>;
  workspace_id: string;
  environment: string;
  /** Its network (D22, migration 033); null for a card payment, and for a payment payable on several networks until one is detected. */
  network: string | null;
  /** The networks a crypto payment may be paid on, when several (migration 036); else null. */
  networks: ColumnType<string[] | null, string | null | undefined, string | null>;
  status: string;
  payment_method: string;
  payment_provider: string;
  token_symbol: string;
  gross_amount: Units;
  fee_amount: Units;
  net_amount: Units;
  merchant_wallet: string | null;
  wallet_type: string;
  receiving_address: string | null;
  description: string | null;
  metadata: Json<Record<string, string>>;
  return_url: string | null;
  cancel_url: string | null;
  expires_at: Timestamp;
  card_checkout_session_id: string | null;
  checkout_url: string | null;
  last_payment_error: Json<Record<string, unknown>> | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
  detected_tx_hash: ColumnType<string | null, string | null | undefined, string | null>;
  detected_log_index: ColumnType<number | null, number | null | undefined, number | null>;
  detected_block: ColumnType<string | null, string | bigint | null | undefined, string | bigint | null>;
  detected_block_hash: ColumnType<string | null, string | null | undefined, string | null>;
  payer_address: ColumnType<string | null, string | null | undefined, string | null>;
  detected_at: NullableTimestamp;
  confirmed_at: NullableTimestamp;
  settlement_net_tx_hash: ColumnType<string | null, string | null | undefined, string | null>;
  settlement_fee_tx_hash: ColumnType<string | null, string | null | undefined, string | null>;
  forwarded_at: NullableTimestamp;
  failure_reason: ColumnType<string | null, string | null | undefined, string | null>;
  settlement_user_op_hash: ColumnType<string | null, string | null | undefined, string | null>;
  settlement_user_operation: ColumnType<string | null, string | null | undefined, string | null>;
  /** The enabled splits when it was created (D15); null: splits were off. */
  split_snapshot: ColumnType<SplitShare[] | null, string | null | undefined, string | null>;
  /** The transfer (kind settlement, migration 030) that settles it, once recorded. */
  settlement_transfer_id: ColumnType<string | null, string | null | undefined, string | null>;
  settlement_id: ColumnType<string | null, string | null | undefined, string | null>;
  settled_at: NullableTimestamp;
  /** Its settlement's legs and their outcomes, once it ended (forwarded or failed). */
  settlement: ColumnType<SettlementRecord | null, string | null | undefined, string | null>;
  /** What an attached unmatched transfer paid (D19); null: the gross, paid as asked. */
  amount_received: ColumnType<string | null, string | bigint | null | undefined, string | bigint | null>;
  /** Refunds completed or on their way (D19); a failed refund gives its amount back. */
  refunded_amount: ColumnType<string, string | bigint | undefined, string | bigint>;
  /** Settled through the x402 facilitator (migration 040); else null. */
  x402: ColumnType<X402Origin | null, string | null | undefined, string | null>;
}

export interface SplitConfigsTable {
  workspace_id: string;
  environment: string;
  enabled: boolean;
  splits: Json<StoredSplit[]>;
  updated_at: Timestamp;
}

export interface IdempotencyKeysTable {
  workspace_id: string;
  environment: string;
  scope: string;
  key: string;
  request_hash: string;
  resource_id: string | null;
  response_status: number | null;
  response_body: Json<object> | null;
  created_at: Timestamp;
}

export interface OutboxEventsTable {
  id: Generated<string>;
  workspace_id: string;
  environment: string;
  event_type: string;
  payload: Json<Record<string, unknown>>;
  created_at: Generated<Date>;
}

export interface WebhookEndpointsTable {
  id: Generated<number>;
  workspace_id: string;
  environment: string;
  url: string;
  events: Json<string[]>;
  encrypted_secret: string;
  active: Generated<boolean>;
  failing_since: NullableTimestamp;
  disabled_reason: string | null;
  created_at: Generated<Date>;
  deleted_at: NullableTimestamp;
  /** The secret a rotation replaced, encrypted; it signs too until previous_secret_expires_at. */
  previous_encrypted_secret: string | null;
  previous_secret_expires_at: NullableTimestamp;
  /** While it fails: when its oldest waiting delivery is tried next (a probe); else null. */
  next_probe_at: NullableTimestamp;
}

export interface WebhookDeliveriesTable {
  id: Generated<string>;
  endpoint_id: number;
  outbox_event_id: string;
  event_type: string;
  status: Generated<string>;
  attempts: Generated<number>;
  next_attempt_at: Generated<Date>;
  locked_until: NullableTimestamp;
  last_response_code: number | null;
  last_error: string | null;
  created_at: Generated<Date>;
  delivered_at: NullableTimestamp;
  /** Its retry time while a recovery has made it due sooner (recovery-repo.ts); else null. */
  scheduled_at: NullableTimestamp;
}

export interface ChainCursorsTable {
  environment: string;
  /** Each network's watcher keeps its own cursor (D22, migration 032). */
  network: string;
  block_number: ColumnType<string, string | bigint, string | bigint>;
  block_hash: string;
  updated_at: Generated<Date>;
}

export interface UnmatchedTransfersTable {
  id: Generated<string>;
  workspace_id: string | null;
  environment: string;
  /** The network the transfer arrived on (D22). */
  network: string;
  token_symbol: string;
  amount: Units;
  from_address: string;
  to_address: string;
  tx_hash: string;
  log_index: number;
  block_number: ColumnType<string, string | bigint, string | bigint>;
  reason: string;
  created_at: Generated<Date>;
  /** open, attached (to payment_id), returned (D19), onramp (D17) or dropped by a reorganisation. */
  status: ColumnType<string, string | undefined, string>;
  payment_id: ColumnType<string | null, string | null | undefined, string | null>;
  resolved_at: NullableTimestamp;
  /** When the watcher found it under the network's confirmations (migration 037); the ledger's at once. */
  confirmed_at: NullableTimestamp;
}

/** The chain watcher's claim on a transfer it has accounted for (migration 011). */
export interface ObservedTransfersTable {
  environment: string;
  /** The network the watcher saw it on (D22): the same hash on another chain is another transfer. */
  network: string;
  tx_hash: string;
  /** Block-level log index where the transfer was first seen (-1: native ETH). */
  log_index: number;
  block_number: ColumnType<string, string | bigint, string | bigint>;
  token_symbol: string;
  /** Lower-case recipient. */
  to_address: string;
  /** The n-th transfer of this token to this recipient within the transaction (from 0). */
  ordinal: number;
  /** What the transfer counts as (domain/transfer-claim.ts, migration 026). */
  claim: string;
  created_at: Generated<Date>;
}

export interface ChainTransactionsTable {
  id: Generated<string>;
  environment: string;
  /** The network it is signed for (D22): its nonce is unique per (environment, network, from_address). */
  network: string;
  from_address: string;
  nonce: ColumnType<string, string | bigint, string | bigint>;
  purpose: string;
  payment_id: string | null;
  payout_id: ColumnType<string | null, string | null | undefined, string | null>;
  to_address: string;
  token_symbol: string;
  amount: Units;
  raw_tx: string;
  tx_hash: string;
  status: Generated<string>;
  error: string | null;
  created_at: Generated<Date>;
  mined_at: NullableTimestamp;
  /** A cancelling transaction: the transaction whose nonce it takes (migration 016). */
  replaces_tx_hash: ColumnType<string | null, string | null | undefined, string | null>;
  /** The gas limit it was signed with; null before migration 029 (its kind's default). */
  gas_limit: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface JobLeasesTable {
  name: string;
  holder: string;
  expires_at: Date;
}

export interface PayoutsTable {
  id: Generated<string>;
  workspace_id: string;
  environment: string;
  /** The network it moves on (D22, migration 033): every kind of transfer. */
  network: string;
  idempotency_key: string | null;
  status: string;
  token_symbol: string;
  amount: Units;
  destination_address: string;
  from_address: string;
  wallet_type: string;
  description: string | null;
  metadata: Json<Record<string, string>>;
  tx_hash: string | null;
  user_op_hash: string | null;
  user_operation: ColumnType<string | null, string | null | undefined, string | null>;
  error: string | null;
  created_at: Generated<Date>;
  completed_at: NullableTimestamp;
  /** Until when the instance sending it owns it; the reconciler leaves it alone until then. */
  lease_expires_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** When its sender recorded its transaction (or began to): it may have been sent since. */
  send_claimed_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** payout, refund (of payment_id) or return (of unmatched_transfer_id): migration 022. */
  kind: ColumnType<string, string | undefined, string>;
  payment_id: ColumnType<string | null, string | null | undefined, string | null>;
  unmatched_transfer_id: ColumnType<string | null, string | null | undefined, string | null>;
  reason: ColumnType<string | null, string | null | undefined, string | null>;
  /**
   * The gas limits its transactions will be signed with, in all (an EOA's; migration 029), kept
   * for the balance check until they are recorded; null where sponsored, or before 029.
   */
  gas_limit: ColumnType<string | null, string | null | undefined, string | null>;
}

/** A refund of a card payment, made at the provider (D19, migration 022). */
export interface CardRefundsTable {
  id: string;
  workspace_id: string;
  environment: string;
  payment_id: string;
  token_symbol: string;
  amount: Units;
  reason: string | null;
  status: string;
  /** The checkout session whose payment intent it refunds. */
  checkout_session_id: string | null;
  provider_refund_id: string | null;
  error: string | null;
  created_at: Timestamp;
  completed_at: NullableTimestamp;
  source: ColumnType<string, string | undefined, string>; // service (the API) or provider (its dashboard), 038
}

export interface PayoutBreakersTable {
  workspace_id: string;
  environment: string;
  status: Generated<string>;
  fail_streak: Generated<number>;
  paused_at: NullableTimestamp;
  reason: string | null;
}

/** Maintained by the payment_totals_delta trigger (migration 020); compacted by a job. */
export interface PaymentTotalsTable {
  id: Generated<string>;
  workspace_id: string;
  environment: string;
  /** The payments' network (D22, migration 034); null for card payments. */
  network: string | null;
  day: ColumnType<string, string, string>;
  token_symbol: string;
  status: string;
  count: ColumnType<string, string | number | bigint, string | number | bigint>;
  volume: Units;
  compacted: Generated<boolean>;
}

export interface DatabaseSchema extends LedgerTables {
  workspaces: WorkspacesTable;
  workspace_logos: WorkspaceLogosTable;
  workspace_wallets: WorkspaceWalletsTable;
  api_keys: ApiKeysTable;
  payments: PaymentsTable;
  idempotency_keys: IdempotencyKeysTable;
  outbox_events: OutboxEventsTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  chain_cursors: ChainCursorsTable;
  unmatched_transfers: UnmatchedTransfersTable;
  observed_transfers: ObservedTransfersTable;
  chain_transactions: ChainTransactionsTable;
  job_leases: JobLeasesTable;
  payouts: PayoutsTable;
  payout_breakers: PayoutBreakersTable;
  card_events: CardEventsTable;
  card_refunds: CardRefundsTable;
  dashboard_sessions: DashboardSessionsTable;
  dashboard_login_attempts: DashboardLoginAttemptsTable;
  payment_totals: PaymentTotalsTable;
  split_configs: SplitConfigsTable;
  agents: AgentsTable;
  agent_wallets: AgentWalletsTable;
  agent_wallet_policies: AgentWalletPoliciesTable;
  agent_payment_authorizations: AgentPaymentAuthorizationsTable;
  swap_quotes: SwapQuotesTable;
  swaps: SwapsTable;
  sandbox_swap_pools: SandboxSwapPoolsTable;
  onramp_sessions: OnrampSessionsTable;
  workspace_email_changes: WorkspaceEmailChangesTable;
  x402_settlements: X402SettlementsTable;
  x402_facilitator_wallets: X402FacilitatorWalletsTable;
}

export type PaymentRow = Selectable<PaymentsTable>;
export type WorkspaceRow = Selectable<WorkspacesTable>;
export type ApiKeyRow = Selectable<ApiKeysTable>;
