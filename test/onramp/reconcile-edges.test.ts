import { describe, expect, it, onTestFinished, vi } from "vitest";
import { type CreatedWorkspace, createWorkspace } from "../support/app.ts";
import { DAY, HOUR, MINUTE, useReconcileApp } from "../support/onramp-reconcile.ts";

// The edges of the `onramp.sessions` job (onramp/reconcile.ts; its main path is in
// reconcile.test.ts): how often a session is asked as it ages, a tick that ends early when
// the provider is down, answers the service must not apply (another session's, a status it does
// not know, an earlier status), and an event applied while the job's read of the provider is on
// its way. Sessions are left quiet by opening them with the service's clock in the past.

const h = useReconcileApp();
const { fake, opened, openedAt, deliver, getSession, statusesOf, asked, reconcileIn } = h;

const SUMMARY = "the card provider failed for several on-ramp sessions in a row";
const FAILED = "reconciling an on-ramp session with the card provider failed";

/** The error logs of the spy whose message starts with `message`: their first argument. */
const logged = (spy: { mock: { calls: unknown[][] } }, message: string) =>
  spy.mock.calls.filter(([, text]) => String(text).startsWith(message)).map(([fields]) => fields);

const ago = (ms: number) => new Date(Date.now() - ms);

/**
 * `count` sessions of a fresh workspace, made a second apart `age` ago: never asked and older than
 * the sessions other tests left unasked, they are asked first, one after the other, in that order.
 */
async function oldSessions(count: number, age: number) {
  const ws = await createWorkspace(h.t);
  const sessions = [];
  for (let i = 0; i < count; i++) sessions.push(await openedAt(ws, ago(age - i * 1000)));
  return { ws, sessions };
}

/**
 * The next `times` requests for each session answer 500 (3: one read, the SDK's two retries
 * included; 0: none), the rest cleared when the test ends so that no other test meets them.
 */
function failReads(sessions: Array<{ provider: { id: string } }>, times = 3) {
  for (const { provider } of sessions) fake.failOnrampRetrieve(provider.id, times);
  onTestFinished(() => {
    for (const { provider } of sessions) fake.failOnrampRetrieve(provider.id, 0);
  });
}

/** The sessions' statuses now, in order. */
const statusesNow = (ws: CreatedWorkspace, sessions: Array<{ id: string }>) =>
  Promise.all(sessions.map(async ({ id }) => (await getSession(ws, id)).status));

describe("onramp.sessions: how often a session is asked", () => {
  it("an old session is asked less often: not within a tenth of its age", async () => {
    const ws = await createWorkspace(h.t);
    const { id, provider } = await openedAt(ws, ago(2 * DAY));

    await reconcileIn(0);
    expect(asked(provider.id)).toBe(1);
    // Quiet for two days and asked an hour ago: a tenth of its age (about 5 hours) has not passed.
    await reconcileIn(HOUR);
    expect(asked(provider.id)).toBe(1);
    await reconcileIn(6 * HOUR);
    expect(asked(provider.id)).toBe(2);
    expect((await getSession(ws, id)).status).toBe("initialized");
    expect(await statusesOf(ws)).toEqual([]);
  });

  it("a young session is asked again 10 minutes after its last ask, though a tenth of its age is less", async () => {
    const ws = await createWorkspace(h.t);
    const { provider } = await openedAt(ws, ago(30 * MINUTE));

    await reconcileIn(0);
    expect(asked(provider.id)).toBe(1);
    await reconcileIn(9 * MINUTE);
    expect(asked(provider.id)).toBe(1);
    await reconcileIn(11 * MINUTE);
    expect(asked(provider.id)).toBe(2);
  });
});

describe("onramp.sessions: a provider that keeps failing", () => {
  it("ends the tick after 3 failures in a row, with one summary log; the rest are asked next tick", async () => {
    const { ws, sessions } = await oldSessions(5, 6 * DAY);
    for (const { provider } of sessions) fake.setOnrampStatus(provider.id, "requires_payment");
    failReads(sessions);
    const errors = vi.spyOn(h.t.app.ctx.log, "error");

    await reconcileIn(0);
    // One read is 3 requests (the SDK retries a 500 twice): 3 sessions asked, the last 2 not.
    expect(sessions.map(({ provider }) => asked(provider.id))).toEqual([3, 3, 3, 0, 0]);
    expect(logged(errors, FAILED)).toEqual(
      sessions.slice(0, 3).map(({ id }) => expect.objectContaining({ onrampId: id })),
    );
    expect(logged(errors, SUMMARY)).toEqual([expect.objectContaining({ failed: 3 })]);

    // The provider is back: the two left are asked first, the three asked just now are not yet.
    failReads(sessions, 0);
    await reconcileIn(MINUTE);
    expect(sessions.map(({ provider }) => asked(provider.id))).toEqual([3, 3, 3, 1, 1]);
    expect(await statusesNow(ws, sessions)).toEqual([
      "initialized",
      "initialized",
      "initialized",
      "requires_payment",
      "requires_payment",
    ]);
  });

  it("a success between failures starts the count again", async () => {
    const { ws, sessions } = await oldSessions(5, 5 * DAY);
    for (const { provider } of sessions) fake.setOnrampStatus(provider.id, "requires_payment");
    failReads(sessions.filter((_, i) => i !== 2));
    const errors = vi.spyOn(h.t.app.ctx.log, "error");

    await reconcileIn(0);
    // Failed, failed, answered, failed, failed: never 3 in a row, so every one is asked.
    expect(sessions.map(({ provider }) => asked(provider.id))).toEqual([3, 3, 1, 3, 3]);
    expect(logged(errors, FAILED)).toHaveLength(4);
    expect(logged(errors, SUMMARY)).toEqual([]);
    expect(await statusesNow(ws, sessions)).toEqual([
      "initialized",
      "initialized",
      "requires_payment",
      "initialized",
      "initialized",
    ]);
  });
});

describe("onramp.sessions: answers that are not applied", () => {
  it("an answer naming another session than the one asked is an error: neither session moves", async () => {
    const ws = await createWorkspace(h.t);
    const asking = await openedAt(ws, ago(20 * MINUTE));
    const other = await openedAt(ws, ago(20 * MINUTE));
    // Asked about `asking`, the provider answers with `other`, moved on: applied by its id, it
    // would move `other`.
    fake.answerOnrampRetrieve(asking.provider.id, {
      ...structuredClone(fake.onrampSession(other.provider.id)),
      status: "fulfillment_processing",
    });
    const errors = vi.spyOn(h.t.app.ctx.log, "error");

    await reconcileIn(0);
    expect([asked(asking.provider.id), asked(other.provider.id)]).toEqual([1, 1]);
    expect(errors).toHaveBeenCalledWith(
      expect.objectContaining({ onrampId: asking.id }),
      expect.stringContaining(`the provider answered session ${other.provider.id} for ${asking.provider.id}`),
    );
    expect((await getSession(ws, asking.id)).status).toBe("initialized");
    expect((await getSession(ws, other.id)).status).toBe("initialized");
    expect(await statusesOf(ws)).toEqual([]);
  });

  it("a status the service does not know is logged and changes nothing; the session is asked again later", async () => {
    const ws = await createWorkspace(h.t);
    const { id, provider } = await openedAt(ws, ago(20 * MINUTE));
    fake.setOnrampStatus(provider.id, "requires_payment");
    fake.answerOnrampRetrieve(provider.id, {
      ...structuredClone(fake.onrampSession(provider.id)),
      status: "awaiting_identity_check",
    });
    const errors = vi.spyOn(h.t.app.ctx.log, "error");

    await reconcileIn(0);
    expect(asked(provider.id)).toBe(1);
    expect(errors).toHaveBeenCalledWith(
      expect.objectContaining({ onrampId: id }),
      expect.stringContaining("a status we do not know"),
    );
    expect((await getSession(ws, id)).status).toBe("initialized");
    expect(await statusesOf(ws)).toEqual([]);

    // The next read answers a status it knows.
    await reconcileIn(11 * MINUTE);
    expect(asked(provider.id)).toBe(2);
    expect((await getSession(ws, id)).status).toBe("requires_payment");
    expect(await statusesOf(ws)).toEqual(["onramp.session.updated:requires_payment"]);
  });

  it("an earlier status than the session has changes nothing and announces nothing (forward only)", async () => {
    const ws = await createWorkspace(h.t);
    const { id, provider } = await opened(ws);
    fake.setOnrampStatus(provider.id, "fulfillment_processing");
    expect((await deliver(provider.id)).answer).toEqual({ received: true });
    const before = await getSession(ws, id);
    expect(before.status).toBe("fulfillment_processing");

    fake.setOnrampStatus(provider.id, "requires_payment");
    const warnings = vi.spyOn(h.t.app.ctx.log, "warn");
    await reconcileIn(11 * MINUTE);
    expect(asked(provider.id)).toBe(1);
    expect(await getSession(ws, id)).toEqual(before);
    expect(await statusesOf(ws)).toEqual(["onramp.session.updated:fulfillment_processing"]);
    expect(warnings).not.toHaveBeenCalledWith(expect.objectContaining({ onrampId: id }), expect.anything());
  });
});

describe("onramp.sessions: an event applied while the job's read is on its way", () => {
  it("the status the event and the read both bring is applied and announced once", async () => {
    const ws = await createWorkspace(h.t);
    const { id, provider } = await opened(ws);
    fake.setOnrampStatus(provider.id, "fulfillment_processing", { destinationAmount: "24.75" });
    const warnings = vi.spyOn(h.t.app.ctx.log, "warn");

    // The job has read the session at the provider; its answer is held until the event is in.
    const hold = fake.holdOnrampRetrieve(provider.id);
    onTestFinished(hold.release);
    const tick = reconcileIn(11 * MINUTE);
    await Promise.race([
      hold.reached,
      tick.then(() => {
        throw new Error("the tick ended without asking about the session");
      }),
    ]);
    const event = await deliver(provider.id);
    expect(event.answer).toEqual({ received: true });
    expect((await getSession(ws, id)).status).toBe("fulfillment_processing");

    hold.release();
    await tick;
    expect(asked(provider.id)).toBe(1);
    expect(await getSession(ws, id)).toMatchObject({
      status: "fulfillment_processing",
      destinationAmount: "24.75",
    });
    expect(await statusesOf(ws)).toEqual(["onramp.session.updated:fulfillment_processing"]);
    const outcome = await h.t.database.db
      .selectFrom("card_events")
      .select("outcome")
      .where("event_id", "=", event.eventId)
      .executeTakeFirstOrThrow();
    expect(outcome.outcome).toBe("applied");
    // The job found nothing left to change.
    expect(warnings).not.toHaveBeenCalledWith(expect.objectContaining({ onrampId: id }), expect.anything());
  });
});
