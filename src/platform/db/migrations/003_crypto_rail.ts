import { type Kysely, sql } from "kysely";

// The live crypto rail: what the watcher saw (detections on payments, unmatched transfers, its
// cursor) and every transaction the service signs (settlements, gas top-ups), recorded before
// broadcast so that a restart can reconcile instead of sending twice.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE payments
      ADD COLUMN detected_tx_hash text,
      ADD COLUMN detected_log_index integer,
      ADD COLUMN detected_block bigint,
      ADD COLUMN detected_block_hash text,
      ADD COLUMN payer_address text,
      ADD COLUMN detected_at timestamptz,
      ADD COLUMN confirmed_at timestamptz,
      ADD COLUMN settlement_net_tx_hash text,
      ADD COLUMN settlement_fee_tx_hash text,
      ADD COLUMN forwarded_at timestamptz,
      ADD COLUMN failure_reason text
  `.execute(db);
  // One on-chain transfer pays at most one payment.
  await sql`
    CREATE UNIQUE INDEX payments_detected_transfer ON payments (environment, detected_tx_hash, detected_log_index)
    WHERE detected_tx_hash IS NOT NULL
  `.execute(db);
  // The matcher: pending payments of a receiving address, token and amount, oldest first.
  await sql`
    CREATE INDEX payments_pending_match ON payments (environment, lower(receiving_address), token_symbol, gross_amount, created_at)
    WHERE status = 'pending'
  `.execute(db);
  await sql`CREATE INDEX payments_in_flight ON payments (environment, status) WHERE status IN ('detected', 'confirmed')`.execute(
    db,
  );

  await sql`
    CREATE TABLE chain_cursors (
      environment text PRIMARY KEY,
      block_number bigint NOT NULL,
      block_hash text NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);

  await sql`
    CREATE TABLE unmatched_transfers (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      workspace_id uuid REFERENCES workspaces(id),
      environment text NOT NULL,
      token_symbol text NOT NULL,
      amount numeric(78, 0) NOT NULL,
      from_address text NOT NULL,
      to_address text NOT NULL,
      tx_hash text NOT NULL,
      log_index integer NOT NULL,
      block_number bigint NOT NULL,
      reason text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (environment, tx_hash, log_index)
    )`.execute(db);
  await sql`CREATE INDEX unmatched_transfers_workspace ON unmatched_transfers (workspace_id, environment, created_at DESC)`.execute(
    db,
  );

  await sql`
    CREATE TABLE chain_transactions (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      environment text NOT NULL,
      from_address text NOT NULL,
      nonce bigint NOT NULL,
      purpose text NOT NULL,
      payment_id uuid REFERENCES payments(id),
      to_address text NOT NULL,
      token_symbol text NOT NULL,
      amount numeric(78, 0) NOT NULL,
      raw_tx text NOT NULL,
      tx_hash text NOT NULL UNIQUE,
      status text NOT NULL DEFAULT 'signed' CHECK (status IN ('signed', 'mined', 'failed')),
      error text,
      created_at timestamptz NOT NULL DEFAULT now(),
      mined_at timestamptz,
      UNIQUE (environment, from_address, nonce)
    )`.execute(db);
  await sql`CREATE INDEX chain_transactions_open ON chain_transactions (environment, from_address) WHERE status = 'signed'`.execute(
    db,
  );
  // Single-leader periodic jobs across instances: a lease row per job.
  await sql`
    CREATE TABLE job_leases (
      name text PRIMARY KEY,
      holder text NOT NULL,
      expires_at timestamptz NOT NULL
    )`.execute(db);

  await sql`CREATE INDEX chain_transactions_payment ON chain_transactions (payment_id) WHERE payment_id IS NOT NULL`.execute(
    db,
  );
}

export async function down(): Promise<void> {
  throw new Error("the crypto rail migration is not reversible");
}
