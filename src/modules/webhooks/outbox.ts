import { type Kysely, sql } from "kysely";
import type { Environment } from "../../config.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";

// The transactional outbox: a service writes its events with the same transaction handle as the
// state change, so an event exists if and only if the change committed. In the same statement
// each event fans out to one delivery per active registration of its workspace and environment
// that subscribed to it; the dispatcher only ever reads deliveries.

export interface OutboxEvent {
  workspaceId: string;
  environment: Environment;
  type: string;
  /** The `data` of the delivered body. */
  payload: Record<string, unknown>;
}

export async function recordEvents(trx: Kysely<DatabaseSchema>, events: OutboxEvent[]): Promise<void> {
  if (events.length === 0) return;
  const rows = events.map(
    (e) => sql`(${e.workspaceId}::uuid, ${e.environment}, ${e.type}, ${JSON.stringify(e.payload)}::jsonb)`,
  );
  await sql`
    WITH inserted AS (
      INSERT INTO outbox_events (workspace_id, environment, event_type, payload)
      VALUES ${sql.join(rows)}
      RETURNING id, workspace_id, environment, event_type
    )
    INSERT INTO webhook_deliveries (endpoint_id, outbox_event_id, event_type)
    SELECT e.id, i.id, i.event_type
    FROM inserted i
    JOIN webhook_endpoints e
      ON e.workspace_id = i.workspace_id AND e.environment = i.environment
     AND e.active AND e.deleted_at IS NULL
     AND (jsonb_exists(e.events, i.event_type) OR jsonb_exists(e.events, '*'))
  `.execute(trx);
}
