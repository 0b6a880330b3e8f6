import { type Kysely, sql } from "kysely";

// Foundation: workspaces with their EOA, API keys, payments, idempotency records and the
// transactional outbox every state change writes its events into.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE workspaces (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      name text NOT NULL,
      settlement_address text,
      default_wallet_type text NOT NULL DEFAULT 'workspace' CHECK (default_wallet_type IN ('workspace', 'smart_wallet')),
      admin_email text,
      admin_password_hash text,
      created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);

  await sql`
    CREATE TABLE workspace_wallets (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      workspace_id uuid NOT NULL REFERENCES workspaces(id),
      kind text NOT NULL CHECK (kind IN ('eoa', 'smart_wallet')),
      address text NOT NULL,
      encrypted_private_key text,
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (workspace_id, kind)
    )`.execute(db);
  await sql`CREATE INDEX workspace_wallets_address ON workspace_wallets (lower(address))`.execute(db);

  await sql`
    CREATE TABLE api_keys (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      workspace_id uuid NOT NULL REFERENCES workspaces(id),
      environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
      name text,
      prefix text NOT NULL,
      key_hash text NOT NULL UNIQUE,
      created_at timestamptz NOT NULL DEFAULT now(),
      last_used_at timestamptz,
      revoked_at timestamptz
    )`.execute(db);
  await sql`CREATE INDEX api_keys_workspace ON api_keys (workspace_id, created_at)`.execute(db);

  await sql`
    CREATE TABLE payments (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      workspace_id uuid NOT NULL REFERENCES workspaces(id),
      environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
      status text NOT NULL CHECK (status IN ('pending', 'detected', 'confirmed', 'forwarded', 'failed', 'expired', 'cancelled')),
      payment_method text NOT NULL CHECK (payment_method IN ('crypto', 'card')),
      payment_provider text NOT NULL CHECK (payment_provider IN ('onchain', 'card')),
      token_symbol text NOT NULL,
      gross_amount numeric(78, 0) NOT NULL CHECK (gross_amount > 0),
      fee_amount numeric(78, 0) NOT NULL CHECK (fee_amount >= 0),
      net_amount numeric(78, 0) NOT NULL CHECK (net_amount >= 0),
      merchant_wallet text,
      wallet_type text NOT NULL CHECK (wallet_type IN ('eoa', 'smart_wallet')),
      receiving_address text,
      description text,
      metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
      return_url text,
      cancel_url text,
      expires_at timestamptz NOT NULL,
      card_checkout_session_id text UNIQUE,
      checkout_url text,
      last_payment_error jsonb,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      CHECK (gross_amount = fee_amount + net_amount)
    )`.execute(db);
  // Lists are always scoped to (workspace, environment) and ordered newest first.
  await sql`CREATE INDEX payments_list ON payments (workspace_id, environment, created_at DESC, id DESC)`.execute(
    db,
  );
  await sql`
    CREATE INDEX payments_list_status ON payments (workspace_id, environment, status, created_at DESC, id DESC)
  `.execute(db);
  // The expiry job scans only pending payments by due time.
  await sql`CREATE INDEX payments_pending_expiry ON payments (expires_at) WHERE status = 'pending'`.execute(
    db,
  );

  await sql`
    CREATE TABLE idempotency_keys (
      workspace_id uuid NOT NULL REFERENCES workspaces(id),
      environment text NOT NULL,
      scope text NOT NULL,
      key text NOT NULL,
      request_hash text NOT NULL,
      resource_id uuid,
      response_status integer,
      response_body jsonb,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (workspace_id, environment, scope, key)
    )`.execute(db);

  await sql`
    CREATE TABLE outbox_events (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces(id),
      environment text NOT NULL,
      event_type text NOT NULL,
      payload jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`CREATE INDEX outbox_events_workspace ON outbox_events (workspace_id, environment, id)`.execute(
    db,
  );
}

export async function down(): Promise<void> {
  throw new Error("the foundation migration is not reversible");
}
