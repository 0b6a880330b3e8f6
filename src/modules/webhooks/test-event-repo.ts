import { type Kysely, sql } from "kysely";
import { columnList } from "../../platform/db/columns.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import { DELIVERY_FIELDS, type DeliveryFields } from "./repo.ts";

// The dashboard's "Send test event": one outbox event of kind `webhook.test` and one delivery to
// the chosen registration only (not fanned out, whatever the registration subscribed to), both
// written by ONE statement. The dispatcher then signs and sends it like any other delivery.

/** The kind of a test event; not in the catalogue, so no registration can subscribe to it. */
export const TEST_EVENT = "webhook.test";

/** The test event's delivery, as the delivery log shows it. */
export type TestDeliveryRow = DeliveryFields;

/**
 * Writes the test event and its delivery when the registration is the tenant's, not deleted and
 * active. `missing`: no such registration for the tenant; `inactive`: it exists but is disabled
 * (nothing is written: the dispatcher never sends to a disabled registration). The registration's
 * row is share-locked, so a concurrent delete either waits for this statement or wins (missing).
 */
export async function insertTestEvent(
  db: Kysely<DatabaseSchema>,
  tenant: Tenant,
  endpointId: number,
  payload: Record<string, unknown>,
): Promise<
  { outcome: "missing" } | { outcome: "inactive" } | { outcome: "queued"; delivery: TestDeliveryRow }
> {
  const result = await sql<{ active: boolean } & Nullable<TestDeliveryRow>>`
    WITH endpoint AS (
      SELECT id, workspace_id, environment, active FROM webhook_endpoints
      WHERE id = ${endpointId} AND workspace_id = ${tenant.workspaceId}
        AND environment = ${tenant.environment} AND deleted_at IS NULL
      FOR SHARE
    ),
    test_event AS (
      INSERT INTO outbox_events (workspace_id, environment, event_type, payload)
      SELECT workspace_id, environment, ${TEST_EVENT}, ${JSON.stringify(payload)}::jsonb
      FROM endpoint WHERE active
      RETURNING id
    ),
    test_delivery AS (
      INSERT INTO webhook_deliveries (endpoint_id, outbox_event_id, event_type)
      SELECT endpoint.id, test_event.id, ${TEST_EVENT} FROM endpoint, test_event
      RETURNING ${columnList(DELIVERY_FIELDS)}
    )
    SELECT endpoint.active, ${columnList(DELIVERY_FIELDS, "d")}
    FROM endpoint LEFT JOIN test_delivery d ON true
  `.execute(db);
  const row = result.rows[0];
  if (!row) return { outcome: "missing" };
  const { active, ...delivery } = row;
  if (!active || !isComplete(delivery)) return { outcome: "inactive" };
  return { outcome: "queued", delivery };
}

type Nullable<T> = { [K in keyof T]: T[K] | null };

/** The LEFT JOIN's delivery columns are all null when nothing was written. */
function isComplete(row: Nullable<TestDeliveryRow>): row is TestDeliveryRow {
  return (
    row.id !== null &&
    row.event_type !== null &&
    row.status !== null &&
    row.attempts !== null &&
    row.next_attempt_at !== null &&
    row.created_at !== null
  );
}
