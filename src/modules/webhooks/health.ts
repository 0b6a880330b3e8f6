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
}

export function applyAttempts(
  health: RegistrationHealth,
  attempts: readonly EndedAttempt[],
  disableAfterMs: number,
): HealthAfterAttempts {
  let { failingSince, active } = health;
  let deactivated = false;
  let failed = false;
  for (const attempt of [...attempts].sort((a, b) => a.at.getTime() - b.at.getTime())) {
    if (attempt.delivered) {
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
  return { failingSince, active, deactivated, stopPending: failed && !active };
}
