import { type Kysely, sql } from "kysely";

// When a failing registration is probed next (issue 43): while it fails, its oldest waiting
// delivery is tried every WEBHOOK_PROBE_SECONDS, so that a receiver that comes back is found
// within seconds even when no new event is sent to it. Null while it is healthy (or inactive), so
// the partial index holds the failing registrations only. Registrations failing when this runs
// are probed at once. And a delivery's retry time while a recovery has made it due sooner
// (`scheduled_at`, null otherwise: adding it rewrites nothing).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE webhook_deliveries ADD COLUMN scheduled_at timestamptz`.execute(db);
  await sql`ALTER TABLE webhook_endpoints ADD COLUMN next_probe_at timestamptz`.execute(db);
  await sql`
    UPDATE webhook_endpoints SET next_probe_at = now()
    WHERE failing_since IS NOT NULL AND active AND deleted_at IS NULL
  `.execute(db);
  await sql`
    CREATE INDEX webhook_endpoints_probe ON webhook_endpoints (next_probe_at)
    WHERE next_probe_at IS NOT NULL
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX webhook_endpoints_probe`.execute(db);
  await sql`ALTER TABLE webhook_endpoints DROP COLUMN next_probe_at`.execute(db);
  await sql`ALTER TABLE webhook_deliveries DROP COLUMN scheduled_at`.execute(db);
}
