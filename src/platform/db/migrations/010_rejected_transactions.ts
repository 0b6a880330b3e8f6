import { type Kysely, sql } from "kysely";

// A transaction the node refused outright (insufficient funds for gas, underpriced ...) never
// entered a mempool, so its nonce is still free. Until now it stayed `failed` and kept its nonce
// in the unique (environment, from_address, nonce) constraint, and the next transaction of that
// wallet took the nonce after it: a gap no transaction could fill, so the wallet's later
// transactions waited forever. Refused transactions get their own status and stop holding a nonce.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE chain_transactions DROP CONSTRAINT chain_transactions_status_check`.execute(db);
  await sql`
    ALTER TABLE chain_transactions ADD CONSTRAINT chain_transactions_status_check
      CHECK (status IN ('signed', 'mined', 'failed', 'rejected'))`.execute(db);
  await sql`
    ALTER TABLE chain_transactions
      DROP CONSTRAINT chain_transactions_environment_from_address_nonce_key`.execute(db);
  await sql`
    CREATE UNIQUE INDEX chain_transactions_nonce ON chain_transactions (environment, from_address, nonce)
      WHERE status <> 'rejected'`.execute(db);
  // Rows refused before this migration hold no nonce either.
  await sql`
    UPDATE chain_transactions SET status = 'rejected'
      WHERE status = 'failed' AND error LIKE 'rejected by the node:%'`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error("the rejected transactions migration is not reversible");
}
