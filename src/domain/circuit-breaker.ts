// The payout circuit breaker of part 3 and D6, as pure functions over its state. Per workspace
// and environment: 3 consecutive failed transfers pause payouts; 30 minutes after pausing, the
// next attempt resumes them; a success resets the streak (of an active breaker). It stops a
// workspace whose own sending keeps failing: a refund or a return that its recipient refused is
// not counted (payout-state.ts, failureTrigger).

export const PAUSE_AFTER_FAILURES = 3;
export const AUTO_RESUME_AFTER_MS = 30 * 60 * 1000;

export interface BreakerState {
  status: "active" | "paused";
  failStreak: number;
  pausedAt: Date | null;
  reason: string | null;
}

export const INITIAL_BREAKER: BreakerState = {
  status: "active",
  failStreak: 0,
  pausedAt: null,
  reason: null,
};

export type AttemptDecision =
  | { allowed: true; autoResumed: boolean }
  | { allowed: false; state: BreakerState };

/** Before a payout: paused blocks it, unless the pause is 30 minutes old (auto-resume). */
export function decideAttempt(state: BreakerState, now: Date): AttemptDecision {
  if (state.status === "active") return { allowed: true, autoResumed: false };
  if (state.pausedAt && now.getTime() - state.pausedAt.getTime() >= AUTO_RESUME_AFTER_MS) {
    return { allowed: true, autoResumed: true };
  }
  return { allowed: false, state };
}

export interface FailureOutcome {
  state: BreakerState;
  /** True for exactly the failure that paused the workspace (the e-mail goes out then). */
  tripped: boolean;
  remainingBeforePause: number;
}

export function recordFailure(state: BreakerState, reason: string, now: Date): FailureOutcome {
  const failStreak = state.failStreak + 1;
  if (state.status === "active" && failStreak >= PAUSE_AFTER_FAILURES) {
    return {
      state: { status: "paused", failStreak, pausedAt: now, reason },
      tripped: true,
      remainingBeforePause: 0,
    };
  }
  return {
    state: { ...state, failStreak, reason },
    tripped: false,
    remainingBeforePause: Math.max(0, PAUSE_AFTER_FAILURES - failStreak),
  };
}

/** A failure the breaker does not count (payout-state.ts): the state stays, streak and all. */
export function uncountedFailure(state: BreakerState): FailureOutcome {
  return {
    state,
    tripped: false,
    remainingBeforePause:
      state.status === "paused" ? 0 : Math.max(0, PAUSE_AFTER_FAILURES - state.failStreak),
  };
}

/**
 * After a successful payout: an active breaker's streak starts again. A pause stays: a payout
 * sent before the pause (one wallet's payouts overlap while they are mined) and mined after it
 * does not lift it; only a resume or its 30 minutes do. Returns `state` itself when the success
 * changes nothing (most successes follow successes), so a caller can skip writing it.
 */
export function recordSuccess(state: BreakerState): BreakerState {
  if (state.status !== "active") return state;
  const reset = state.failStreak === 0 && state.pausedAt === null && state.reason === null;
  return reset ? state : INITIAL_BREAKER;
}

export interface ResumeOutcome {
  state: BreakerState;
  resumed: boolean;
  previousStreak: number;
  previousReason: string | null;
}

export function resume(state: BreakerState): ResumeOutcome {
  return {
    state: INITIAL_BREAKER,
    resumed: state.status === "paused",
    previousStreak: state.failStreak,
    previousReason: state.reason,
  };
}
