import { type Kysely, sql } from "kysely";

// Fiat on-ramp sessions (D17): a customer buys crypto with a card at the card provider and it is
// sent to a workspace wallet. A session is recorded once the provider made it (nothing is kept of
// a refused one), named by the provider's id; its status is the provider's, moved forward only by
// its events (de-duplicated in card_events); `completed_at` is ours: set once, when the chain shows
// the provider's transaction moving the crypto to the wallet (what it moved: `credited_amount`).
// The client secret lets a browser widget drive the session: kept encrypted.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE onramp_sessions (
      id uuid PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces (id),
      environment text NOT NULL,
      provider text NOT NULL CHECK (provider IN ('card', 'sandbox')),
      provider_session_id text NOT NULL,
      status text NOT NULL CHECK (status IN ('initialized', 'requires_payment', 'fulfillment_processing',
        'fulfillment_complete', 'rejected')),
      wallet_type text NOT NULL,
      wallet_address text NOT NULL,
      destination_currency text NOT NULL CHECK (destination_currency IN ('USDC', 'ETH')),
      destination_network text NOT NULL,
      source_amount text,
      destination_amount text,
      client_secret text,
      redirect_url text,
      transaction_id text,
      credited_amount numeric(78, 0) CHECK (credited_amount > 0),
      completed_at timestamptz,
      -- When the confirmation job last looked at it: it takes the least recently looked at first.
      confirm_checked_at timestamptz,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      CHECK ((completed_at IS NULL) = (credited_amount IS NULL)),
      CHECK (completed_at IS NULL OR status = 'fulfillment_complete')
    )`.execute(db);
  await sql`CREATE UNIQUE INDEX onramp_sessions_provider_id ON onramp_sessions (environment, provider_session_id)`.execute(
    db,
  );
  await sql`CREATE INDEX onramp_sessions_by_workspace ON onramp_sessions (workspace_id, environment, created_at DESC, id DESC)`.execute(
    db,
  );
  // A delivery the watcher put in the unmatched inbox before the provider named its transaction is
  // the session's: a status of its own.
  await sql`ALTER TABLE unmatched_transfers DROP CONSTRAINT unmatched_transfers_status_check`.execute(db);
  await sql`
    ALTER TABLE unmatched_transfers ADD CONSTRAINT unmatched_transfers_status_check
      CHECK (status IN ('open', 'attached', 'returned', 'onramp'))`.execute(db);
  // One transaction delivers one session: a second session naming it is refused (service.ts).
  await sql`
    CREATE UNIQUE INDEX onramp_sessions_transaction ON onramp_sessions (environment, transaction_id)
      WHERE transaction_id IS NOT NULL`.execute(db);
  // What the confirmation job looks at: fulfilled at the provider, not credited yet.
  await sql`
    CREATE INDEX onramp_sessions_to_confirm ON onramp_sessions (environment, confirm_checked_at NULLS FIRST)
      WHERE status = 'fulfillment_complete' AND completed_at IS NULL`.execute(db);
}
