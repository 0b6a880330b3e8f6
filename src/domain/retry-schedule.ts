// When a failed webhook delivery is tried again (D7): the schedule is data, the jitter spreads
// retries of many deliveries that failed together, and a receiver's Retry-After is honoured
// (never sooner than our own schedule, never later than the longest step).

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/** Delay before retry n (index 0 = first retry). 10 retries, about two days in all. */
export const RETRY_DELAYS_MS: readonly number[] = [
  5 * SECOND,
  30 * SECOND,
  2 * MINUTE,
  10 * MINUTE,
  30 * MINUTE,
  1 * HOUR,
  3 * HOUR,
  6 * HOUR,
  12 * HOUR,
  24 * HOUR,
];

export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;
export const JITTER = 0.2;

/**
 * When a failing registration answers 2xx again, the deliveries waiting on a retry are sent at
 * once, this many a second at most (WEBHOOK_ENDPOINT_RATE_PER_SECOND overrides it): a receiver
 * just back is not flooded, and 200 waiting deliveries take 4 s.
 */
export const BACKLOG_PER_SECOND = 50;

/**
 * While a registration fails, its oldest delivery waiting on a retry is tried this often besides
 * its schedule (WEBHOOK_PROBE_SECONDS overrides it), or less often once it has failed for long
 * (probeDelay). A failed probe uses up none of that delivery's retries; the first success ends
 * the streak and brings the backlog (above).
 */
export const PROBE_INTERVAL_MS = 5 * SECOND;

/**
 * The wait before a failing registration's next probe: `probeMs`, or a twentieth of how long it
 * has been failing if that is longer. A receiver down a minute is found within `probeMs` of its
 * return, one down an hour within 3 min; and one that refuses a delivery while it is up (a 4xx,
 * nothing else sent to it) gets about 150 probes over that delivery's two days of retries, not
 * one every `probeMs`.
 */
export function probeDelay(failingForMs: number, probeMs: number = PROBE_INTERVAL_MS): number {
  return Math.max(probeMs, Math.round(failingForMs / 20));
}

/** When a registration failing since `failingSince` is probed next, after `at` (probeDelay). */
export function nextProbeAt(at: number, failingSince: Date, probeMs: number): Date {
  return new Date(at + probeDelay(at - failingSince.getTime(), probeMs));
}

/** A registration failing continuously for this long is deactivated. */
export const DISABLE_AFTER_MS = 5 * 24 * HOUR;

/**
 * Delay after the given number of attempts made so far, or null when none is left.
 * `random` is in [0, 1); `retryAfterMs` comes from the receiver's Retry-After header; tests may
 * pass a shorter schedule.
 */
export function nextRetryDelay(
  attemptsMade: number,
  random: number,
  retryAfterMs?: number | null,
  schedule: readonly number[] = RETRY_DELAYS_MS,
): number | null {
  if (attemptsMade < 1) throw new RangeError("attemptsMade starts at 1");
  const base = schedule[attemptsMade - 1];
  if (base === undefined) return null;
  const jittered = Math.round(base * (1 - JITTER + 2 * JITTER * random));
  const longest = schedule[schedule.length - 1] ?? base;
  if (retryAfterMs !== undefined && retryAfterMs !== null && retryAfterMs > jittered) {
    return Math.min(retryAfterMs, longest);
  }
  return jittered;
}

/** Retry-After is either delta-seconds or an HTTP date. */
export function parseRetryAfter(header: string | undefined, now: Date): number | null {
  if (!header) return null;
  const trimmed = header.trim();
  if (/^[0-9]+$/.test(trimmed)) return Number(trimmed) * SECOND;
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) return null;
  return Math.max(0, at - now.getTime());
}
