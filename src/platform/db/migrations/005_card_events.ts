import { type Kysely, sql } from "kysely";

// Inbound card-provider events, de-duplicated by the provider's event id: the unique key makes
// concurrent deliveries of one event apply it once.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE card_events (
      event_id text PRIMARY KEY,
      environment text NOT NULL,
      event_type text NOT NULL,
      payment_id uuid REFERENCES payments(id),
      outcome text NOT NULL,
      received_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error("the card events migration is not reversible");
}
