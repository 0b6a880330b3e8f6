import { type Kysely, sql } from "kysely";

// The sandbox ledger becomes append-only entries: a balance is the sum of its entries. Every
// sandbox payment credits its workspace wallet, and a single balance row per wallet made all of
// one workspace's payment creations queue on that row's lock (found by the benchmark).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE ledger_entries (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      address text NOT NULL,
      token_symbol text NOT NULL,
      amount numeric(78, 0) NOT NULL,
      tx_hash text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`CREATE INDEX ledger_entries_balance ON ledger_entries (address, token_symbol) INCLUDE (amount)`.execute(
    db,
  );
  await sql`
    INSERT INTO ledger_entries (address, token_symbol, amount, tx_hash)
    SELECT address, token_symbol, balance, 'migrated' FROM ledger_balances WHERE balance <> 0
  `.execute(db);
  await sql`DROP TABLE ledger_balances`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error("the ledger entries migration is not reversible");
}
