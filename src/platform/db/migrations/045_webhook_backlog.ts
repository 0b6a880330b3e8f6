import { type Kysely, sql } from "kysely";

// A registration's backlog (issue 43): the deliveries waiting on a retry after a failure, in the
// order they were created, so that when the registration answers 2xx again they can be made due
// in that order (webhooks/recovery-repo.ts) without reading its delivered history. Only pending
// rows that have been tried are in it: a delivery delivered at its first attempt never is, so the
// index costs nothing on the healthy path.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE INDEX webhook_deliveries_backlog ON webhook_deliveries (endpoint_id, created_at, outbox_event_id)
    WHERE status = 'pending' AND attempts > 0
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX webhook_deliveries_backlog`.execute(db);
}
