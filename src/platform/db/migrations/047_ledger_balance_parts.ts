import { type Kysely, sql } from "kysely";

// A sandbox wallet's balance without summing its whole history (issue 43). Until now a balance was
// the sum of all of a wallet's ledger entries, and a debit read it while holding the wallet's debit
// lock: every debit cost more than the one before (a wallet with 1,000 entries read ~240 buffers
// per debit), and the debits of a busy wallet queued behind those reads.
//
// `ledger_balance_parts` holds the same sums in a few rows per wallet: a statement that inserts
// ledger entries adds one part per wallet and token it touched (a trigger, so a writer of the
// previous release, during a rolling upgrade, keeps the parts whole too), and a debit, already
// holding its wallet's lock, merges the wallet's parts into one once there are more than 16. Credits
// still never wait on each other (each adds a row of its own; no row is updated in place). The
// entries stay the record: the parts always sum to them, in the same transaction.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE ledger_balance_parts (
      id bigserial PRIMARY KEY,
      network text NOT NULL,
      address text NOT NULL,
      token_symbol text NOT NULL,
      amount numeric(78, 0) NOT NULL
    )`.execute(db);
  await sql`
    CREATE INDEX ledger_balance_parts_wallet
    ON ledger_balance_parts (network, address, token_symbol) INCLUDE (amount)`.execute(db);
  await sql`
    CREATE FUNCTION ledger_add_parts() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO ledger_balance_parts (network, address, token_symbol, amount)
      SELECT network, address, token_symbol, sum(amount) FROM added
      GROUP BY network, address, token_symbol;
      RETURN NULL;
    END
    $$`.execute(db);
  // Created before the parts are filled in, in the same transaction: it locks out writers of
  // entries until this commits, so no entry is missed or counted twice.
  await sql`
    CREATE TRIGGER ledger_entries_parts AFTER INSERT ON ledger_entries
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION ledger_add_parts()`.execute(db);
  await sql`
    INSERT INTO ledger_balance_parts (network, address, token_symbol, amount)
    SELECT network, address, token_symbol, sum(amount) FROM ledger_entries
    GROUP BY network, address, token_symbol`.execute(db);
  // The lock key is the one migration 035 takes, so instances of either release exclude each other.
  await sql`
    CREATE OR REPLACE FUNCTION ledger_debit_balance(net text, wallet text, token text) RETURNS numeric
    LANGUAGE plpgsql VOLATILE AS $$
    DECLARE
      balance numeric;
      parts integer;
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtext(
        CASE WHEN net = 'sandbox-a' THEN 'ledger:' || wallet || ':' || token
             ELSE 'ledger:' || net || ':' || wallet || ':' || token END));
      SELECT coalesce(sum(p.amount), 0), count(*) INTO balance, parts
      FROM ledger_balance_parts p WHERE p.network = net AND p.address = wallet AND p.token_symbol = token;
      IF parts > 16 THEN
        -- Only a holder of this lock merges: a part committed meanwhile is merged too, one still
        -- uncommitted stays as it is.
        WITH merged AS (
          DELETE FROM ledger_balance_parts p
          WHERE p.network = net AND p.address = wallet AND p.token_symbol = token
          RETURNING p.amount
        )
        INSERT INTO ledger_balance_parts (network, address, token_symbol, amount)
        SELECT net, wallet, token, sum(amount) FROM merged HAVING count(*) > 0;
      END IF;
      RETURN balance;
    END
    $$`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error("the ledger balance parts migration is not reversible");
}
