import { type Kysely, sql } from "kysely";

// A transfer's identity that survives a reorg. The block-level log index changes when a reorg puts
// the same transaction into another block or at another position, so a claim keyed by it would
// let the re-included transfer count again (a second payment detected by the same money). Within
// its transaction a transfer keeps its place: the key becomes (transaction, token, recipient, n-th
// transfer of that token to that recipient in the transaction). log_index stays, as where the
// transfer was first seen.
//
// payments and unmatched_transfers had unique keys on the old identity too. The claim in
// observed_transfers is what guarantees one payment or one unmatched row per transfer; a stale
// block-level index kept there could collide with a later transfer's and stop the watcher, so
// those become plain indexes.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE observed_transfers
      ADD COLUMN token_symbol text,
      ADD COLUMN to_address text,
      ADD COLUMN ordinal integer`.execute(db);
  await sql`
    UPDATE observed_transfers o
    SET token_symbol = p.token_symbol, to_address = lower(p.receiving_address)
    FROM payments p
    WHERE p.environment = o.environment
      AND p.detected_tx_hash = o.tx_hash AND p.detected_log_index = o.log_index`.execute(db);
  await sql`
    UPDATE observed_transfers o
    SET token_symbol = u.token_symbol, to_address = lower(u.to_address)
    FROM unmatched_transfers u
    WHERE o.token_symbol IS NULL AND u.environment = o.environment
      AND u.tx_hash = o.tx_hash AND u.log_index = o.log_index`.execute(db);
  // A claim neither table explains (none is expected) stays distinct through its log index.
  await sql`
    UPDATE observed_transfers SET token_symbol = '', to_address = '' WHERE token_symbol IS NULL
  `.execute(db);
  await sql`
    UPDATE observed_transfers o SET ordinal = r.ordinal
    FROM (
      SELECT environment, tx_hash, log_index,
             (row_number() OVER (PARTITION BY environment, tx_hash, token_symbol, to_address
                                 ORDER BY log_index) - 1)::int AS ordinal
      FROM observed_transfers
    ) r
    WHERE r.environment = o.environment AND r.tx_hash = o.tx_hash AND r.log_index = o.log_index
  `.execute(db);
  await sql`
    ALTER TABLE observed_transfers
      ALTER COLUMN token_symbol SET NOT NULL,
      ALTER COLUMN to_address SET NOT NULL,
      ALTER COLUMN ordinal SET NOT NULL,
      DROP CONSTRAINT observed_transfers_pkey,
      ADD PRIMARY KEY (environment, tx_hash, token_symbol, to_address, ordinal)`.execute(db);

  await sql`DROP INDEX payments_detected_transfer`.execute(db);
  await sql`CREATE INDEX payments_detected_transfer ON payments (environment, detected_tx_hash)
            WHERE detected_tx_hash IS NOT NULL`.execute(db);
  await sql`
    ALTER TABLE unmatched_transfers DROP CONSTRAINT unmatched_transfers_environment_tx_hash_log_index_key
  `.execute(db);
  await sql`CREATE INDEX unmatched_transfers_transfer ON unmatched_transfers (environment, tx_hash)`.execute(
    db,
  );
}

export async function down(): Promise<void> {
  throw new Error("the transfer identity migration is not reversible");
}
