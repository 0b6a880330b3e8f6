import { type Kysely, sql } from "kysely";

// Every record of money that concerns a chain names its network (D22): the chain watcher's claims,
// the unmatched inbox, crypto payments, every transfer (payouts, refunds, returns, swaps,
// settlements), swaps and their quotes, on-ramp sessions. The same hash on two chains is two
// transfers, so the keys that make a transfer count once (the watcher's claim, an on-ramp's
// transaction) and the indexes that find one gain the network.
//
// What was recorded before was on its environment's one network. Live's is `default` (the
// <ENV>_… variables' chain). The sandbox's is `default` where a chain is evidenced (the watcher
// claimed the transfer, a chain transaction was signed for the payout, its hash is not the
// ledger's, the quote was priced by Uniswap, the on-ramp session was the card provider's), else
// the simulated ledger's network `sandbox-a`. Card payments have none (null).
//
// No column keeps a default: an instance of the version before would write rows without a network,
// which the NOT NULL refuses loudly. Stop those instances first (docs/operations.md), as for 032.
const SANDBOX_LEDGER = "sandbox-a";

export async function up(db: Kysely<unknown>): Promise<void> {
  // The watcher's claims: only ever made on a chain.
  await sql`ALTER TABLE observed_transfers ADD COLUMN network text NOT NULL DEFAULT 'default'`.execute(db);
  await sql`ALTER TABLE observed_transfers ALTER COLUMN network DROP DEFAULT`.execute(db);
  await sql`ALTER TABLE observed_transfers DROP CONSTRAINT observed_transfers_pkey`.execute(db);
  await sql`
    ALTER TABLE observed_transfers
      ADD PRIMARY KEY (environment, network, tx_hash, token_symbol, to_address, ordinal)`.execute(db);
  await sql`DROP INDEX observed_transfers_place`.execute(db);
  await sql`
    CREATE INDEX observed_transfers_place ON observed_transfers (environment, network, tx_hash, log_index)`.execute(
    db,
  );

  const onChainTransfer = (table: string, hash: string) => sql`
    CASE WHEN environment = 'live' OR EXISTS (
      SELECT 1 FROM observed_transfers o
       WHERE o.environment = ${sql.ref(table)}.environment AND o.tx_hash = ${sql.ref(hash)})
    THEN 'default' ELSE ${SANDBOX_LEDGER} END`;

  await sql`ALTER TABLE unmatched_transfers ADD COLUMN network text`.execute(db);
  await sql`UPDATE unmatched_transfers SET network = ${onChainTransfer("unmatched_transfers", "unmatched_transfers.tx_hash")}`.execute(
    db,
  );
  await sql`ALTER TABLE unmatched_transfers ALTER COLUMN network SET NOT NULL`.execute(db);
  await sql`DROP INDEX unmatched_transfers_transfer`.execute(db);
  await sql`
    CREATE INDEX unmatched_transfers_transfer ON unmatched_transfers (environment, network, tx_hash)`.execute(
    db,
  );

  // A crypto payment's network; null for a card payment (and, later, a payment payable on several
  // networks until a transfer is detected).
  await sql`ALTER TABLE payments ADD COLUMN network text`.execute(db);
  await sql`
    UPDATE payments SET network = ${onChainTransfer("payments", "payments.detected_tx_hash")}
     WHERE payment_method = 'crypto'`.execute(db);
  await sql`DROP INDEX payments_detected_transfer`.execute(db);
  await sql`
    CREATE INDEX payments_detected_transfer ON payments (environment, network, detected_tx_hash)
      WHERE detected_tx_hash IS NOT NULL`.execute(db);
  await sql`DROP INDEX payments_pending_match`.execute(db);
  await sql`
    CREATE INDEX payments_pending_match
      ON payments (environment, network, lower(receiving_address), token_symbol, gross_amount, created_at)
      WHERE status = 'pending'`.execute(db);

  // Every transfer: on a chain where one was signed for it or its hash is not the ledger's.
  await sql`ALTER TABLE payouts ADD COLUMN network text`.execute(db);
  await sql`
    UPDATE payouts p SET network = CASE
      WHEN p.environment = 'live' THEN 'default'
      WHEN EXISTS (SELECT 1 FROM chain_transactions c WHERE c.payout_id = p.id) THEN 'default'
      WHEN p.tx_hash IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM ledger_transactions l WHERE l.tx_hash = p.tx_hash) THEN 'default'
      ELSE ${SANDBOX_LEDGER} END`.execute(db);
  await sql`ALTER TABLE payouts ALTER COLUMN network SET NOT NULL`.execute(db);

  // A swap is its transfer's (the payouts row of the same id); a quote, its venue's.
  await sql`ALTER TABLE swaps ADD COLUMN network text`.execute(db);
  await sql`UPDATE swaps s SET network = p.network FROM payouts p WHERE p.id = s.id`.execute(db);
  await sql`UPDATE swaps SET network = ${SANDBOX_LEDGER} WHERE network IS NULL`.execute(db);
  await sql`ALTER TABLE swaps ALTER COLUMN network SET NOT NULL`.execute(db);
  await sql`ALTER TABLE swap_quotes ADD COLUMN network text`.execute(db);
  await sql`
    UPDATE swap_quotes SET network = CASE
      WHEN environment = 'live' OR route @> '[{"protocol": "uniswap-v3"}]'::jsonb THEN 'default'
      ELSE ${SANDBOX_LEDGER} END`.execute(db);
  await sql`ALTER TABLE swap_quotes ALTER COLUMN network SET NOT NULL`.execute(db);

  // An on-ramp session delivers on one network; its transaction hash is unique on that chain.
  await sql`ALTER TABLE onramp_sessions ADD COLUMN network text`.execute(db);
  await sql`
    UPDATE onramp_sessions SET network = CASE WHEN provider = 'sandbox' THEN ${SANDBOX_LEDGER} ELSE 'default' END`.execute(
    db,
  );
  await sql`ALTER TABLE onramp_sessions ALTER COLUMN network SET NOT NULL`.execute(db);
  await sql`DROP INDEX onramp_sessions_transaction`.execute(db);
  await sql`
    CREATE UNIQUE INDEX onramp_sessions_transaction ON onramp_sessions (environment, network, transaction_id)
      WHERE transaction_id IS NOT NULL`.execute(db);
}
