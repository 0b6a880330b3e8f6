import type { ColumnType, Generated } from "kysely";

// The simulated ledger's tables (chain/simulated/ledger.ts: the sandbox's balances, its
// transactions, and the EIP-3009 nonces its tokens have seen used), apart from schema.ts to keep
// each file small.

type Units = ColumnType<string, string | bigint, string | bigint>;

export interface LedgerEntriesTable {
  id: Generated<string>;
  /** The simulated network (D22); the column's default is for the previous release's writes only. */
  network: string;
  address: string;
  token_symbol: string;
  /** Signed: credits positive, debits negative. */
  amount: Units;
  tx_hash: string;
  created_at: Generated<Date>;
}

/**
 * A wallet's balance in a few rows (migration 047): their sum is the sum of its entries. Written
 * by a trigger on ledger_entries and merged by debits; read, never written, by the code.
 */
export interface LedgerBalancePartsTable {
  id: Generated<string>;
  network: string;
  address: string;
  token_symbol: string;
  amount: Units;
}

export interface LedgerTransactionsTable {
  tx_hash: string;
  network: string;
  from_address: string | null;
  to_address: string;
  token_symbol: string;
  amount: Units;
  status: string;
  memo: string | null;
  created_at: Generated<Date>;
}

/** An EIP-3009 authorization used on the simulated ledger (migration 040): its token's nonce state. */
export interface SandboxAuthorizationsTable {
  network: string;
  token_symbol: string;
  authorizer: string;
  nonce: string;
  tx_hash: string;
  created_at: Generated<Date>;
}

/** The ledger's tables, part of DatabaseSchema. */
export interface LedgerTables {
  ledger_entries: LedgerEntriesTable;
  ledger_balance_parts: LedgerBalancePartsTable;
  ledger_transactions: LedgerTransactionsTable;
  sandbox_authorizations: SandboxAuthorizationsTable;
}
