import { type Kysely, sql } from "kysely";

// The default wallet type per environment (D21): a sandbox key reads and sets the sandbox's, a
// live key the live one's, so nothing done in the sandbox changes which wallet live payments and
// payouts use. Both start as the one workspace-wide value they replace.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE workspaces RENAME COLUMN default_wallet_type TO live_default_wallet_type`.execute(db);
  await sql`
    ALTER TABLE workspaces ADD COLUMN sandbox_default_wallet_type text NOT NULL DEFAULT 'workspace'
      CHECK (sandbox_default_wallet_type IN ('workspace', 'smart_wallet'))`.execute(db);
  await sql`UPDATE workspaces SET sandbox_default_wallet_type = live_default_wallet_type`.execute(db);
}
