import { keccak256, toHex } from "viem";
import { afterAll, afterEach, beforeAll, expect, vi } from "vitest";
import { bearer, type CreatedWorkspace, startTestApp, type TestApp } from "./app.ts";
import { FakeCardProvider } from "./fake-card-provider.ts";
import { startRpcProxy } from "./rpc-proxy.ts";

// What the tests of the `onramp.sessions` job (onramp/reconcile.ts) share: the app with the live
// network configured (the on-ramp takes the live path) but an RPC endpoint that answers nothing,
// and nothing here asks it (the credit is the chain's: test/onramp/live.test.ts), a local fake card
// provider reached through the stripe SDK, and helpers to open sessions, deliver their events,
// run the job's tick at a given time and read what it did.

type Json = Record<string, unknown>;

export const LIVE_SK = "sk_test_onrampReconcileKey0123456789";
export const LIVE_WHSEC = "whsec_onramp_reconcile_secret_0123456789ab";
export const MINUTE = 60_000;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

export const fakeTxHash = (seed: string) => keccak256(toHex(seed));

/** Starts the app and the fake provider for the calling test file (its vitest hooks); its helpers. */
export function useReconcileApp() {
  const fake = new FakeCardProvider();
  let rpc: Awaited<ReturnType<typeof startRpcProxy>> | undefined;
  let app: TestApp | undefined;

  /** The live network's settings, its RPC endpoint the one that answers nothing. */
  const liveEnv = () => {
    if (!rpc) throw new Error("reconcile test app not started");
    return {
      LIVE_RPC_URL: rpc.url,
      LIVE_CHAIN_ID: "31337",
      LIVE_USDC_ADDRESS: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
      LIVE_ADAO_ADDRESS: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
      LIVE_TREASURY_ADDRESS: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
      RATE_LIMIT_LIVE: "100000",
    };
  };

  beforeAll(async () => {
    await fake.start();
    rpc = await startRpcProxy("http://127.0.0.1:9", async () => ({
      error: { code: -32000, message: "no chain" },
    }));
    app = await startTestApp({
      ...liveEnv(),
      CARD_SECRET_KEY_LIVE: LIVE_SK,
      CARD_WEBHOOK_SECRET_LIVE: LIVE_WHSEC,
      CARD_API_BASE: fake.url,
    });
  });

  afterEach(() => {
    app?.setNow(undefined);
    vi.restoreAllMocks();
  });

  afterAll(async () => {
    await app?.close();
    await rpc?.close();
    await fake.stop();
    expect(rpc?.methods).toEqual([]);
  });

  const h = {
    fake,
    liveEnv,
    /** The test app (started by the file's beforeAll). */
    get t(): TestApp {
      if (!app) throw new Error("reconcile test app not started");
      return app;
    },

    /** A live session (201) and the provider's session made for it. */
    async opened(ws: CreatedWorkspace, body: Json = { destinationCurrency: "USDC", sourceAmount: "25.00" }) {
      const res = await h.t.request({
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
    },

    /** As `opened`, made with the service's clock at `at` (its last change then too). */
    async openedAt(ws: CreatedWorkspace, at: Date) {
      h.t.setNow(at);
      try {
        return await h.opened(ws);
      } finally {
        h.t.setNow(undefined);
      }
    },

    /** The provider's event for its session as it stands, delivered signed; the webhook's answer. */
    async deliver(providerId: string) {
      const signed = fake.sign(fake.onrampUpdated(providerId, { livemode: true }), LIVE_WHSEC);
      const res = await h.t.request({
        method: "POST",
        url: "/api/webhooks/card",
        headers: { "content-type": "application/json", "stripe-signature": signed.header },
        payload: signed.payload,
      });
      expect(res.statusCode, res.body).toBe(200);
      return { eventId: signed.event.id, answer: res.json() as Json };
    },

    async getSession(ws: CreatedWorkspace, id: string): Promise<Json> {
      const res = await h.t.request({
        method: "GET",
        url: `/api/v1/onramp/sessions/${id}`,
        headers: bearer(ws.liveKey),
      });
      expect(res.statusCode, res.body).toBe(200);
      return res.json() as Json;
    },

    /** The workspace's onramp.* events in the webhook outbox, as `type:status`. */
    async statusesOf(ws: CreatedWorkspace): Promise<string[]> {
      const rows = await h.t.database.db
        .selectFrom("outbox_events")
        .select(["event_type", "payload"])
        .where("workspace_id", "=", ws.id)
        .where("event_type", "like", "onramp.%")
        .orderBy("id")
        .execute();
      return rows.map((r) => `${r.event_type}:${String((r.payload as Json).status)}`);
    },

    /** How often the provider was asked for its session `providerId` (the SDK's retries each count). */
    asked: (providerId: string) =>
      fake.onrampCalls("retrieve").filter((r) => r.path.endsWith(`/${providerId}`)).length,

    /** The job's tick with the service's clock `ms` from now. */
    async reconcileIn(ms: number): Promise<number> {
      h.t.setNow(new Date(Date.now() + ms));
      return h.t.app.services.onramp.reconcile();
    },
  };
  return h;
}
