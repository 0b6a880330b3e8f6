import { type Kysely, sql } from "kysely";

// Open inbox money held from payouts, refunds and swaps (issue 39, item 2): what a transfer's
// balance check reads is the open transfers that reached a wallet on a network.
export async function up(db: Kysely<unknown>): Promise<void> {
  // `kept`: the merchant took an open transfer as the wallet's own money (a top-up of its own).
  await sql`ALTER TABLE unmatched_transfers DROP CONSTRAINT unmatched_transfers_status_check`.execute(db);
  await sql`
    ALTER TABLE unmatched_transfers ADD CONSTRAINT unmatched_transfers_status_check
      CHECK (status IN ('open', 'attached', 'returned', 'onramp', 'dropped', 'kept'))`.execute(db);
  await sql`
    CREATE INDEX unmatched_transfers_open_by_wallet ON unmatched_transfers (environment, network, lower(to_address))
      WHERE status = 'open'`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error("the inbox held-money migration is not reversible");
}
