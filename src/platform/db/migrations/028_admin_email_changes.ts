import { type Kysely, sql } from "kysely";

// Admin e-mail changes wait for the new address to confirm them (D21): the link mailed there
// carries a random token, stored here only as its SHA-256. One pending change per workspace (a
// new request replaces the older one); confirming deletes the row, so a link works once.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE workspace_email_changes (
      token_hash text PRIMARY KEY,
      workspace_id uuid NOT NULL UNIQUE REFERENCES workspaces(id) ON DELETE CASCADE,
      new_email text NOT NULL,
      created_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL
    )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE workspace_email_changes`.execute(db);
}
