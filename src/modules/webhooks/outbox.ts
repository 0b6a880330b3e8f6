import type { Kysely } from "kysely";
import type { Environment } from "../../config.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";

// The transactional outbox: a service writes its events with the same transaction handle as the
// state change, so an event exists if and only if the change committed. Delivery reads from here.

export interface OutboxEvent {
  workspaceId: string;
  environment: Environment;
  type: string;
  /** The `data` of the delivered body. */
  payload: Record<string, unknown>;
}

export async function recordEvents(trx: Kysely<DatabaseSchema>, events: OutboxEvent[]): Promise<void> {
  if (events.length === 0) return;
  await trx
    .insertInto("outbox_events")
    .values(
      events.map((event) => ({
        workspace_id: event.workspaceId,
        environment: event.environment,
        event_type: event.type,
        payload: JSON.stringify(event.payload),
      })),
    )
    .execute();
}
