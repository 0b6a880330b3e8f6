import { type Kysely, type Selectable, sql } from "kysely";
import type { Environment } from "../../config.ts";
import type {
  DatabaseSchema,
  WebhookDeliveriesTable,
  WebhookEndpointsTable,
} from "../../platform/db/schema.ts";

export type EndpointRow = Selectable<WebhookEndpointsTable>;
export type DeliveryRow = Selectable<WebhookDeliveriesTable>;
type Scope = { workspaceId: string; environment: Environment };

export async function insertEndpoint(
  db: Kysely<DatabaseSchema>,
  scope: Scope,
  values: { url: string; events: string[]; encryptedSecret: string },
): Promise<EndpointRow> {
  return db
    .insertInto("webhook_endpoints")
    .values({
      workspace_id: scope.workspaceId,
      environment: scope.environment,
      url: values.url,
      events: JSON.stringify(values.events),
      encrypted_secret: values.encryptedSecret,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function listEndpoints(db: Kysely<DatabaseSchema>, scope: Scope): Promise<EndpointRow[]> {
  return db
    .selectFrom("webhook_endpoints")
    .selectAll()
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .where("deleted_at", "is", null)
    .orderBy("id", "asc")
    .execute();
}

export async function findEndpoint(
  db: Kysely<DatabaseSchema>,
  scope: Scope,
  id: number,
): Promise<EndpointRow | undefined> {
  return db
    .selectFrom("webhook_endpoints")
    .selectAll()
    .where("id", "=", id)
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .where("deleted_at", "is", null)
    .executeTakeFirst();
}

/** Soft delete (the delivery log keeps its registration) and stop what is still queued for it. */
export async function deleteEndpoint(
  db: Kysely<DatabaseSchema>,
  scope: Scope,
  id: number,
  at: Date,
): Promise<boolean> {
  const deleted = await db
    .updateTable("webhook_endpoints")
    .set({ deleted_at: at, active: false })
    .where("id", "=", id)
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .where("deleted_at", "is", null)
    .executeTakeFirst();
  if (deleted.numUpdatedRows === 0n) return false;
  await db
    .updateTable("webhook_deliveries")
    .set({ status: "failed", last_error: "registration deleted", locked_until: null })
    .where("endpoint_id", "=", id)
    .where("status", "=", "pending")
    .execute();
  return true;
}

export async function listDeliveries(
  db: Kysely<DatabaseSchema>,
  endpointId: number,
  page: { limit: number; offset: number },
): Promise<{ rows: DeliveryRow[]; total: number }> {
  const base = db.selectFrom("webhook_deliveries").where("endpoint_id", "=", endpointId);
  const [rows, count] = await Promise.all([
    base
      .selectAll()
      .orderBy("created_at", "desc")
      .orderBy("id", "desc")
      .limit(page.limit)
      .offset(page.offset)
      .execute(),
    base.select((eb) => eb.fn.countAll().as("total")).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.total) };
}

/** Makes a delivery due now again, whatever its status; its id (X-Service-Delivery) stays. */
export async function requeueDelivery(
  db: Kysely<DatabaseSchema>,
  endpointId: number,
  deliveryId: string,
  at: Date,
): Promise<DeliveryRow | undefined> {
  return db
    .updateTable("webhook_deliveries")
    .set({ status: "pending", next_attempt_at: at, locked_until: null })
    .where("id", "=", deliveryId)
    .where("endpoint_id", "=", endpointId)
    .returningAll()
    .executeTakeFirst();
}

export interface ClaimedDelivery {
  id: string;
  eventType: string;
  attempts: number;
  createdAt: Date;
  lease: Date;
  endpointId: number;
  url: string;
  environment: Environment;
  encryptedSecret: string;
  payload: Record<string, unknown>;
}

/**
 * Claims due deliveries for one dispatcher: rows locked by another dispatcher's transaction are
 * skipped (SKIP LOCKED), and the lease marks them taken until it runs out. A dispatcher that dies
 * after claiming leaves the lease to expire, and the delivery is due again (at least once).
 */
export async function claimDueDeliveries(
  db: Kysely<DatabaseSchema>,
  now: Date,
  lease: Date,
  limit: number,
): Promise<ClaimedDelivery[]> {
  const result = await sql<{
    id: string;
    event_type: string;
    attempts: number;
    created_at: Date;
    locked_until: Date;
    endpoint_id: number;
    url: string;
    environment: string;
    encrypted_secret: string;
    payload: Record<string, unknown>;
  }>`
    WITH due AS (
      SELECT d.id FROM webhook_deliveries d
      JOIN webhook_endpoints e ON e.id = d.endpoint_id AND e.active AND e.deleted_at IS NULL
      WHERE d.status = 'pending' AND d.next_attempt_at <= ${now}
        AND (d.locked_until IS NULL OR d.locked_until <= ${now})
      ORDER BY d.next_attempt_at
      LIMIT ${limit}
      FOR UPDATE OF d SKIP LOCKED
    )
    UPDATE webhook_deliveries d
    SET locked_until = ${lease}
    FROM due, webhook_endpoints e, outbox_events o
    WHERE d.id = due.id AND e.id = d.endpoint_id AND o.id = d.outbox_event_id
    RETURNING d.id, d.event_type, d.attempts, d.created_at, d.locked_until, d.endpoint_id,
              e.url, e.environment, e.encrypted_secret, o.payload
  `.execute(db);
  return result.rows.map((r) => ({
    id: r.id,
    eventType: r.event_type,
    attempts: r.attempts,
    createdAt: r.created_at,
    lease: r.locked_until,
    endpointId: r.endpoint_id,
    url: r.url,
    environment: r.environment as Environment,
    encryptedSecret: r.encrypted_secret,
    payload: r.payload,
  }));
}

export interface AttemptOutcome {
  delivered: boolean;
  responseCode: number | null;
  error: string | null;
  /** When to try again; null with `delivered: false` means no attempt is left. */
  nextAttemptAt: Date | null;
}

/**
 * Records one attempt, only if this dispatcher still holds the lease it claimed with (a fencing
 * token): a dispatcher that was too slow cannot overwrite the outcome of the one that took over.
 */
export async function recordAttempt(
  db: Kysely<DatabaseSchema>,
  delivery: ClaimedDelivery,
  outcome: AttemptOutcome,
  at: Date,
  disableAfterMs: number,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const updated = await trx
      .updateTable("webhook_deliveries")
      .set((eb) => ({
        attempts: eb("attempts", "+", 1),
        status: outcome.delivered ? "delivered" : outcome.nextAttemptAt ? "pending" : "failed",
        next_attempt_at: outcome.nextAttemptAt ?? at,
        locked_until: null,
        last_response_code: outcome.responseCode,
        last_error: outcome.error,
        delivered_at: outcome.delivered ? at : null,
      }))
      .where("id", "=", delivery.id)
      .where("locked_until", "=", delivery.lease)
      .where("status", "=", "pending")
      .executeTakeFirst();
    if (updated.numUpdatedRows === 0n) return false;

    if (outcome.delivered) {
      await trx
        .updateTable("webhook_endpoints")
        .set({ failing_since: null })
        .where("id", "=", delivery.endpointId)
        .where("failing_since", "is not", null)
        .execute();
    } else {
      // Deactivate a registration that has failed without a single success for too long, and
      // stop what is queued for it.
      const endpoint = await trx
        .updateTable("webhook_endpoints")
        .set((eb) => ({
          failing_since: eb.fn.coalesce("failing_since", eb.val(at)),
          active: sql<boolean>`CASE WHEN failing_since IS NOT NULL AND failing_since <= ${new Date(at.getTime() - disableAfterMs)} THEN false ELSE active END`,
          disabled_reason: sql<
            string | null
          >`CASE WHEN failing_since IS NOT NULL AND failing_since <= ${new Date(at.getTime() - disableAfterMs)} THEN 'failing continuously for 5 days' ELSE disabled_reason END`,
        }))
        .where("id", "=", delivery.endpointId)
        .returning("active")
        .executeTakeFirst();
      if (endpoint && !endpoint.active) {
        await trx
          .updateTable("webhook_deliveries")
          .set({ status: "failed", last_error: "registration deactivated", locked_until: null })
          .where("endpoint_id", "=", delivery.endpointId)
          .where("status", "=", "pending")
          .execute();
      }
    }
    return true;
  });
}
