import { type Kysely, sql } from "kysely";

// The checkout a payer trusts (issue 42, D25): a workspace's display name, brand colour and logo
// shown on its hosted pages, and a notice on `payment_status` (the payment's id) when a payment's
// status or refunded amount changes, which wakes the page's event streams on every instance.
// The logo is kept in the database (at most 256 KiB, checked by the service): every instance
// serves it without shared storage, and it goes with the workspace when that is deleted.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE workspaces
      ADD COLUMN display_name text CHECK (char_length(display_name) BETWEEN 1 AND 80),
      ADD COLUMN brand_color text CHECK (brand_color ~ '^#[0-9a-f]{6}$')`.execute(db);
  await sql`
    CREATE TABLE workspace_logos (
      workspace_id uuid PRIMARY KEY REFERENCES workspaces ON DELETE CASCADE,
      content_type text NOT NULL CHECK (content_type IN ('image/png', 'image/jpeg', 'image/webp')),
      bytes bytea NOT NULL,
      sha256 text NOT NULL,
      updated_at timestamptz NOT NULL
    )`.execute(db);
  await sql`
    CREATE FUNCTION payment_status_notice() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('payment_status', NEW.id::text);
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER payment_status AFTER UPDATE OF status, refunded_amount ON payments
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
      OR OLD.refunded_amount IS DISTINCT FROM NEW.refunded_amount)
    EXECUTE FUNCTION payment_status_notice()`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TRIGGER payment_status ON payments`.execute(db);
  await sql`DROP FUNCTION payment_status_notice()`.execute(db);
  await sql`DROP TABLE workspace_logos`.execute(db);
  await sql`ALTER TABLE workspaces DROP COLUMN display_name, DROP COLUMN brand_color`.execute(db);
}
