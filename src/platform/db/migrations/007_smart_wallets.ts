import { type Kysely, sql } from "kysely";

// Smart wallets (D11) and dashboard sessions (D12). A user operation is recorded signed before
// it is sent — for payouts and for settlements from a smart wallet — so a restart sends the same
// operation again instead of a second one.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE payouts ADD COLUMN user_operation text`.execute(db);
  await sql`
    ALTER TABLE payments
      ADD COLUMN settlement_user_op_hash text,
      ADD COLUMN settlement_user_operation text
  `.execute(db);
  await sql`
    CREATE TABLE dashboard_sessions (
      id_hash text PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces(id),
      csrf_token text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL
    )`.execute(db);
  await sql`CREATE INDEX dashboard_sessions_expiry ON dashboard_sessions (expires_at)`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error("the smart wallets migration is not reversible");
}
