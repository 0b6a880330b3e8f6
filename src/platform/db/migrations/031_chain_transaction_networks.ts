import { type Kysely, sql } from "kysely";

// A transaction is signed for one network (D22). The workspace EOA has the same address on every
// EVM chain, and its nonces count per chain: a nonce is unique per (environment, network,
// from_address), not per (environment, from_address) as in 016, or the second network's first
// transaction would collide with the first network's. Every transaction recorded before this was
// signed for the one network an environment's <ENV>_… variables configured: the network `default`.
// The column keeps that default (adding it rewrites no table on PostgreSQL 11+): an instance of the
// version before, still running during an upgrade, records its transactions there, which is the
// one network it knows. This version's writers all name the network (chain/sent-transactions.ts
// takes it with every call).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE chain_transactions ADD COLUMN network text NOT NULL DEFAULT 'default'`.execute(db);
  await sql`DROP INDEX chain_transactions_nonce`.execute(db);
  await sql`
    CREATE UNIQUE INDEX chain_transactions_nonce ON chain_transactions (environment, network, from_address, nonce)
      WHERE status <> 'rejected' AND replaces_tx_hash IS NULL`.execute(db);
  await sql`DROP INDEX chain_transactions_wallet`.execute(db);
  await sql`
    CREATE INDEX chain_transactions_wallet ON chain_transactions (environment, network, from_address, nonce)`.execute(
    db,
  );
  await sql`DROP INDEX chain_transactions_open`.execute(db);
  await sql`
    CREATE INDEX chain_transactions_open ON chain_transactions (environment, network, from_address)
      WHERE status = 'signed'`.execute(db);
}
