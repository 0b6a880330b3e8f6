import { type Kysely, sql } from "kysely";

// Payout idempotencyKeys move to the platform's idempotency records (platform/db/idempotency.ts,
// scope "payouts"), where a payout now claims its key in the transaction or statement that
// records it. Keys recorded before keep answering as repeats: each is copied with the payout it
// names. Their request hash is unknown (empty): a payout's repeat is answered from the payout
// whatever its body, so nothing compares it. The payouts table keeps its column and its unique
// key, as the schema's backstop.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    INSERT INTO idempotency_keys (workspace_id, environment, scope, key, request_hash, resource_id, created_at)
    SELECT workspace_id, environment, 'payouts', idempotency_key, '', id, created_at
    FROM payouts WHERE idempotency_key IS NOT NULL
    ON CONFLICT (workspace_id, environment, scope, key) DO NOTHING`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DELETE FROM idempotency_keys WHERE scope = 'payouts'`.execute(db);
}
