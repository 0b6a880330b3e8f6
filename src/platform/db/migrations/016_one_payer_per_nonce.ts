import { type Kysely, sql } from "kysely";

// Money never leaves twice, also with several instances (issue 20):
// - A transaction the node refused is no longer given up (`rejected`) and its nonce handed to the
//   next transfer: that left a signed transaction that could still be mined later. It is replaced
//   instead by a cancelling transaction at the same nonce (`replaces_tx_hash`), and it is
//   `replaced` only once its nonce is provably taken by another mined transaction. So one nonce
//   may now have several recorded candidates; only one of them is primary (not a replacement).
// - A payment's settlement legs are unique: a second settlement of one payment (two workers, or
//   one that lost its lease) cannot even be recorded, let alone sent.
// - A payout in flight is leased by the instance sending it; the reconciler only touches payouts
//   whose lease has run out (or that were never leased), and never fails as "not sent" one whose
//   sender claimed it for sending (send_claimed_at).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE chain_transactions DROP CONSTRAINT chain_transactions_status_check`.execute(db);
  await sql`
    ALTER TABLE chain_transactions ADD CONSTRAINT chain_transactions_status_check
      CHECK (status IN ('signed', 'mined', 'failed', 'rejected', 'replaced'))`.execute(db);
  await sql`ALTER TABLE chain_transactions ADD COLUMN replaces_tx_hash text REFERENCES chain_transactions(tx_hash)`.execute(
    db,
  );
  await sql`DROP INDEX chain_transactions_nonce`.execute(db);
  await sql`
    CREATE UNIQUE INDEX chain_transactions_nonce ON chain_transactions (environment, from_address, nonce)
      WHERE status <> 'rejected' AND replaces_tx_hash IS NULL`.execute(db);
  // What is on its way out of a wallet: its transactions from a nonce on (every status).
  await sql`CREATE INDEX chain_transactions_wallet ON chain_transactions (environment, from_address, nonce)`.execute(
    db,
  );
  await sql`CREATE INDEX chain_transactions_replaces ON chain_transactions (replaces_tx_hash) WHERE replaces_tx_hash IS NOT NULL`.execute(
    db,
  );
  // A payment settled more than once before this migration (the fault it fixes) keeps its first
  // legs; the later ones are kept too, marked by their purpose, so that the index can be built
  // and the operator can find them: purpose LIKE '%_duplicate'.
  await sql`
    UPDATE chain_transactions t SET purpose = t.purpose || '_duplicate'
    FROM (
      SELECT id, row_number() OVER (PARTITION BY payment_id, purpose ORDER BY created_at, nonce) AS n
      FROM chain_transactions WHERE payment_id IS NOT NULL AND status <> 'rejected'
    ) d
    WHERE t.id = d.id AND d.n > 1`.execute(db);
  await sql`
    CREATE UNIQUE INDEX chain_transactions_settlement_leg ON chain_transactions (payment_id, purpose)
      WHERE payment_id IS NOT NULL AND status <> 'rejected'`.execute(db);
  await sql`ALTER TABLE payouts ADD COLUMN lease_expires_at timestamptz`.execute(db);
  // Set once the sender records the payout's transaction: from then on it was (maybe) sent.
  await sql`ALTER TABLE payouts ADD COLUMN send_claimed_at timestamptz`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error("the one-payer-per-nonce migration is not reversible");
}
