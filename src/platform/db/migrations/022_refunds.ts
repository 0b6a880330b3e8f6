import { type Kysely, sql } from "kysely";

// Refunds and unmatched transfers (D19).
// - A crypto refund, and the return of an unmatched transfer, is money leaving a workspace wallet
//   like a payout: a row of the payouts table (the record of every transfer out of a workspace
//   wallet) of its own `kind`, so that the balance reservation, the breaker, the record before
//   broadcast and the reconciler cover it unchanged. It names the payment it refunds or the
//   unmatched transfer it returns. Its idempotency key is claimed in idempotency_keys (scope
//   "refunds"), never on the row, so the payouts' unique key on idempotency_key stays theirs.
// - A card refund is made at the provider: card_refunds, recorded before the provider is called
//   (the provider's idempotency key derives from its id), with the checkout session whose payment
//   intent it refunds (so that its recovery needs nothing of the payments table).
// - A payment keeps what is refunded or on its way back (refunded_amount; a failed refund gives
//   its amount back), never more than it received: the CHECK is the schema's backstop to the
//   refund's row lock on the payment.
// - An unmatched transfer is open, attached to a payment (which then settles amount_received), or
//   returned; at most one return that has not failed per transfer (a unique partial index).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE payments
      ADD COLUMN amount_received numeric(78, 0) CHECK (amount_received > 0),
      ADD COLUMN refunded_amount numeric(78, 0) NOT NULL DEFAULT 0`.execute(db);
  // An attached transfer's fee and net are computed on what it carried, not on the gross asked.
  await sql`ALTER TABLE payments DROP CONSTRAINT payments_check`.execute(db);
  await sql`
    ALTER TABLE payments ADD CONSTRAINT payments_fee_and_net_of_received
      CHECK (fee_amount + net_amount = coalesce(amount_received, gross_amount))`.execute(db);
  await sql`
    ALTER TABLE payments ADD CONSTRAINT payments_refunds_within_received
      CHECK (refunded_amount >= 0 AND refunded_amount <= coalesce(amount_received, gross_amount))`.execute(
    db,
  );

  await sql`
    ALTER TABLE unmatched_transfers
      ADD COLUMN status text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'attached', 'returned')),
      ADD COLUMN payment_id uuid REFERENCES payments (id),
      ADD COLUMN resolved_at timestamptz`.execute(db);
  // A payment is paid by at most one attached transfer.
  await sql`CREATE UNIQUE INDEX unmatched_transfers_attached ON unmatched_transfers (payment_id) WHERE payment_id IS NOT NULL`.execute(
    db,
  );

  await sql`
    ALTER TABLE payouts
      ADD COLUMN kind text NOT NULL DEFAULT 'payout' CHECK (kind IN ('payout', 'refund', 'return')),
      ADD COLUMN payment_id uuid REFERENCES payments (id),
      ADD COLUMN unmatched_transfer_id uuid REFERENCES unmatched_transfers (id),
      ADD COLUMN reason text`.execute(db);
  await sql`
    ALTER TABLE payouts ADD CONSTRAINT payouts_kind_subject CHECK (
      (kind = 'payout' AND payment_id IS NULL AND unmatched_transfer_id IS NULL)
      OR (kind = 'refund' AND payment_id IS NOT NULL AND unmatched_transfer_id IS NULL)
      OR (kind = 'return' AND payment_id IS NULL AND unmatched_transfer_id IS NOT NULL))`.execute(db);
  await sql`CREATE INDEX payouts_refunds_of_payment ON payouts (payment_id, created_at) WHERE payment_id IS NOT NULL`.execute(
    db,
  );
  await sql`
    CREATE UNIQUE INDEX payouts_one_return ON payouts (unmatched_transfer_id)
      WHERE unmatched_transfer_id IS NOT NULL AND status <> 'failed'`.execute(db);

  await sql`
    CREATE TABLE card_refunds (
      id uuid PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces (id),
      environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
      payment_id uuid NOT NULL REFERENCES payments (id),
      token_symbol text NOT NULL,
      amount numeric(78, 0) NOT NULL CHECK (amount > 0),
      reason text,
      status text NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
      checkout_session_id text,
      provider_refund_id text UNIQUE,
      error text,
      created_at timestamptz NOT NULL,
      completed_at timestamptz
    )`.execute(db);
  await sql`CREATE INDEX card_refunds_of_payment ON card_refunds (payment_id, created_at)`.execute(db);
  await sql`CREATE INDEX card_refunds_pending ON card_refunds (environment, created_at) WHERE status = 'pending'`.execute(
    db,
  );
}
