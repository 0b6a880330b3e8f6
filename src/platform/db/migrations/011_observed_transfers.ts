import { type Kysely, sql } from "kysely";

// The chain watcher's claim on every incoming transfer it has accounted for (matched to a payment
// or recorded as unmatched). The key is the transfer's identity, so the watcher's
// INSERT … ON CONFLICT DO NOTHING decides "seen before" in one place: a rescan (restart, reorg
// rewind) or a second instance inserting the same transfer gets nothing back and leaves it alone,
// and a concurrent insert of the same key waits for the first transaction's outcome. A detection
// that a reorg reverts gives its claim back, so the transfer counts again if it is mined again.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE observed_transfers (
      environment text NOT NULL,
      tx_hash text NOT NULL,
      log_index integer NOT NULL,
      block_number bigint NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (environment, tx_hash, log_index)
    )`.execute(db);
  // Transfers accounted for before this table existed stay seen: a rescan must not count them again.
  await sql`
    INSERT INTO observed_transfers (environment, tx_hash, log_index, block_number)
    SELECT environment, detected_tx_hash, detected_log_index, detected_block
      FROM payments WHERE detected_tx_hash IS NOT NULL
    UNION ALL
    SELECT environment, tx_hash, log_index, block_number FROM unmatched_transfers
    ON CONFLICT DO NOTHING`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error("the observed transfers migration is not reversible");
}
