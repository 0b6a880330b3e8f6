import { type Kysely, sql } from "kysely";

// Rotating a webhook's signing secret (issue 41, D24): for 24 h after a rotation the secret it
// replaced still signs (a second Standard Webhooks signature), encrypted at rest like the current
// one. Both columns are null when no rotation is in its overlap; a later rotation overwrites them.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE webhook_endpoints
      ADD COLUMN previous_encrypted_secret text,
      ADD COLUMN previous_secret_expires_at timestamptz`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error("the webhook secret rotation migration is not reversible");
}
