import { type Kysely, sql } from "kysely";

// Splits (D15). A workspace's configuration per environment is one row, replaced whole by PUT
// /api/v1/splits (its splits as a JSON array: nothing else ever queries one split on its own).
// A payment keeps the enabled splits in force at its creation (split_snapshot; null: splits were
// off), and its one settlement is recorded on it when it ends: settlement_id (unique), when, and
// what each leg carried (settlement: the merchant's part and each split's, with their outcomes). A settlement's transfers are chain_transactions keyed by (payment_id, purpose), unique
// since migration 016: one settlement per payment makes that the (settlementId, leg) key.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE split_configs (
      workspace_id uuid NOT NULL REFERENCES workspaces (id),
      environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
      enabled boolean NOT NULL,
      splits jsonb NOT NULL,
      updated_at timestamptz NOT NULL,
      PRIMARY KEY (workspace_id, environment)
    )`.execute(db);
  await sql`
    ALTER TABLE payments
      ADD COLUMN split_snapshot jsonb,
      ADD COLUMN settlement_id uuid,
      ADD COLUMN settled_at timestamptz,
      ADD COLUMN settlement jsonb`.execute(db);
  await sql`CREATE UNIQUE INDEX payments_settlement_id ON payments (settlement_id)`.execute(db);
  await sql`
    CREATE INDEX payments_settlements_list ON payments (workspace_id, environment, settled_at DESC, id DESC)
      WHERE settlement_id IS NOT NULL`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error("the splits migration is not reversible");
}
