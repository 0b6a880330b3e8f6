import { type Kysely, sql } from "kysely";

// Dashboard logins (D18): every attempt is written here before its password is checked, once for
// its e-mail and once for its client address (both hashed: no address book in the database), and
// the ones that succeed are taken away again. Counting rows of the last 15 minutes limits
// guessing across every instance; writing before checking means a burst of parallel guesses
// sees itself and is refused, rather than each one reading an old count.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE dashboard_login_attempts (
      id bigserial PRIMARY KEY,
      subject_hash text NOT NULL,
      attempted_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`CREATE INDEX dashboard_login_attempts_subject ON dashboard_login_attempts (subject_hash, attempted_at)`.execute(
    db,
  );
  await sql`CREATE INDEX dashboard_login_attempts_age ON dashboard_login_attempts (attempted_at)`.execute(db);
  // A payment's detail page lists its events (its status history) and their deliveries: events
  // carry the id of what they are about in their payload.
  await sql`CREATE INDEX outbox_events_subject ON outbox_events ((payload->>'id'))`.execute(db);
  // The payouts list and export of every status, newest first in keyset pages.
  await sql`CREATE INDEX payouts_list ON payouts (workspace_id, environment, created_at DESC, id DESC)`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX payouts_list`.execute(db);
  await sql`DROP INDEX outbox_events_subject`.execute(db);
  await sql`DROP TABLE dashboard_login_attempts`.execute(db);
}
