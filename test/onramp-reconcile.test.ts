import { keccak256, toHex } from "viem";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { toConfirm } from "../src/modules/onramp/repo.ts";
import { createWorkers } from "../src/workers.ts";
import { bearer, type CreatedWorkspace, createWorkspace, startTestApp, type TestApp } from "./support/app.ts";
import { FakeCardProvider } from "./support/fake-card-provider.ts";
import { startRpcProxy } from "./support/rpc-proxy.ts";

// Crash recovery of fiat on-ramp sessions (D17) whose provider events were lost: the
// `onramp.sessions` job (OnrampService.reconcile) asks the local fake card provider, through the
// stripe SDK, what a quiet session is now, and applies the answer as an event would be applied.
// The provider moves sessions here without sending their events. As in onramp-events.test.ts, the
// live network is configured (the on-ramp takes the live path) but its RPC endpoint answers
// nothing, and nothing here asks it: the credit is the chain's (onramp-live.test.ts).

type Json = Record<string, unknown>;

const LIVE_SK = "sk_test_onrampReconcileKey0123456789";
const LIVE_WHSEC = "whsec_onramp_reconcile_secret_0123456789ab";
const MINUTE = 60_000;

const fake = new FakeCardProvider();
let rpc: Awaited<ReturnType<typeof startRpcProxy>>;
let t: TestApp;

const liveEnv = () => ({
  LIVE_RPC_URL: rpc.url,
  LIVE_CHAIN_ID: "31337",
  LIVE_USDC_ADDRESS: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
  LIVE_ADAO_ADDRESS: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
  LIVE_TREASURY_ADDRESS: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
  RATE_LIMIT_LIVE: "100000",
});

beforeAll(async () => {
  await fake.start();
  rpc = await startRpcProxy("http://127.0.0.1:9", async () => ({
    error: { code: -32000, message: "no chain" },
  }));
  t = await startTestApp({
    ...liveEnv(),
    CARD_SECRET_KEY_LIVE: LIVE_SK,
    CARD_WEBHOOK_SECRET_LIVE: LIVE_WHSEC,
    CARD_API_BASE: fake.url,
  });
});

afterEach(() => {
  t?.setNow(undefined);
  vi.restoreAllMocks();
});

afterAll(async () => {
  await t?.close();
  await rpc?.close();
  await fake.stop();
  expect(rpc.methods).toEqual([]);
});

// ---- helpers -------------------------------------------------------------------------------------

/** A live session (201) and the provider's session made for it. */
async function opened(
  ws: CreatedWorkspace,
  body: Json = { destinationCurrency: "USDC", sourceAmount: "25.00" },
) {
  const res = await t.request({
    method: "POST",
    url: "/api/v1/onramp/session",
    headers: bearer(ws.liveKey),
    payload: body,
  });
  expect(res.statusCode, res.body).toBe(201);
  const id = res.json().id as string;
  const provider = [...fake.onrampSessions.values()].find((s) => s.metadata.onrampId === id);
  if (!provider) throw new Error(`no provider session for ${id}`);
  return { id, provider };
}

/** The provider's event for its session as it stands, delivered signed; the webhook's answer. */
async function deliver(providerId: string) {
  const signed = fake.sign(fake.onrampUpdated(providerId, { livemode: true }), LIVE_WHSEC);
  const res = await t.request({
    method: "POST",
    url: "/api/webhooks/card",
    headers: { "content-type": "application/json", "stripe-signature": signed.header },
    payload: signed.payload,
  });
  expect(res.statusCode, res.body).toBe(200);
  return { eventId: signed.event.id, answer: res.json() as Json };
}

async function getSession(ws: CreatedWorkspace, id: string): Promise<Json> {
  const res = await t.request({
    method: "GET",
    url: `/api/v1/onramp/sessions/${id}`,
    headers: bearer(ws.liveKey),
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as Json;
}

/** The workspace's onramp.* events in the webhook outbox, as `type:status`. */
async function statusesOf(ws: CreatedWorkspace): Promise<string[]> {
  const rows = await t.database.db
    .selectFrom("outbox_events")
    .select(["event_type", "payload"])
    .where("workspace_id", "=", ws.id)
    .where("event_type", "like", "onramp.%")
    .orderBy("id")
    .execute();
  return rows.map((r) => `${r.event_type}:${String((r.payload as Json).status)}`);
}

/** How often the provider was asked for its session `providerId`. */
const asked = (providerId: string) =>
  fake.onrampCalls("retrieve").filter((r) => r.path.endsWith(`/${providerId}`)).length;

/** The job's tick with the service's clock `ms` from now. */
async function reconcileIn(ms: number): Promise<number> {
  t.setNow(new Date(Date.now() + ms));
  return t.app.services.onramp.reconcile();
}

const fakeTxHash = (seed: string) => keccak256(toHex(seed));

// ---- tests ---------------------------------------------------------------------------------------

describe("onramp.sessions: sessions whose provider events were lost", () => {
  it("brings a quiet session to the provider's status, announced once, and does not ask again every tick", async () => {
    const ws = await createWorkspace(t);
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
    const ws = await createWorkspace(t);
    const { id, provider } = await opened(ws);
    fake.setOnrampStatus(provider.id, "requires_payment");
    await reconcileIn(9 * MINUTE);
    expect(asked(provider.id)).toBe(0);
    expect((await getSession(ws, id)).status).toBe("initialized");
    expect(await statusesOf(ws)).toEqual([]);
  });

  it("does not ask about an ended session", async () => {
    const ws = await createWorkspace(t);
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
    const ws = await createWorkspace(t);
    const { id, provider } = await opened(ws);
    fake.setOnrampStatus(provider.id, "requires_payment");
    await reconcileIn(7 * 24 * 60 * MINUTE + MINUTE);
    expect(asked(provider.id)).toBe(0);
    expect((await getSession(ws, id)).status).toBe("initialized");
    expect(await statusesOf(ws)).toEqual([]);
  });

  it("a provider error for one session leaves it as it was, logged; the other in the same tick is reconciled, and it is asked again later", async () => {
    const ws = await createWorkspace(t);
    const failing = await opened(ws);
    const healthy = await opened(ws);
    fake.setOnrampStatus(failing.provider.id, "requires_payment");
    fake.setOnrampStatus(healthy.provider.id, "requires_payment");
    fake.failOnrampRetrieve(failing.provider.id, 3);
    const errors = vi.spyOn(t.app.ctx.log, "error");

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
    const ws = await createWorkspace(t);
    const { id, provider } = await opened(ws);
    fake.setOnrampStatus(provider.id, "requires_payment");
    await reconcileIn(11 * MINUTE);
    const reconciled = await getSession(ws, id);
    expect(reconciled.status).toBe("requires_payment");
    t.setNow(undefined);

    // The provider's retry of the lost event finally arrives.
    const late = await deliver(provider.id);
    expect(late.answer).toEqual({ received: true });
    expect(await getSession(ws, id)).toEqual(reconciled);
    expect(await statusesOf(ws)).toEqual(["onramp.session.updated:requires_payment"]);
    const outcome = await t.database.db
      .selectFrom("card_events")
      .select("outcome")
      .where("event_id", "=", late.eventId)
      .executeTakeFirstOrThrow();
    expect(outcome.outcome).toBe("ignored: session is requires_payment");
  });

  it("a fulfillment_complete read back is recorded for the chain to confirm: neither credited nor onramp.completed by the reconcile", async () => {
    const ws = await createWorkspace(t);
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
    const pending = await toConfirm(t.database.db, "live", 1000);
    expect(pending.map((row) => row.id)).toContain(id);
    // Ended with its transaction named: no longer asked.
    await reconcileIn(30 * MINUTE);
    expect(asked(provider.id)).toBe(1);
  });

  it("a session fulfilled without its transaction named is asked until the provider names it", async () => {
    const ws = await createWorkspace(t);
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
    const ws = await createWorkspace(t);
    const { id, provider } = await opened(ws);
    fake.setOnrampStatus(provider.id, "rejected");
    const workers = createWorkers(t.app);
    const job = workers.jobs.find((j) => j.name === "onramp.sessions");
    if (!job) throw new Error("no onramp.sessions job");
    t.setNow(new Date(Date.now() + 11 * MINUTE));
    try {
      expect(await job.runOnce()).toBe(true);
    } finally {
      await workers.stop();
    }
    expect((await getSession(ws, id)).status).toBe("rejected");
    expect(await statusesOf(ws)).toEqual(["onramp.session.updated:rejected"]);

    const bare = await startTestApp(liveEnv());
    try {
      expect(createWorkers(bare.app).jobs.map((j) => j.name)).not.toContain("onramp.sessions");
    } finally {
      await bare.close();
    }
  });
});
