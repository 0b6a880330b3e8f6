import { type Kysely, sql } from "kysely";

// Payouts with their idempotency key, the per-workspace-and-environment circuit breaker, and the
// sandbox's simulated ledger (D3): balances and transactions with real-format hashes.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE payouts (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      workspace_id uuid NOT NULL REFERENCES workspaces(id),
      environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
      idempotency_key text,
      status text NOT NULL CHECK (status IN ('processing', 'completed', 'failed')),
      token_symbol text NOT NULL,
      amount numeric(78, 0) NOT NULL CHECK (amount > 0),
      destination_address text NOT NULL,
      from_address text NOT NULL,
      wallet_type text NOT NULL,
      description text,
      metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
      tx_hash text,
      user_op_hash text,
      error text,
      created_at timestamptz NOT NULL DEFAULT now(),
      completed_at timestamptz,
      UNIQUE (workspace_id, environment, idempotency_key)
    )`.execute(db);
  await sql`CREATE INDEX payouts_history ON payouts (workspace_id, environment, status, created_at DESC, id DESC)`.execute(
    db,
  );
  await sql`CREATE INDEX payouts_processing ON payouts (environment) WHERE status = 'processing'`.execute(db);

  // A payout's on-chain transaction is recorded before broadcast like a settlement's.
  await sql`ALTER TABLE chain_transactions ADD COLUMN payout_id uuid REFERENCES payouts(id)`.execute(db);
  await sql`CREATE INDEX chain_transactions_payout ON chain_transactions (payout_id) WHERE payout_id IS NOT NULL`.execute(
    db,
  );

  await sql`
    CREATE TABLE payout_breakers (
      workspace_id uuid NOT NULL REFERENCES workspaces(id),
      environment text NOT NULL,
      status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused')),
      fail_streak integer NOT NULL DEFAULT 0,
      paused_at timestamptz,
      reason text,
      PRIMARY KEY (workspace_id, environment)
    )`.execute(db);

  await sql`
    CREATE TABLE ledger_balances (
      address text NOT NULL,
      token_symbol text NOT NULL,
      balance numeric(78, 0) NOT NULL DEFAULT 0 CHECK (balance >= 0),
      PRIMARY KEY (address, token_symbol)
    )`.execute(db);
  await sql`
    CREATE TABLE ledger_transactions (
      tx_hash text PRIMARY KEY,
      from_address text,
      to_address text NOT NULL,
      token_symbol text NOT NULL,
      amount numeric(78, 0) NOT NULL,
      status text NOT NULL CHECK (status IN ('success', 'reverted')),
      memo text,
      created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error("the payouts migration is not reversible");
}
