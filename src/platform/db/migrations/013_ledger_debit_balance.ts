import { type Kysely, sql } from "kysely";

// A sandbox ledger transfer in ONE statement (no BEGIN, lock, statement, COMMIT round trips). A
// wallet's debits must take turns: a debit checks the balance, then spends it. A statement's own
// snapshot is taken when it starts, before any lock it takes inside, so it could not see a debit
// committed while it waited. A VOLATILE function's statements each take a new snapshot (READ
// COMMITTED), so this function locks the wallet's debits and then sums its entries with a
// snapshot that sees every debit committed before the lock was granted (a transaction is visible
// before its locks are released). The lock is held until the calling statement's transaction
// ends. The key is the one the ledger has always locked, so that instances of either kind
// exclude each other.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE FUNCTION ledger_debit_balance(wallet text, token text) RETURNS numeric
    LANGUAGE plpgsql VOLATILE AS $$
    DECLARE
      balance numeric;
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtext('ledger:' || wallet || ':' || token));
      SELECT coalesce(sum(e.amount), 0) INTO balance
      FROM ledger_entries e WHERE e.address = wallet AND e.token_symbol = token;
      RETURN balance;
    END
    $$`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP FUNCTION ledger_debit_balance(text, text)`.execute(db);
}
