import { type Kysely, sql } from "kysely";

// One meaning per incoming transfer (domain/transfer-claim.ts). The watcher's claim on a transfer
// (observed_transfers, one row per transfer identity) now says what the transfer counts as: a
// payment's money, an unmatched inbox item, or an on-ramp session's delivery. An on-ramp credit
// takes the claim too, so a transfer a payment took can no longer also be credited to a session.
// Existing claims are classified by what holds them today: a payment that names the transfer (the
// watcher's detection or an attachment), an inbox item the on-ramp took, else the inbox. Claims
// have no default: every writer says what it claims.
//
// On-ramp sessions whose transaction never confirms are given up after a bound (onramp/confirm.ts):
// `confirm_given_up_at` records when, and the confirmation job's index leaves them out.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE observed_transfers ADD COLUMN claim text NOT NULL DEFAULT 'inbox'`.execute(db);
  await sql`
    UPDATE observed_transfers o SET claim = 'payment'
    FROM payments p
    WHERE p.environment = o.environment AND p.detected_tx_hash = o.tx_hash
      AND p.detected_log_index = o.log_index`.execute(db);
  await sql`
    UPDATE observed_transfers o SET claim = 'onramp'
    FROM unmatched_transfers u
    WHERE u.status = 'onramp' AND u.environment = o.environment AND u.tx_hash = o.tx_hash
      AND u.log_index = o.log_index AND lower(u.to_address) = o.to_address
      AND u.token_symbol = o.token_symbol`.execute(db);
  await sql`
    ALTER TABLE observed_transfers
      ALTER COLUMN claim DROP DEFAULT,
      ADD CONSTRAINT observed_transfers_claim_check CHECK (claim IN ('payment', 'inbox', 'onramp'))`.execute(
    db,
  );
  // The inbox item of a claim, and the claim of an inbox item, are found by the transfer's first-seen place.
  await sql`CREATE INDEX observed_transfers_place ON observed_transfers (environment, tx_hash, log_index)`.execute(
    db,
  );

  await sql`ALTER TABLE onramp_sessions ADD COLUMN confirm_given_up_at timestamptz`.execute(db);
  await sql`DROP INDEX onramp_sessions_to_confirm`.execute(db);
  await sql`
    CREATE INDEX onramp_sessions_to_confirm ON onramp_sessions (environment, confirm_checked_at NULLS FIRST)
      WHERE status = 'fulfillment_complete' AND completed_at IS NULL AND confirm_given_up_at IS NULL`.execute(
    db,
  );
}

export async function down(): Promise<void> {
  throw new Error("the transfer claims migration is not reversible");
}
