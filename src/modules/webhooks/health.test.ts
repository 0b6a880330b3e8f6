import { describe, expect, it } from "vitest";
import {
  applyAttempts,
  type EndedAttempt,
  type HealthAfterAttempts,
  type RegistrationHealth,
} from "./health.ts";

const DAY = 24 * 60 * 60 * 1000;
const WINDOW = 5 * DAY;
const T = Date.parse("2026-01-10T12:00:00Z");
const at = (ms: number) => new Date(T + ms);
const ok = (ms: number): EndedAttempt => ({ delivered: true, at: at(ms) });
const fail = (ms: number): EndedAttempt => ({ delivered: false, at: at(ms) });
const applyAttemptsIn = (health: RegistrationHealth, attempts: EndedAttempt[]) =>
  applyAttempts(health, attempts, WINDOW);

/** Each attempt recorded on its own, in the given order: what a batch must be equal to. */
function oneByOne(health: RegistrationHealth, attempts: EndedAttempt[]): HealthAfterAttempts {
  let state = { ...health };
  let deactivated = false;
  let stopPending = false;
  let recoveredAt: Date | null = null;
  for (const attempt of attempts) {
    const after = applyAttemptsIn(state, [attempt]);
    state = { failingSince: after.failingSince, active: after.active };
    deactivated ||= after.deactivated;
    stopPending ||= after.stopPending;
    recoveredAt = after.recoveredAt ?? recoveredAt;
  }
  return { ...state, deactivated, stopPending, recoveredAt };
}

describe("applyAttempts", () => {
  it("a success ends a failing streak", () => {
    expect(applyAttemptsIn({ failingSince: at(-DAY), active: true }, [ok(0)])).toEqual({
      failingSince: null,
      active: true,
      deactivated: false,
      stopPending: false,
      recoveredAt: at(0),
    });
  });

  it("a failure starts a streak, and a later one keeps its start", () => {
    expect(applyAttemptsIn({ failingSince: null, active: true }, [fail(0), fail(1_000)])).toEqual({
      failingSince: at(0),
      active: true,
      deactivated: false,
      stopPending: false,
      recoveredAt: null,
    });
  });

  it("deactivates on a failure once the streak is as old as the window, not before", () => {
    expect(applyAttemptsIn({ failingSince: at(-WINDOW + 1), active: true }, [fail(0)])).toMatchObject({
      active: true,
      deactivated: false,
      stopPending: false,
    });
    expect(applyAttemptsIn({ failingSince: at(-WINDOW), active: true }, [fail(0)])).toEqual({
      failingSince: at(-WINDOW),
      active: false,
      deactivated: true,
      stopPending: true,
      recoveredAt: null,
    });
  });

  it("a success after an old streak does not deactivate", () => {
    expect(applyAttemptsIn({ failingSince: at(-6 * DAY), active: true }, [ok(0)])).toMatchObject({
      failingSince: null,
      active: true,
      deactivated: false,
    });
  });

  it("applies a batch in the order the attempts ended, as if each were recorded on its own", () => {
    const old = { failingSince: at(-6 * DAY), active: true };
    // The failure ended first: the registration was deactivated before the success came in.
    const failThenOk = [ok(10), fail(5)];
    // Deactivated first, so the success is no recovery: nothing is sent to it any more.
    expect(applyAttemptsIn(old, failThenOk)).toEqual({
      failingSince: null,
      active: false,
      deactivated: true,
      stopPending: true,
      recoveredAt: null,
    });
    expect(applyAttemptsIn(old, failThenOk)).toEqual(oneByOne(old, [fail(5), ok(10)]));
    // The success ended first: the streak restarts at the failure.
    const okThenFail = [fail(10), ok(5)];
    // The success recovered the registration, as it would have recorded on its own.
    expect(applyAttemptsIn(old, okThenFail)).toEqual({
      failingSince: at(10),
      active: true,
      deactivated: false,
      stopPending: false,
      recoveredAt: at(5),
    });
    expect(applyAttemptsIn(old, okThenFail)).toEqual(oneByOne(old, [ok(5), fail(10)]));
  });

  it("stops what an already inactive registration has queued when a failure is recorded for it", () => {
    expect(applyAttemptsIn({ failingSince: null, active: false }, [fail(0)])).toMatchObject({
      active: false,
      deactivated: false,
      stopPending: true,
    });
    expect(applyAttemptsIn({ failingSince: null, active: false }, [ok(0)])).toMatchObject({
      stopPending: false,
    });
  });

  it("recovers only a registration that was failing: a success of a healthy one is no recovery", () => {
    expect(applyAttemptsIn({ failingSince: null, active: true }, [ok(0), ok(5)]).recoveredAt).toBeNull();
    // The last success that ended a streak is when the backlog becomes due.
    const flapping = [fail(0), ok(5), fail(10), ok(20), ok(30)];
    const after = applyAttemptsIn({ failingSince: null, active: true }, flapping);
    expect(after.recoveredAt).toEqual(at(20));
    expect(after).toEqual(oneByOne({ failingSince: null, active: true }, flapping));
  });

  it("does not reorder the caller's list", () => {
    const attempts = [ok(10), fail(5)];
    applyAttemptsIn({ failingSince: null, active: true }, attempts);
    expect(attempts).toEqual([ok(10), fail(5)]);
  });
});
