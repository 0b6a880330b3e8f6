import { type Kysely, sql } from "kysely";
import type { Environment } from "../../config.ts";
import { nextProbeAt } from "../../domain/retry-schedule.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";

// The dispatcher's claims (SKIP LOCKED, with a lease): of due deliveries, and of the probes of
// failing registrations. What a claimed delivery's attempt ends with is recorded by repo.ts
// (recordAttempts), under the same lease.

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
  /** The secret a rotation replaced, while it still signs (its 24 h overlap); else null. */
  previousEncryptedSecret: string | null;
  payload: Record<string, unknown>;
  /**
   * Claimed ahead of its schedule: as a probe of its failing registration (claimProbes), or made
   * due sooner by a recovery (recovery-repo.ts). A failure then uses up none of its retries.
   */
  aheadOfSchedule: boolean;
}

/**
 * Claims due deliveries for one dispatcher: rows locked by another dispatcher's transaction are
 * skipped (SKIP LOCKED), and the lease marks them taken until it runs out. A dispatcher that dies
 * after claiming leaves the lease to expire, and the delivery is due again (at least once).
 * The registrations in `skip` are left out (their host is busy in this dispatcher).
 */
export async function claimDueDeliveries(
  db: Kysely<DatabaseSchema>,
  now: Date,
  lease: Date,
  limit: number,
  skip: readonly number[] = [],
): Promise<ClaimedDelivery[]> {
  const result = await db.transaction().execute(async (trx) => {
    // The claim must walk the due index in order and stop after `limit` rows. A queue table's
    // statistics lag behind it (a backlog is often claimed before it is analyzed), and with
    // estimates of a few rows the planner fetches and sorts every due row instead: milliseconds
    // per claim with thousands due. With sorting ruled out, the ordered index walk is the plan.
    await sql`SET LOCAL enable_sort = off`.execute(trx);
    return sql<ClaimedRow>`
      WITH due AS (
        SELECT d.id FROM webhook_deliveries d
        JOIN webhook_endpoints e ON e.id = d.endpoint_id AND e.active AND e.deleted_at IS NULL
        WHERE d.status = 'pending' AND d.next_attempt_at <= ${now}
          AND (d.locked_until IS NULL OR d.locked_until <= ${now})
          AND NOT (d.endpoint_id = ANY(${skip}::integer[]))
        ORDER BY d.next_attempt_at
        LIMIT ${limit}
        FOR UPDATE OF d SKIP LOCKED
      )
      UPDATE webhook_deliveries d
      SET locked_until = ${lease}
      FROM due, webhook_endpoints e, outbox_events o
      WHERE d.id = due.id AND e.id = d.endpoint_id AND o.id = d.outbox_event_id
      RETURNING ${claimedColumns(now)}
    `.execute(trx);
  });
  // RETURNING keeps no order: the batch is put back in the claim's, creation order among equals,
  // so that a registration's backlog (spaced in creation order, recovery-repo.ts) is sent in it.
  const rows = result.rows.sort(
    (a, b) =>
      a.next_attempt_at.getTime() - b.next_attempt_at.getTime() ||
      a.created_at.getTime() - b.created_at.getTime() ||
      Number(BigInt(a.outbox_event_id) - BigInt(b.outbox_event_id)),
  );
  return rows.map((r) => claimed(r, false));
}

/**
 * Claims the probes that are due (issue 43): for each failing registration whose `next_probe_at`
 * has come, its oldest delivery waiting on a retry, under a lease like any claim, marked as a
 * probe (a failed probe uses up none of its retries: repo.ts). The registration's next probe is
 * set on (nextProbeAt), or cleared when it has nothing waiting (a failure recorded later sets it
 * again). Nothing is probed while that oldest delivery is due or being tried: that attempt tells
 * as much. The registration's row lock (SKIP LOCKED) keeps two dispatchers from probing it at once.
 */
export async function claimProbes(
  db: Kysely<DatabaseSchema>,
  now: Date,
  lease: Date,
  probeMs: number,
  limit: number,
  skip: readonly number[] = [],
): Promise<ClaimedDelivery[]> {
  const rows = await db.transaction().execute(async (trx) => {
    const heads = await sql<{ id: number; failing_since: Date; head: string | null; free: boolean }>`
      SELECT e.id, e.failing_since, h.id AS head,
             h.next_attempt_at > ${now} AND (h.locked_until IS NULL OR h.locked_until <= ${now}) AS free
      FROM (
        SELECT id, failing_since FROM webhook_endpoints
        WHERE next_probe_at <= ${now} AND failing_since IS NOT NULL AND active AND deleted_at IS NULL
          AND NOT (id = ANY(${skip}::integer[]))
        ORDER BY next_probe_at
        LIMIT ${limit}
        FOR NO KEY UPDATE SKIP LOCKED
      ) e
      LEFT JOIN LATERAL (
        SELECT d.id, d.next_attempt_at, d.locked_until FROM webhook_deliveries d
        WHERE d.endpoint_id = e.id AND d.status = 'pending' AND d.attempts > 0
        ORDER BY d.created_at, d.outbox_event_id
        LIMIT 1
      ) h ON true
    `.execute(trx);
    if (heads.rows.length === 0) return [];
    await sql`
      UPDATE webhook_endpoints e SET next_probe_at = v.next_probe_at
      FROM unnest(
        ${heads.rows.map((h) => h.id)}::integer[],
        ${heads.rows.map((h) => (h.head === null ? null : nextProbeAt(now.getTime(), h.failing_since, probeMs)))}::timestamptz[]
      ) AS v(id, next_probe_at)
      WHERE e.id = v.id
    `.execute(trx);
    const probed = heads.rows.flatMap((h) => (h.head !== null && h.free ? [h.head] : []));
    if (probed.length === 0) return [];
    // Locked since the read by a claim that has not committed: this waits for it, then sees its
    // lease and leaves the row.
    const result = await sql<ClaimedRow>`
      UPDATE webhook_deliveries d
      SET locked_until = ${lease}
      FROM webhook_endpoints e, outbox_events o
      WHERE d.id = ANY(${probed}::uuid[]) AND d.status = 'pending'
        AND (d.locked_until IS NULL OR d.locked_until <= ${now})
        AND e.id = d.endpoint_id AND o.id = d.outbox_event_id
      RETURNING ${claimedColumns(now)}
    `.execute(trx);
    return result.rows;
  });
  return rows.map((r) => claimed(r, true));
}

interface ClaimedRow {
  id: string;
  event_type: string;
  attempts: number;
  created_at: Date;
  locked_until: Date;
  endpoint_id: number;
  url: string;
  environment: string;
  encrypted_secret: string;
  previous_encrypted_secret: string | null;
  payload: Record<string, unknown>;
  next_attempt_at: Date;
  outbox_event_id: string;
  pulled: boolean;
}

/**
 * What a claim returns of a delivery `d`, its registration `e` and its event `o`. `pulled`: a
 * recovery made it due before its retry time, which is still to come.
 */
function claimedColumns(now: Date) {
  return sql`d.id, d.event_type, d.attempts, d.created_at, d.locked_until, d.endpoint_id,
    d.next_attempt_at, d.outbox_event_id, COALESCE(d.scheduled_at > ${now}, false) AS pulled, e.url, e.environment, e.encrypted_secret, o.payload,
    CASE WHEN e.previous_secret_expires_at > ${now} THEN e.previous_encrypted_secret END
      AS previous_encrypted_secret`;
}

function claimed(r: ClaimedRow, probe: boolean): ClaimedDelivery {
  return {
    id: r.id,
    eventType: r.event_type,
    attempts: r.attempts,
    createdAt: r.created_at,
    lease: r.locked_until,
    endpointId: r.endpoint_id,
    url: r.url,
    environment: r.environment as Environment,
    encryptedSecret: r.encrypted_secret,
    previousEncryptedSecret: r.previous_encrypted_secret,
    payload: r.payload,
    aheadOfSchedule: probe || r.pulled,
  };
}
