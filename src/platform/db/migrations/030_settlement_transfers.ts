import { type Kysely, sql } from "kysely";

// A payment's settlement is a transfer of the engine (modules/transfers), of kind `settlement`:
// a row of the payouts table, its payment named, at most one per payment that has not failed
// (the unique index; one that failed with nothing sent gives its payment back to be settled
// again: modules/payments/settlement/kind.ts). The payment names the transfer that settles it
// (`settlement_transfer_id`), written in the transaction that records the transfer (payments'
// fence, settlement-repo.ts): from then on the payment's money is that transfer's. Settlements
// recorded before this migration (their legs' transactions under the payment, a smart wallet's
// operation on the payment) are finished as they were recorded.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE payouts DROP CONSTRAINT payouts_kind_check`.execute(db);
  await sql`
    ALTER TABLE payouts ADD CONSTRAINT payouts_kind_check
      CHECK (kind IN ('payout', 'refund', 'return', 'swap', 'settlement'))`.execute(db);
  await sql`ALTER TABLE payouts DROP CONSTRAINT payouts_kind_subject`.execute(db);
  await sql`
    ALTER TABLE payouts ADD CONSTRAINT payouts_kind_subject CHECK (
      (kind IN ('payout', 'swap') AND payment_id IS NULL AND unmatched_transfer_id IS NULL)
      OR (kind IN ('refund', 'settlement') AND payment_id IS NOT NULL AND unmatched_transfer_id IS NULL)
      OR (kind = 'return' AND payment_id IS NULL AND unmatched_transfer_id IS NOT NULL))`.execute(db);
  await sql`
    CREATE UNIQUE INDEX payouts_settlement_once ON payouts (payment_id)
      WHERE kind = 'settlement' AND status <> 'failed'`.execute(db);
  await sql`ALTER TABLE payments ADD COLUMN settlement_transfer_id uuid`.execute(db);
}
