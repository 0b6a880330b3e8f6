import { type Kysely, sql } from "kysely";

// A payout that ends (processing → completed or failed) says so on the channel `payout_ended`,
// with its id, when its transaction commits: a repeat of its idempotency key waiting on another
// instance is woken by that notice instead of polling the row. Only a change of status fires it;
// lease renewals and claims touch other columns.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE FUNCTION payout_ended_notice() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('payout_ended', NEW.id::text);
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER payout_ended AFTER UPDATE OF status ON payouts
    FOR EACH ROW WHEN (OLD.status = 'processing' AND NEW.status <> 'processing')
    EXECUTE FUNCTION payout_ended_notice()`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TRIGGER payout_ended ON payouts`.execute(db);
  await sql`DROP FUNCTION payout_ended_notice()`.execute(db);
}
