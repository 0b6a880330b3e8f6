import { sql, type Transaction } from "kysely";
import type { DatabaseSchema } from "../../platform/db/schema.ts";

// A registration's backlog when it answers 2xx again (issue 43): the deliveries waiting on a retry
// because of its failures are made due at once instead of each waiting out its own step.

/** A registration that answered 2xx again, and when (the success that ended its failing streak). */
export interface Recovery {
  endpointId: number;
  at: Date;
}

/**
 * Makes the backlog of each recovered registration due from `at`, in creation order, one every
 * 1/`perSecond` s: the first at `at` + 1/`perSecond` (the success was a send too). A delivery is
 * only ever pulled forward: one due sooner keeps its time. The spacing is the rate limit, kept in
 * the rows themselves, so it holds across any number of dispatchers and instances (a limiter in
 * one process could not), and the claim, which walks the due index by time, sends the backlog in
 * creation order with no index of its own. Runs in the transaction recording the success, which
 * holds the registration's row lock, so two recoveries of one registration do not interleave.
 * Pending deliveries tried before (attempts > 0) only: one never tried is due already. Each keeps
 * its retry time in `scheduled_at`: if its attempt ahead of it fails (the registration fails
 * again, or the receiver refuses this one delivery while it takes others), it goes back there
 * without using up a retry (repo.ts), so a recovery never spends a delivery's retries.
 */
export async function makeBacklogDue(
  trx: Transaction<DatabaseSchema>,
  recoveries: readonly Recovery[],
  perSecond: number,
): Promise<number> {
  if (recoveries.length === 0) return 0;
  const result = await sql`
    UPDATE webhook_deliveries d
    SET next_attempt_at = q.due,
        scheduled_at = COALESCE(d.scheduled_at, d.next_attempt_at)
    FROM (
      SELECT b.id, r.at + make_interval(secs => row_number() OVER (
               PARTITION BY b.endpoint_id ORDER BY b.created_at, b.outbox_event_id) / ${perSecond}::float8) AS due
      FROM unnest(
        ${recoveries.map((r) => r.endpointId)}::integer[],
        ${recoveries.map((r) => r.at)}::timestamptz[]
      ) AS r(endpoint_id, at)
      JOIN webhook_deliveries b ON b.endpoint_id = r.endpoint_id
      WHERE b.status = 'pending' AND b.attempts > 0 AND b.next_attempt_at > r.at
    ) q
    WHERE d.id = q.id AND q.due < d.next_attempt_at
  `.execute(trx);
  return Number(result.numAffectedRows ?? 0n);
}
