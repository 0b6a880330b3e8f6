import { type Kysely, sql } from "kysely";

// An unmatched transfer that a reorganisation dropped (issue 39): a status of its own, `dropped`,
// until its transaction is mined again (open again) — until then there is nothing to attach or
// return. The chain watcher checks each open or dropped transfer against the chain until the
// network's confirmations are met, as it checks a detected payment: `confirmed_at` says it is past
// that. The simulated ledger's transfers are final at once (block 0); the chain's recorded before
// this migration are checked once by the next tick. The partial index is what the watcher reads.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE unmatched_transfers DROP CONSTRAINT unmatched_transfers_status_check`.execute(db);
  await sql`
    ALTER TABLE unmatched_transfers ADD CONSTRAINT unmatched_transfers_status_check
      CHECK (status IN ('open', 'attached', 'returned', 'onramp', 'dropped'))`.execute(db);
  await sql`ALTER TABLE unmatched_transfers ADD COLUMN confirmed_at timestamptz`.execute(db);
  await sql`UPDATE unmatched_transfers SET confirmed_at = created_at WHERE block_number = 0`.execute(db);
  await sql`
    CREATE INDEX unmatched_transfers_unconfirmed ON unmatched_transfers (environment, network, id)
      WHERE confirmed_at IS NULL AND status IN ('open', 'dropped')`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error("the inbox checks migration is not reversible");
}
