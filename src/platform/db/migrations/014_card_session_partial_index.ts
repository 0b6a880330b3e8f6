import { type Kysely, sql } from "kysely";

// Only card payments have a checkout session; crypto payments, nearly all of the table, keep
// NULL there. A plain UNIQUE constraint indexes those NULLs too: one more index entry written
// on every crypto payment created, for a lookup that only ever asks for a session id. The
// partial index keeps the uniqueness of session ids and serves that lookup (`= $1` implies NOT
// NULL). It is built before the constraint goes, so session ids are never without a unique index.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE UNIQUE INDEX payments_card_checkout_session ON payments (card_checkout_session_id)
    WHERE card_checkout_session_id IS NOT NULL`.execute(db);
  await sql`ALTER TABLE payments DROP CONSTRAINT payments_card_checkout_session_id_key`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE payments ADD CONSTRAINT payments_card_checkout_session_id_key UNIQUE (card_checkout_session_id)`.execute(
    db,
  );
  await sql`DROP INDEX payments_card_checkout_session`.execute(db);
}
