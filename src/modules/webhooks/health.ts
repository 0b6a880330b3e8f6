// A registration's health as recorded attempts change it (D7): a success ends a failing streak, a
// failure starts one, and a failure recorded while the streak is older than the deactivation
// window deactivates the registration. Attempts recorded together in one batch are applied in
// the order they ended, with the same result as recording each on its own in that order.

export interface RegistrationHealth {
  failingSince: Date | null;
  active: boolean;
}

export interface EndedAttempt {
  delivered: boolean;
  at: Date;
}

export interface HealthAfterAttempts extends RegistrationHealth {
  /** The deactivation rule fired in this batch (the reason is to be recorded). */
  deactivated: boolean;
  /** A failure was recorded for a registration that is now inactive: what it still has queued stops. */
  stopPending: boolean;
  /**
   * When an active registration that was failing answered 2xx again (the last such success of the
   * batch), else null (issue 43): what waits on a retry because of its failures is due from then.
   * Only a success that ends a streak counts: were every success to count, a delivery the receiver
   * refuses while it accepts others would be retried at each of them instead of on its schedule.
   */
  recoveredAt: Date | null;
}

export function applyAttempts(
  health: RegistrationHealth,
  attempts: readonly EndedAttempt[],
  disableAfterMs: number,
): HealthAfterAttempts {
  let { failingSince, active } = health;
  let deactivated = false;
  let failed = false;
  let recoveredAt: Date | null = null;
  for (const attempt of [...attempts].sort((a, b) => a.at.getTime() - b.at.getTime())) {
    if (attempt.delivered) {
      if (failingSince !== null && active) recoveredAt = attempt.at;
      failingSince = null;
      continue;
    }
    failed = true;
    if (failingSince !== null && failingSince.getTime() <= attempt.at.getTime() - disableAfterMs) {
      active = false;
      deactivated = true;
    }
    failingSince ??= attempt.at;
  }
  return { failingSince, active, deactivated, stopPending: failed && !active, recoveredAt };
}
