import { type Kysely, sql } from "kysely";

// The sandbox's simulated ledger keeps balances per network (D22: sandbox-a and sandbox-b). Every
// entry and transaction names its network; the rows before this migration were sandbox-a's, the
// only network the ledger had. The column's default stays sandbox-a so that an instance of the
// previous release, still running during a rolling upgrade, keeps writing where it always did.
// The sandbox's swap pools are per network too.
//
// A wallet's debits take turns per network and token: ledger_debit_balance gains the network.
// Its lock key on sandbox-a is the one the two-argument function has always taken, so that
// instances of either release exclude each other there. The old function stays for the previous
// release, as sandbox-a's (it summed a wallet's entries of every network, so an old instance
// could have spent sandbox-b's money on sandbox-a).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE ledger_entries ADD COLUMN network text NOT NULL DEFAULT 'sandbox-a'`.execute(db);
  await sql`ALTER TABLE ledger_transactions ADD COLUMN network text NOT NULL DEFAULT 'sandbox-a'`.execute(db);
  await sql`DROP INDEX ledger_entries_balance`.execute(db);
  await sql`
    CREATE INDEX ledger_entries_balance ON ledger_entries (network, address, token_symbol) INCLUDE (amount)
  `.execute(db);
  await sql`
    CREATE FUNCTION ledger_debit_balance(net text, wallet text, token text) RETURNS numeric
    LANGUAGE plpgsql VOLATILE AS $$
    DECLARE
      balance numeric;
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtext(
        CASE WHEN net = 'sandbox-a' THEN 'ledger:' || wallet || ':' || token
             ELSE 'ledger:' || net || ':' || wallet || ':' || token END));
      SELECT coalesce(sum(e.amount), 0) INTO balance
      FROM ledger_entries e WHERE e.network = net AND e.address = wallet AND e.token_symbol = token;
      RETURN balance;
    END
    $$`.execute(db);
  await sql`
    CREATE OR REPLACE FUNCTION ledger_debit_balance(wallet text, token text) RETURNS numeric
    LANGUAGE sql VOLATILE AS $$ SELECT ledger_debit_balance('sandbox-a', wallet, token) $$`.execute(db);

  await sql`ALTER TABLE sandbox_swap_pools ADD COLUMN network text NOT NULL DEFAULT 'sandbox-a'`.execute(db);
  await sql`ALTER TABLE sandbox_swap_pools DROP CONSTRAINT sandbox_swap_pools_pkey`.execute(db);
  await sql`ALTER TABLE sandbox_swap_pools ADD PRIMARY KEY (workspace_id, network, pair)`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error("the ledger networks migration is not reversible");
}
