import { type Kysely, type RawBuilder, sql } from "kysely";
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

/**
 * The outbox rows and their deliveries as two CTEs (`outbox_rows`, `outbox_deliveries`) of a
 * larger statement, so a caller can write its own change and its events in ONE statement.
 */
export function outboxCtes(events: OutboxEvent[]): RawBuilder<unknown> {
  // One parameter per column, the same statement text for any number of events (see
  // insertPaymentsQuery): arrays, and the payloads as ONE JSON array, which the driver sends as
  // it is (inside a jsonb[] each payload's quotes would be escaped once more). Ids are given in
  // the order of the list.
  const column = <T>(pick: (e: OutboxEvent) => T) => events.map(pick);
  return outboxCtesFrom(sql`
    SELECT workspace_id, environment, event_type, payload
    FROM ROWS FROM (
      unnest(${column((e) => e.workspaceId)}::uuid[]),
      unnest(${column((e) => e.environment)}::text[]),
      unnest(${column((e) => e.type)}::text[]),
      jsonb_array_elements(${JSON.stringify(column((e) => e.payload))}::jsonb)
    ) WITH ORDINALITY AS e(workspace_id, environment, event_type, payload, position)
    ORDER BY position`);
}

/**
 * Like `outboxCtes`, for events that a query of the caller's statement produces: `source` yields
 * (workspace_id, environment, event_type, payload) rows, for instance from the RETURNING of the
 * change they record, so that no event is written when the change touched nothing.
 */
export function outboxCtesFrom(source: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`
    outbox_rows AS (
      INSERT INTO outbox_events (workspace_id, environment, event_type, payload)
      ${source}
      RETURNING id, workspace_id, environment, event_type
    ),
    outbox_deliveries AS (
      INSERT INTO webhook_deliveries (endpoint_id, outbox_event_id, event_type)
      SELECT e.id, i.id, i.event_type
      FROM outbox_rows i
      JOIN webhook_endpoints e
        ON e.workspace_id = i.workspace_id AND e.environment = i.environment
       AND e.active AND e.deleted_at IS NULL
       AND (jsonb_exists(e.events, i.event_type) OR jsonb_exists(e.events, '*'))
    )`;
}

export async function recordEvents(trx: Kysely<DatabaseSchema>, events: OutboxEvent[]): Promise<void> {
  if (events.length === 0) return;
  await sql`WITH ${outboxCtes(events)} SELECT 1`.execute(trx);
}
