import { type Kysely, sql } from "kysely";

// Outbound webhooks: registrations (per workspace and environment) and one delivery row per
// (event, registration), written in the same transaction as the event itself.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE webhook_endpoints (
      id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces(id),
      environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
      url text NOT NULL,
      events jsonb NOT NULL,
      encrypted_secret text NOT NULL,
      active boolean NOT NULL DEFAULT true,
      failing_since timestamptz,
      disabled_reason text,
      created_at timestamptz NOT NULL DEFAULT now(),
      deleted_at timestamptz
    )`.execute(db);
  await sql`
    CREATE INDEX webhook_endpoints_fanout ON webhook_endpoints (workspace_id, environment)
    WHERE active AND deleted_at IS NULL
  `.execute(db);

  await sql`
    CREATE TABLE webhook_deliveries (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      endpoint_id integer NOT NULL REFERENCES webhook_endpoints(id),
      outbox_event_id bigint NOT NULL REFERENCES outbox_events(id),
      event_type text NOT NULL,
      status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
      attempts integer NOT NULL DEFAULT 0,
      next_attempt_at timestamptz NOT NULL DEFAULT now(),
      locked_until timestamptz,
      last_response_code integer,
      last_error text,
      created_at timestamptz NOT NULL DEFAULT now(),
      delivered_at timestamptz,
      UNIQUE (outbox_event_id, endpoint_id)
    )`.execute(db);
  // The dispatcher's claim: pending deliveries by due time.
  await sql`CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending'`.execute(
    db,
  );
  await sql`CREATE INDEX webhook_deliveries_log ON webhook_deliveries (endpoint_id, created_at DESC)`.execute(
    db,
  );
}

export async function down(): Promise<void> {
  throw new Error("the webhooks migration is not reversible");
}
