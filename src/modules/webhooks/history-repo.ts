import { type Kysely, sql } from "kysely";
import type { DatabaseSchema } from "../../platform/db/schema.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import type { DeliveryFields } from "./repo.ts";

// What the outbox says about one subject (a payment): its events, oldest first, each with the
// deliveries it fanned out to. Read through the expression index on the payload's id.

export interface SubjectEventRow {
  id: string;
  event_type: string;
  status: string | null;
  created_at: Date;
}

/** A delivery of one of the subject's events, with the registration it goes to. */
export type SubjectDeliveryRow = Omit<DeliveryFields, "event_type"> & {
  outbox_event_id: string;
  endpoint_id: number;
  url: string;
};

export async function eventsOfSubject(
  db: Kysely<DatabaseSchema>,
  tenant: Tenant,
  subjectId: string,
): Promise<SubjectEventRow[]> {
  return db
    .selectFrom("outbox_events")
    .select((eb) => [
      eb.cast<string>("id", "text").as("id"),
      "event_type",
      sql<string | null>`payload->>'status'`.as("status"),
      "created_at",
    ])
    .where(sql<string>`payload->>'id'`, "=", subjectId)
    .where("workspace_id", "=", tenant.workspaceId)
    .where("environment", "=", tenant.environment)
    .orderBy("id")
    .limit(200)
    .execute();
}

export async function deliveriesOfEvents(
  db: Kysely<DatabaseSchema>,
  eventIds: string[],
): Promise<SubjectDeliveryRow[]> {
  if (eventIds.length === 0) return [];
  return db
    .selectFrom("webhook_deliveries as d")
    .innerJoin("webhook_endpoints as e", "e.id", "d.endpoint_id")
    .select([
      "d.id",
      (eb) => eb.cast<string>("d.outbox_event_id", "text").as("outbox_event_id"),
      "d.endpoint_id",
      "e.url",
      "d.status",
      "d.attempts",
      "d.last_response_code",
      "d.last_error",
      "d.next_attempt_at",
      "d.created_at",
      "d.delivered_at",
    ])
    .where("d.outbox_event_id", "in", eventIds)
    .orderBy("d.created_at")
    .execute();
}
