import type { ColumnType, JSONColumnType } from "kysely";

// The tables of exchanging one currency for another, apart from schema.ts to keep each file
// small: token swaps (D16, migration 023) and fiat on-ramp sessions (D17, migration 024).

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type Units = ColumnType<string, string | bigint, string | bigint>;
type NullableUnits = ColumnType<string | null, string | bigint | null | undefined, string | bigint | null>;

/** One hop of a swap's route, as the quote shows it. */
export interface RouteHop {
  protocol: string;
  pool: string;
  fee: number;
}

export interface SwapQuotesTable {
  id: string;
  workspace_id: string;
  environment: string;
  /** The network it is on (D22, migration 033). */
  network: string;
  sell_token: string;
  buy_token: string;
  side: string;
  sell_amount: Units;
  buy_amount: Units;
  min_buy_amount: Units;
  max_sell_amount: Units;
  slippage_bps: number;
  price_impact_bps: number;
  wallet_type: string;
  from_address: string;
  route: JSONColumnType<RouteHop[], string, string>;
  gas_estimate: Units;
  expires_at: Timestamp;
  created_at: Timestamp;
}

/** A swap's own facts; its status, hashes and error are its transfer's (the payouts row, same id). */
export interface SwapsTable {
  id: string;
  workspace_id: string;
  environment: string;
  /** The network it is on (D22, migration 033). */
  network: string;
  quote_id: string | null;
  sell_token: string;
  buy_token: string;
  side: string;
  quoted_sell_amount: Units;
  quoted_buy_amount: Units;
  min_buy_amount: Units;
  max_sell_amount: Units;
  slippage_bps: number;
  route: JSONColumnType<RouteHop[], string, string>;
  sold_amount: NullableUnits;
  bought_amount: NullableUnits;
  created_at: Timestamp;
}

export interface SandboxSwapPoolsTable {
  workspace_id: string;
  /** The simulated network the pool trades on (D22). */
  network: string;
  pair: string;
  base_reserve: Units;
  quote_reserve: Units;
}

export interface OnrampSessionsTable {
  id: string;
  workspace_id: string;
  environment: string;
  /** The network it is on (D22, migration 033). */
  network: string;
  provider: string;
  provider_session_id: string;
  status: string;
  wallet_type: string;
  wallet_address: string;
  destination_currency: string;
  destination_network: string;
  /** Decimal strings as the provider states them (US dollars; the crypto's units). */
  source_amount: string | null;
  destination_amount: string | null;
  /** Encrypted (platform/secrets). */
  client_secret: string | null;
  redirect_url: string | null;
  transaction_id: string | null;
  credited_amount: NullableUnits;
  completed_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  confirm_checked_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  /** When the reconciler last asked the provider about it (migration 025). */
  reconciled_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  /** When the confirmation job gave up on its transaction (migration 026). */
  confirm_given_up_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  created_at: Timestamp;
  updated_at: Timestamp;
}
