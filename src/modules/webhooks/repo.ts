import { type Kysely, type Selectable, sql } from "kysely";
import type { Environment } from "../../config.ts";
import { nextProbeAt } from "../../domain/retry-schedule.ts";
import { type Columns, columnsOf } from "../../platform/db/columns.ts";
import { newestFirst } from "../../platform/db/page.ts";
import type {
  DatabaseSchema,
  WebhookDeliveriesTable,
  WebhookEndpointsTable,
} from "../../platform/db/schema.ts";
import { idInScope } from "../../platform/db/scope.ts";
import { applyAttempts } from "./health.ts";
import { makeBacklogDue, type Recovery } from "./recovery-repo.ts";

export type EndpointRow = Selectable<WebhookEndpointsTable>;
export type DeliveryRow = Selectable<WebhookDeliveriesTable>;

/** A registration's and a delivery's whole rows, named column by column (platform/db/columns.ts). */
export const ENDPOINT_COLUMNS = columnsOf<WebhookEndpointsTable>({
  id: true,
  workspace_id: true,
  environment: true,
  url: true,
  events: true,
  encrypted_secret: true,
  active: true,
  failing_since: true,
  disabled_reason: true,
  created_at: true,
  deleted_at: true,
  previous_encrypted_secret: true,
  previous_secret_expires_at: true,
  next_probe_at: true,
});

export const DELIVERY_COLUMNS = columnsOf<WebhookDeliveriesTable>({
  id: true,
  endpoint_id: true,
  outbox_event_id: true,
  event_type: true,
  status: true,
  attempts: true,
  next_attempt_at: true,
  locked_until: true,
  last_response_code: true,
  last_error: true,
  created_at: true,
  delivered_at: true,
  scheduled_at: true,
});

/** What a delivery shows of itself (the delivery log, a payment's history, a test event). */
export const DELIVERY_FIELDS = [
  "id",
  "event_type",
  "status",
  "attempts",
  "last_response_code",
  "last_error",
  "next_attempt_at",
  "created_at",
  "delivered_at",
] as const satisfies Columns<WebhookDeliveriesTable>;
export type DeliveryFields = Pick<DeliveryRow, (typeof DELIVERY_FIELDS)[number]>;
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
    .returning(ENDPOINT_COLUMNS)
    .executeTakeFirstOrThrow();
}

export async function listEndpoints(db: Kysely<DatabaseSchema>, scope: Scope): Promise<EndpointRow[]> {
  return db
    .selectFrom("webhook_endpoints")
    .select(ENDPOINT_COLUMNS)
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
    .select(ENDPOINT_COLUMNS)
    .where(idInScope(scope, id))
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
    .where(idInScope(scope, id))
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

/**
 * Replaces a registration's secret; the one it replaces keeps signing until `previousUntil`. A
 * rotation within an earlier one's overlap drops the secret that one had kept. False when the id
 * is not the tenant's (or was deleted).
 */
export async function rotateSecret(
  db: Kysely<DatabaseSchema>,
  scope: Scope,
  id: number,
  encryptedSecret: string,
  previousUntil: Date,
): Promise<boolean> {
  const rotated = await db
    .updateTable("webhook_endpoints")
    .set((eb) => ({
      previous_encrypted_secret: eb.ref("encrypted_secret"),
      previous_secret_expires_at: previousUntil,
      encrypted_secret: encryptedSecret,
    }))
    .where(idInScope(scope, id))
    .where("deleted_at", "is", null)
    .executeTakeFirst();
  return rotated.numUpdatedRows > 0n;
}

export async function listDeliveries(
  db: Kysely<DatabaseSchema>,
  endpointId: number,
  page: { limit: number; offset: number },
): Promise<{ rows: DeliveryRow[]; total: number }> {
  const base = db.selectFrom("webhook_deliveries").where("endpoint_id", "=", endpointId);
  return newestFirst(
    base.select(DELIVERY_COLUMNS),
    base.select((eb) => eb.fn.countAll().as("total")),
    page,
  );
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
    .set({ status: "pending", next_attempt_at: at, locked_until: null, scheduled_at: null })
    .where("id", "=", deliveryId)
    .where("endpoint_id", "=", endpointId)
    .returning(DELIVERY_COLUMNS)
    .executeTakeFirst();
}

/** One ended attempt, to be recorded under the lease it was made with. */
export interface AttemptRecord {
  deliveryId: string;
  endpointId: number;
  /** The lease of the claim the attempt was made under: the fencing token. */
  lease: Date;
  /** When the attempt ended. */
  at: Date;
  delivered: boolean;
  responseCode: number | null;
  error: string | null;
  /** When to try again; null with `delivered: false` means no attempt is left. */
  nextAttemptAt: Date | null;
  /**
   * The attempt was made ahead of the delivery's schedule (a probe of a failing registration, or a
   * recovery's backlog: delivery-claims-repo.ts): if it failed, the delivery keeps its attempts
   * and goes back to its retry time, as if it had not been tried.
   */
  aheadOfSchedule?: boolean;
}

/** How recorded attempts change registrations: the operator's settings (config.ts). */
export interface HealthSettings {
  disableAfterMs: number;
  /** Deliveries a second of a recovered registration's backlog. */
  backlogPerSecond: number;
  /** How long after a registration starts failing it is first probed. */
  probeMs: number;
}

/**
 * Records a batch of attempts in one transaction and returns the ids of the deliveries whose
 * outcome was recorded. An outcome is recorded only if its dispatcher still holds the lease it
 * claimed with (a fencing token): a dispatcher that was too slow cannot overwrite the outcome of
 * the one that took over. The registrations' health follows the recorded attempts only; one that
 * has failed without a single success for too long is deactivated and what it has queued stops;
 * one that was failing and answers 2xx again has its backlog made due, `backlogPerSecond` at most
 * (recovery-repo.ts); one that starts failing is probed `probeMs` later (delivery-claims-repo.ts).
 * If the transaction fails, none of the batch is recorded and every delivery in it keeps its
 * lease until the lease runs out; then it is due again (at least once, never lost).
 */
export async function recordAttempts(
  db: Kysely<DatabaseSchema>,
  records: readonly AttemptRecord[],
  settings: HealthSettings,
): Promise<Set<string>> {
  if (records.length === 0) return new Set();
  return db.transaction().execute(async (trx) => {
    // Registrations first, in id order, then deliveries: the order deleteEndpoint and other batches
    // lock in, so concurrent batches cannot deadlock, and the health read here stays current until
    // it is written back. NO KEY UPDATE, like a plain UPDATE: it does not wait for (nor block) the
    // transactions inserting new deliveries for these registrations, which hold KEY SHARE locks.
    const endpointIds = [...new Set(records.map((r) => r.endpointId))].sort((a, b) => a - b);
    const endpoints = await sql<{
      id: number;
      failing_since: Date | null;
      active: boolean;
      next_probe_at: Date | null;
    }>`
      SELECT id, failing_since, active, next_probe_at FROM webhook_endpoints
      WHERE id = ANY(${endpointIds}::integer[])
      ORDER BY id
      FOR NO KEY UPDATE
    `.execute(trx);

    // One statement for the whole batch; the arrays are one column each, row i of each is record i.
    // The lease is the fence: every write that takes a delivery out of 'pending' also clears its
    // lease, and only a pending delivery is claimed, so a row still holding this claim's lease is
    // pending. (Testing the status as well would let the planner read every pending row through
    // the due index when its statistics lag; the ids go straight to the primary key.)
    // An error text loses its NUL characters, which PostgreSQL text cannot hold: one such value
    // would fail the whole batch, again at every retry of that delivery.
    // A failed attempt ahead of schedule is kept out of the delivery's count, and puts it back
    // at its retry time (`scheduled_at` when a recovery moved it, else where it still is).
    const ids = records.map((r) => r.deliveryId);
    const kept = records.map((r) => r.aheadOfSchedule === true && !r.delivered);
    const updated = await sql<{ id: string }>`
      UPDATE webhook_deliveries d
      SET attempts = d.attempts + CASE WHEN v.kept THEN 0 ELSE 1 END,
          status = v.status,
          next_attempt_at = CASE WHEN v.kept THEN COALESCE(d.scheduled_at, d.next_attempt_at) ELSE v.next_attempt_at END,
          scheduled_at = NULL,
          locked_until = NULL,
          last_response_code = v.response_code,
          last_error = v.error,
          delivered_at = v.delivered_at
      FROM unnest(
        ${ids}::uuid[],
        ${records.map((r) => r.lease)}::timestamptz[],
        ${records.map((r, i) => (r.delivered ? "delivered" : r.nextAttemptAt || kept[i] ? "pending" : "failed"))}::text[],
        ${records.map((r) => r.nextAttemptAt ?? r.at)}::timestamptz[],
        ${records.map((r) => r.responseCode)}::integer[],
        ${records.map((r) => r.error?.replaceAll("\0", "") ?? null)}::text[],
        ${records.map((r) => (r.delivered ? r.at : null))}::timestamptz[],
        ${kept}::boolean[]
      ) AS v(id, lease, status, next_attempt_at, response_code, error, delivered_at, kept)
      WHERE d.id = ANY(${ids}::uuid[]) AND d.id = v.id AND d.locked_until = v.lease
      RETURNING d.id
    `.execute(trx);
    const recorded = new Set(updated.rows.map((r) => r.id));
    const byEndpoint = new Map<number, AttemptRecord[]>();
    for (const r of records) {
      if (!recorded.has(r.deliveryId)) continue;
      const list = byEndpoint.get(r.endpointId);
      if (list) list.push(r);
      else byEndpoint.set(r.endpointId, [r]);
    }

    const changes: Array<{
      id: number;
      failingSince: Date | null;
      deactivated: boolean;
      nextProbeAt: Date | null;
    }> = [];
    const stopped: number[] = [];
    const recovered: Recovery[] = [];
    for (const endpoint of endpoints.rows) {
      const attempts = byEndpoint.get(endpoint.id);
      if (!attempts) continue;
      const after = applyAttempts(
        { failingSince: endpoint.failing_since, active: endpoint.active },
        attempts,
        settings.disableAfterMs,
      );
      const nextProbeAt = nextProbe(endpoint.next_probe_at, after, attempts, settings.probeMs);
      if (
        after.deactivated ||
        after.failingSince?.getTime() !== endpoint.failing_since?.getTime() ||
        nextProbeAt?.getTime() !== endpoint.next_probe_at?.getTime()
      ) {
        changes.push({
          id: endpoint.id,
          failingSince: after.failingSince,
          deactivated: after.deactivated,
          nextProbeAt,
        });
      }
      if (after.stopPending) stopped.push(endpoint.id);
      if (after.recoveredAt) recovered.push({ endpointId: endpoint.id, at: after.recoveredAt });
    }
    if (changes.length > 0) {
      await sql`
        UPDATE webhook_endpoints e
        SET failing_since = v.failing_since,
            next_probe_at = v.next_probe_at,
            active = e.active AND NOT v.deactivated,
            disabled_reason = CASE WHEN v.deactivated THEN 'failing continuously for 5 days' ELSE e.disabled_reason END
        FROM unnest(
          ${changes.map((c) => c.id)}::integer[],
          ${changes.map((c) => c.failingSince)}::timestamptz[],
          ${changes.map((c) => c.deactivated)}::boolean[],
          ${changes.map((c) => c.nextProbeAt)}::timestamptz[]
        ) AS v(id, failing_since, deactivated, next_probe_at)
        WHERE e.id = v.id
      `.execute(trx);
    }
    if (stopped.length > 0) {
      await trx
        .updateTable("webhook_deliveries")
        .set({ status: "failed", last_error: "registration deactivated", locked_until: null })
        .where("endpoint_id", "in", stopped)
        .where("status", "=", "pending")
        .execute();
    }
    await makeBacklogDue(trx, recovered, settings.backlogPerSecond);
    return recorded;
  });
}

/**
 * When a registration is probed next after these attempts: never while it is healthy or inactive;
 * after its last failure (nextProbeAt) when it was not being probed; else when the probe claim set.
 */
function nextProbe(
  current: Date | null,
  after: { failingSince: Date | null; active: boolean },
  attempts: readonly AttemptRecord[],
  probeMs: number,
): Date | null {
  if (after.failingSince === null || !after.active) return null;
  if (current !== null) return current;
  const failures = attempts.filter((a) => !a.delivered).map((a) => a.at.getTime());
  return nextProbeAt(Math.max(after.failingSince.getTime(), ...failures), after.failingSince, probeMs);
}

/** How many deliveries are due and not delivered yet, and how long the oldest has waited. */
export async function dueBacklog(
  db: Kysely<DatabaseSchema>,
): Promise<{ due: number; oldestDueAgeSeconds: number }> {
  const result = await sql<{ due: string; oldest: number | null }>`
    SELECT count(*) AS due, extract(epoch FROM now() - min(next_attempt_at))::float8 AS oldest
    FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= now()`.execute(db);
  const row = result.rows[0];
  return { due: Number(row?.due ?? 0), oldestDueAgeSeconds: Math.max(0, row?.oldest ?? 0) };
}
