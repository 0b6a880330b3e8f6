import { type Kysely, sql } from "kysely";

// The receipt (D25) shows when a payment was paid: a transfer's detection, else its confirmation.
// Payments paid without a transfer had neither: a sandbox payment completed as it was created,
// and a card payment its paid checkout completed. From now on both record `confirmed_at` then
// (payments/create.ts, card/service.ts); this gives the rows written before the same time: the
// creation of a sandbox one, and the arrival of the provider's event that paid a card one.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    UPDATE payments SET confirmed_at = created_at
    WHERE environment = 'sandbox' AND status = 'forwarded'
      AND detected_at IS NULL AND confirmed_at IS NULL`.execute(db);
  await sql`
    UPDATE payments p SET confirmed_at = paid.at
    FROM (
      SELECT payment_id, min(received_at) AS at FROM card_events
      WHERE outcome = 'applied'
        AND event_type IN ('checkout.session.completed', 'checkout.session.async_payment_succeeded')
      GROUP BY payment_id
    ) paid
    WHERE p.id = paid.payment_id AND p.payment_method = 'card' AND p.status = 'forwarded'
      AND p.confirmed_at IS NULL`.execute(db);
}

export async function down(): Promise<void> {
  // Nothing to undo: the times are facts, and a row paid without a transfer had none before.
}
