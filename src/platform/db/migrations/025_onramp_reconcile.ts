import { type Kysely, sql } from "kysely";

// On-ramp sessions whose provider events were lost (D17; onramp/reconcile.ts): a periodic job asks
// the provider about sessions not ended and quiet for a while. `reconciled_at` is when it last
// asked, so that it takes the least recently asked first and does not ask the same ones every
// tick. What it looks at: card sessions not ended, or fulfilled without their transaction named,
// made within the last week (the range on `created_at`); the statuses are spelled out here
// because a partial index needs them (domain/onramp-state.ts is their table).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE onramp_sessions ADD COLUMN reconciled_at timestamptz`.execute(db);
  await sql`
    CREATE INDEX onramp_sessions_to_reconcile ON onramp_sessions (environment, created_at)
      WHERE provider = 'card' AND (status IN ('initialized', 'requires_payment', 'fulfillment_processing')
        OR (status = 'fulfillment_complete' AND transaction_id IS NULL))`.execute(db);
}
