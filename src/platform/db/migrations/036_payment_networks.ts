import { type Kysely, sql } from "kysely";

// A crypto payment payable on several networks (D22 `networks: [...]`): the list it may be paid
// on, as a JSON array of network ids; null for a payment of one network (its `network`) and for a
// card payment. Such a payment's `network` is null until a transfer is detected on one of them,
// which sets it; from then on it is a payment of that network like any other. The chain
// watcher's match looks for pending payments of its network, or of none that list it: the
// partial index keeps that second lookup small (only pending multi-network payments are in it).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE payments ADD COLUMN networks jsonb`.execute(db);
  await sql`
    ALTER TABLE payments ADD CONSTRAINT payments_networks_list
      CHECK (networks IS NULL OR (jsonb_typeof(networks) = 'array' AND jsonb_array_length(networks) > 1))
  `.execute(db);
  await sql`
    CREATE INDEX payments_pending_multi_network
      ON payments (environment, lower(receiving_address), token_symbol, gross_amount, created_at)
      WHERE network IS NULL AND networks IS NOT NULL
  `.execute(db);
}

export async function down(): Promise<void> {
  throw new Error("the payment networks migration is not reversible");
}
