import type { InjectOptions, LightMyRequestResponse } from "fastify";
import {
  type Chain,
  createWalletClient,
  http,
  type PublicClient,
  type Transport,
  type WalletClient,
} from "viem";
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { expect } from "vitest";
import { type Devnet, startDevnet } from "../../src/devnet/chain.ts";
import { createWorkers, type Workers } from "../../src/workers.ts";
import { bearer, type CreatedWorkspace, startTestApp, type TestApp } from "./app.ts";
import { type DevnetClients, devnetClients } from "./devnet-clients.ts";
import { liveNetworkEnv } from "./devnet-env.ts";
import { FakeCardProvider, type OnrampDelivery, type OnrampSessionObject } from "./fake-card-provider.ts";
import { until, watcherPassed } from "./poll.ts";
import { Scrape } from "./prometheus.ts";

// Live on-ramp sessions on the devnet (D17), for the suites that need the whole of it: a local fake
// card provider (through the stripe SDK), the service on the devnet with its chain job running, and
// the provider's hot wallet that delivers real crypto. The helpers speak the API as a merchant and
// the provider would.

type Json = Record<string, unknown>;

export const LIVE_WHSEC = "whsec_onramp_live_secret_0123456789abcdef";
const LIVE_SK = "sk_test_onrampLiveKey0123456789";
export const METRICS_TOKEN = "onramp-live-metrics-token-0123456789";

export interface OnrampLive {
  fake: FakeCardProvider;
  devnet: Devnet;
  t: TestApp;
  workers: Workers;
  clients: DevnetClients;
  chain: PublicClient;
  /** The provider's hot wallet: what it delivers on-ramped crypto from. */
  hot: WalletClient<Transport, Chain, PrivateKeyAccount>;
  stop(): Promise<void>;
}

export async function startOnrampLive(): Promise<OnrampLive> {
  const fake = new FakeCardProvider();
  await fake.start();
  const devnet = await startDevnet({});
  // No periodic gas top-ups (threshold 0): the EOA's ETH changes only by what is delivered to it.
  const t = await startTestApp({
    ...liveNetworkEnv(devnet, { LIVE_GAS_TOPUP_THRESHOLD_WEI: "0" }),
    CARD_SECRET_KEY_LIVE: LIVE_SK,
    CARD_WEBHOOK_SECRET_LIVE: LIVE_WHSEC,
    CARD_API_BASE: fake.url,
    METRICS_TOKEN,
  });
  const clients = devnetClients(devnet);
  const account = privateKeyToAccount(generatePrivateKey());
  const hot = createWalletClient({ account, chain: devnet.chain, transport: http(devnet.rpcUrl) });
  await clients.fund(account.address, { USDC: "10000", ETH: "100" });
  const workers = createWorkers(t.app, { dispatcher: { pollIntervalMs: 50 } });
  workers.start();
  return {
    fake,
    devnet,
    t,
    workers,
    clients,
    chain: clients.chain,
    hot,
    async stop() {
      await workers.stop();
      await t.close();
      await devnet.stop();
      await fake.stop();
    },
  };
}

/** The merchant's and the provider's side of live on-ramp sessions, over one harness. */
export function onrampActors(h: () => OnrampLive) {
  const api = (ws: CreatedWorkspace, method: InjectOptions["method"], url: string, payload?: Json) =>
    h().t.request({ method, url, headers: bearer(ws.liveKey), ...(payload ? { payload } : {}) });

  const deliver = (signed: { payload: string; header: string }): Promise<LightMyRequestResponse> =>
    h().t.request({
      method: "POST",
      url: "/api/webhooks/card",
      headers: { "content-type": "application/json", "stripe-signature": signed.header },
      payload: signed.payload,
    });

  async function onrampEvents(ws: CreatedWorkspace) {
    const rows = await h()
      .t.database.db.selectFrom("outbox_events")
      .select(["event_type", "payload"])
      .where("workspace_id", "=", ws.id)
      .where("event_type", "like", "onramp.%")
      .orderBy("id")
      .execute();
    return rows.map((r) => {
      const data = r.payload as Json;
      const type =
        r.event_type === "onramp.completed" ? r.event_type : `${r.event_type}:${String(data.status)}`;
      return { type, data };
    });
  }

  return {
    api,
    deliver,
    until,

    /** The provider moves the session, then sends its event (accepted, first seen). */
    async moved(
      providerId: string,
      status: OnrampSessionObject["status"],
      facts: Parameters<FakeCardProvider["setOnrampStatus"]>[2] = {},
    ) {
      h().fake.setOnrampStatus(providerId, status, facts);
      const event = h().fake.onrampUpdated(providerId, { livemode: true });
      const res = await deliver(h().fake.sign(event, LIVE_WHSEC));
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toEqual({ received: true });
    },

    /** A session (201) and the provider's session made for it. */
    async opened(ws: CreatedWorkspace, body: Json, headers: Record<string, string> = {}) {
      const res = await h().t.request({
        method: "POST",
        url: "/api/v1/onramp/session",
        headers: { ...bearer(ws.liveKey), ...headers },
        payload: body,
      });
      expect(res.statusCode, res.body).toBe(201);
      const session = res.json() as Json;
      const provider = [...h().fake.onrampSessions.values()].find((s) => s.metadata.onrampId === session.id);
      if (!provider) throw new Error("the provider made no session");
      return { id: session.id as string, session, provider };
    },

    async getSession(ws: CreatedWorkspace, id: string): Promise<Json> {
      const res = await api(ws, "GET", `/api/v1/onramp/sessions/${id}`);
      expect(res.statusCode, res.body).toBe(200);
      return res.json() as Json;
    },

    /** A pending crypto payment of `amount` USDC on the workspace EOA, open for 10 hours. */
    async pendingPayment(ws: CreatedWorkspace, amount: string) {
      const merchant = privateKeyToAccount(generatePrivateKey()).address;
      const res = await api(ws, "POST", "/api/v1/payments", {
        tokenSymbol: "USDC",
        amount,
        merchantWallet: merchant,
        expiresInMinutes: 600,
      });
      expect(res.statusCode, res.body).toBe(201);
      return { id: res.json().payment.id as string, merchant };
    },

    async getPayment(ws: CreatedWorkspace, id: string): Promise<Json> {
      const res = await api(ws, "GET", `/api/v1/payments/${id}`);
      expect(res.statusCode, res.body).toBe(200);
      return res.json().payment as Json;
    },

    /** The workspace's inbox items of transaction `txHash`. */
    async inInbox(ws: CreatedWorkspace, txHash: string): Promise<Json[]> {
      const res = await api(ws, "GET", "/api/v1/transfers/unmatched?limit=100");
      expect(res.statusCode, res.body).toBe(200);
      return (res.json().transfers as Json[]).filter(
        (u) => typeof u.txHash === "string" && u.txHash.toLowerCase() === txHash.toLowerCase(),
      );
    },

    /** The workspace's onramp.* events: `type:status` (the completion by its type), and their data. */
    onrampEvents,

    /** The types of the workspace's onramp.* events (onrampEvents). */
    statusesOf: async (ws: CreatedWorkspace) => (await onrampEvents(ws)).map((e) => e.type),

    /** Until the chain watcher has scanned block `block` (its cursor is there or beyond). */
    watcherPassed: (block: bigint) => watcherPassed(h().t.database.db, block),

    /** What the hot wallet sends for a session: `units` of its currency. */
    delivery: (units: bigint, extra: Partial<OnrampDelivery> = {}): OnrampDelivery => ({
      wallet: h().hot,
      chain: h().chain,
      usdc: h().devnet.tokens.USDC,
      units,
      livemode: true,
      secret: LIVE_WHSEC,
      ...extra,
    }),

    /** The service's /metrics, scraped. */
    async metrics(): Promise<Scrape> {
      const res = await h().t.request({
        method: "GET",
        url: "/metrics",
        headers: { authorization: `Bearer ${METRICS_TOKEN}` },
      });
      expect(res.statusCode, res.body).toBe(200);
      return new Scrape(res.body);
    },
  };
}
