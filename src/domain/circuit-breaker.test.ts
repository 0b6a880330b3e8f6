import { describe, expect, it } from "vitest";
import {
  AUTO_RESUME_AFTER_MS,
  decideAttempt,
  INITIAL_BREAKER,
  recordFailure,
  recordSuccess,
  resume,
} from "./circuit-breaker.ts";

const t0 = new Date("2026-01-01T00:00:00Z");

describe("circuit breaker", () => {
  it("counts failures below 3 and stays active", () => {
    const first = recordFailure(INITIAL_BREAKER, "revert", t0);
    expect(first).toMatchObject({
      tripped: false,
      remainingBeforePause: 2,
      state: { status: "active", failStreak: 1 },
    });
    const second = recordFailure(first.state, "revert", t0);
    expect(second).toMatchObject({
      tripped: false,
      remainingBeforePause: 1,
      state: { status: "active", failStreak: 2 },
    });
  });

  it("pauses on the third consecutive failure, exactly once", () => {
    let state = INITIAL_BREAKER;
    state = recordFailure(state, "a", t0).state;
    state = recordFailure(state, "b", t0).state;
    const third = recordFailure(state, "c", t0);
    expect(third).toEqual({
      tripped: true,
      remainingBeforePause: 0,
      state: { status: "paused", failStreak: 3, pausedAt: t0, reason: "c" },
    });
    // A failure recorded after the pause (a payout already in flight) does not trip it again.
    const fourth = recordFailure(third.state, "d", t0);
    expect(fourth.tripped).toBe(false);
    expect(fourth.state.pausedAt).toBe(t0);
  });

  it("blocks attempts while paused, and resumes automatically after 30 minutes", () => {
    const paused = { status: "paused" as const, failStreak: 3, pausedAt: t0, reason: "x" };
    expect(decideAttempt(paused, new Date(t0.getTime() + AUTO_RESUME_AFTER_MS - 1)).allowed).toBe(false);
    expect(decideAttempt(paused, new Date(t0.getTime() + AUTO_RESUME_AFTER_MS))).toEqual({
      allowed: true,
      autoResumed: true,
    });
    expect(decideAttempt(INITIAL_BREAKER, t0)).toEqual({ allowed: true, autoResumed: false });
  });

  it("resets the streak on success; a success never lifts a pause", () => {
    const failing = { status: "active" as const, failStreak: 2, pausedAt: null, reason: "x" };
    expect(recordSuccess(failing)).toEqual(INITIAL_BREAKER);
    expect(recordSuccess(INITIAL_BREAKER)).toEqual(INITIAL_BREAKER);
    const paused = { status: "paused" as const, failStreak: 3, pausedAt: t0, reason: "x" };
    expect(recordSuccess(paused)).toEqual(paused);
  });

  it("returns the same state when a success changes nothing, so the caller writes nothing", () => {
    const fresh = { status: "active" as const, failStreak: 0, pausedAt: null, reason: null };
    expect(recordSuccess(fresh)).toBe(fresh);
    const paused = { status: "paused" as const, failStreak: 3, pausedAt: t0, reason: "x" };
    expect(recordSuccess(paused)).toBe(paused);
    const resumedWithReason = { status: "active" as const, failStreak: 0, pausedAt: null, reason: "x" };
    expect(recordSuccess(resumedWithReason)).not.toBe(resumedWithReason);
    expect(recordSuccess(resumedWithReason)).toEqual(INITIAL_BREAKER);
  });

  it("reports the previous streak and reason on resume, resumed only when paused", () => {
    const paused = { status: "paused" as const, failStreak: 3, pausedAt: t0, reason: "x" };
    expect(resume(paused)).toEqual({
      state: INITIAL_BREAKER,
      resumed: true,
      previousStreak: 3,
      previousReason: "x",
    });
    expect(resume({ ...INITIAL_BREAKER, failStreak: 1, reason: "y" })).toMatchObject({
      resumed: false,
      previousStreak: 1,
      previousReason: "y",
    });
  });
});
