import { describe, expect, it, vi } from "vitest";
import { CONFIRM_MAX_SPACING_MS } from "../../src/modules/onramp/confirm.ts";
import { toConfirm } from "../../src/modules/onramp/repo.ts";
import { createWorkers } from "../../src/workers.ts";
import { createWorkspace, startTestApp } from "../support/app.ts";
import { LIVE_DEFAULT } from "../support/devnet-env.ts";
import { fakeTxHash, LIVE_SK, MINUTE, useReconcileApp } from "../support/onramp-reconcile.ts";

// Crash recovery of fiat on-ramp sessions (D17) whose provider events were lost: the
// `onramp.sessions` job (OnrampService.reconcile) asks the local fake card provider, through the
// stripe SDK, what a quiet session is now, and applies the answer as an event would be applied.
// The provider moves sessions here without sending their events. As in events.test.ts, the
// live network is configured (the on-ramp takes the live path) but its RPC endpoint answers
// nothing, and nothing here asks it: the credit is the chain's (live.test.ts). The edges
// (spacing by age, a provider down, answers that do not fit, the race with an event) are in
// reconcile-edges.test.ts.

const h = useReconcileApp();
const { fake, opened, deliver, getSession, statusesOf, asked, reconcileIn } = h;

// ---- tests ---------------------------------------------------------------------------------------

describe("onramp.sessions: sessions whose provider events were lost", () => {
  it("brings a quiet session to the provider's status, announced once, and does not ask again every tick", async () => {
    const ws = await createWorkspace(h.t);
    const { id, provider } = await opened(ws);
    fake.setOnrampStatus(provider.id, "fulfillment_processing", { destinationAmount: "24.75" });

    expect(await reconcileIn(11 * MINUTE)).toBeGreaterThanOrEqual(1);
    expect(asked(provider.id)).toBe(1);
    const read = fake.onrampCalls("retrieve").find((r) => r.path.endsWith(`/${provider.id}`));
    expect(read).toMatchObject({ method: "GET", secretKey: LIVE_SK, form: {} });
    expect(await getSession(ws, id)).toMatchObject({
      status: "fulfillment_processing",
      destinationAmount: "24.75",
      creditedAmount: null,
    });
    // Requires_payment was never seen here: one change, one event, as one late event would make.
    expect(await statusesOf(ws)).toEqual(["onramp.session.updated:fulfillment_processing"]);

    // Just asked (and just changed): the next ticks leave it until it is quiet again.
    await reconcileIn(12 * MINUTE);
    expect(asked(provider.id)).toBe(1);
    // Quiet again, unchanged at the provider: asked, and nothing announced.
    await reconcileIn(23 * MINUTE);
    expect(asked(provider.id)).toBe(2);
    // Asked, though unchanged: not again until another 10 minutes have passed.
    await reconcileIn(24 * MINUTE);
    expect(asked(provider.id)).toBe(2);
    expect(await statusesOf(ws)).toEqual(["onramp.session.updated:fulfillment_processing"]);
  });

  it("leaves a fresh session to its events: not asked within 10 minutes of its last change", async () => {
    const ws = await createWorkspace(h.t);
    const { id, provider } = await opened(ws);
    fake.setOnrampStatus(provider.id, "requires_payment");
    await reconcileIn(9 * MINUTE);
    expect(asked(provider.id)).toBe(0);
    expect((await getSession(ws, id)).status).toBe("initialized");
    expect(await statusesOf(ws)).toEqual([]);
  });

  it("does not ask about an ended session", async () => {
    const ws = await createWorkspace(h.t);
    const rejected = await opened(ws);
    const fulfilled = await opened(ws);
    fake.setOnrampStatus(rejected.provider.id, "rejected");
    expect((await deliver(rejected.provider.id)).answer).toEqual({ received: true });
    fake.setOnrampStatus(fulfilled.provider.id, "fulfillment_complete", {
      transactionId: fakeTxHash("ended"),
    });
    expect((await deliver(fulfilled.provider.id)).answer).toEqual({ received: true });

    await reconcileIn(11 * MINUTE);
    expect([asked(rejected.provider.id), asked(fulfilled.provider.id)]).toEqual([0, 0]);
    expect(await statusesOf(ws)).toEqual([
      "onramp.session.updated:rejected",
      "onramp.session.updated:fulfillment_complete",
    ]);
  });

  it("stops asking about a session made more than 7 days ago", async () => {
    const ws = await createWorkspace(h.t);
    const { id, provider } = await opened(ws);
    fake.setOnrampStatus(provider.id, "requires_payment");
    await reconcileIn(7 * 24 * 60 * MINUTE + MINUTE);
    expect(asked(provider.id)).toBe(0);
    expect((await getSession(ws, id)).status).toBe("initialized");
    expect(await statusesOf(ws)).toEqual([]);
  });

  it("a provider error for one session leaves it as it was, logged; the other in the same tick is reconciled, and it is asked again later", async () => {
    const ws = await createWorkspace(h.t);
    const failing = await opened(ws);
    const healthy = await opened(ws);
    fake.setOnrampStatus(failing.provider.id, "requires_payment");
    fake.setOnrampStatus(healthy.provider.id, "requires_payment");
    fake.failOnrampRetrieve(failing.provider.id, 3);
    const errors = vi.spyOn(h.t.app.ctx.log, "error");

    await reconcileIn(11 * MINUTE);
    // The SDK's two retries of the 500 included.
    expect(asked(failing.provider.id)).toBe(3);
    expect((await getSession(ws, failing.id)).status).toBe("initialized");
    expect((await getSession(ws, healthy.id)).status).toBe("requires_payment");
    expect(errors).toHaveBeenCalledWith(
      expect.objectContaining({ onrampId: failing.id, providerSessionId: failing.provider.id }),
      expect.stringContaining("reconciling an on-ramp session with the card provider failed"),
    );
    expect(errors).not.toHaveBeenCalledWith(
      expect.objectContaining({ onrampId: healthy.id }),
      expect.anything(),
    );

    await reconcileIn(22 * MINUTE);
    expect(asked(failing.provider.id)).toBe(4);
    expect((await getSession(ws, failing.id)).status).toBe("requires_payment");
    expect(await statusesOf(ws)).toEqual([
      "onramp.session.updated:requires_payment",
      "onramp.session.updated:requires_payment",
    ]);
  });

  it("the event arriving after the reconcile applied its status changes nothing and announces nothing again", async () => {
    const ws = await createWorkspace(h.t);
    const { id, provider } = await opened(ws);
    fake.setOnrampStatus(provider.id, "requires_payment");
    await reconcileIn(11 * MINUTE);
    const reconciled = await getSession(ws, id);
    expect(reconciled.status).toBe("requires_payment");
    h.t.setNow(undefined);

    // The provider's retry of the lost event finally arrives.
    const late = await deliver(provider.id);
    expect(late.answer).toEqual({ received: true });
    expect(await getSession(ws, id)).toEqual(reconciled);
    expect(await statusesOf(ws)).toEqual(["onramp.session.updated:requires_payment"]);
    const outcome = await h.t.database.db
      .selectFrom("card_events")
      .select("outcome")
      .where("event_id", "=", late.eventId)
      .executeTakeFirstOrThrow();
    expect(outcome.outcome).toBe("ignored: session is requires_payment");
  });

  it("a fulfillment_complete read back is recorded for the chain to confirm: neither credited nor onramp.completed by the reconcile", async () => {
    const ws = await createWorkspace(h.t);
    const { id, provider } = await opened(ws);
    const txHash = fakeTxHash(`lost fulfilment ${id}`);
    fake.setOnrampStatus(provider.id, "fulfillment_complete", {
      transactionId: txHash,
      destinationAmount: "25",
    });

    await reconcileIn(11 * MINUTE);
    expect(await getSession(ws, id)).toMatchObject({
      status: "fulfillment_complete",
      transactionId: txHash,
      destinationAmount: "25",
      creditedAmount: null,
      completedAt: null,
    });
    expect(await statusesOf(ws)).toEqual(["onramp.session.updated:fulfillment_complete"]);
    // What the chain job's confirmation (confirm.ts) takes next, as after the event itself.
    const pending = await toConfirm(
      h.t.database.db,
      LIVE_DEFAULT,
      h.t.app.ctx.now(),
      CONFIRM_MAX_SPACING_MS,
      1000,
    );
    expect(pending.map((row) => row.id)).toContain(id);
    // Ended with its transaction named: no longer asked.
    await reconcileIn(30 * MINUTE);
    expect(asked(provider.id)).toBe(1);
  });

  it("a session fulfilled without its transaction named is asked until the provider names it", async () => {
    const ws = await createWorkspace(h.t);
    const { id, provider } = await opened(ws);
    fake.setOnrampStatus(provider.id, "fulfillment_complete", { destinationAmount: "25" });
    expect((await deliver(provider.id)).answer).toEqual({ received: true });
    expect((await getSession(ws, id)).transactionId).toBeNull();

    const txHash = fakeTxHash(`named later ${id}`);
    fake.setOnrampStatus(provider.id, "fulfillment_complete", { transactionId: txHash });
    await reconcileIn(11 * MINUTE);
    expect(asked(provider.id)).toBe(1);
    expect(await getSession(ws, id)).toMatchObject({
      status: "fulfillment_complete",
      transactionId: txHash,
      creditedAmount: null,
    });
    // The status did not change: its one event was the first one's.
    expect(await statusesOf(ws)).toEqual(["onramp.session.updated:fulfillment_complete"]);
  });

  it("runs as the periodic job onramp.sessions, only where a card provider is configured", async () => {
    const ws = await createWorkspace(h.t);
    const { id, provider } = await opened(ws);
    fake.setOnrampStatus(provider.id, "rejected");
    const workers = createWorkers(h.t.app);
    const job = workers.jobs.find((j) => j.name === "onramp.sessions");
    if (!job) throw new Error("no onramp.sessions job");
    h.t.setNow(new Date(Date.now() + 11 * MINUTE));
    try {
      expect(await job.runOnce()).toBe(true);
    } finally {
      await workers.stop();
    }
    expect((await getSession(ws, id)).status).toBe("rejected");
    expect(await statusesOf(ws)).toEqual(["onramp.session.updated:rejected"]);

    const bare = await startTestApp(h.liveEnv());
    try {
      expect(createWorkers(bare.app).jobs.map((j) => j.name)).not.toContain("onramp.sessions");
    } finally {
      await bare.close();
    }
  });
});
