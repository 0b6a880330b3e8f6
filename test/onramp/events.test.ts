import { Writable } from "node:stream";
import type { InjectOptions, LightMyRequestResponse } from "fastify";
import { keccak256, toHex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { type CardEvent, FakeCardProvider, type OnrampSessionObject } from "../support/fake-card-provider.ts";
import { startRpcProxy } from "../support/rpc-proxy.ts";

// Fiat on-ramp sessions (D17) at the card provider, without a chain: the session made through the
// official stripe SDK at a local fake provider (what it put on the wire), the provider's refusals,
// and its signed `crypto.onramp_session_updated` events applied by the real app on a real database
// (forward only, de-duplicated, each change one `onramp.session.updated`). The live environment
// has a network configured (the on-ramp takes the live path, not the sandbox's), but its RPC
// endpoint answers nothing: the test asserts nothing here asked it anything. What the chain does
// (the credit, the watcher) is in live.test.ts.

type Json = Record<string, unknown>;

const LIVE_SK = "sk_test_onrampEventsKey0123456789";
const LIVE_WHSEC = "whsec_onramp_events_secret_0123456789abcd";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const GENERIC_DETAIL =
  "The card provider did not open the on-ramp session. Try again later, or contact the operator if it persists.";

/** What the app logs (JSON lines), and a bounded wait for the line with a given message. */
function capture() {
  let text = "";
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString("utf8");
      done();
    },
  });
  const find = () =>
    text
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Json);
  return {
    stream,
    async line(msg: string): Promise<Json> {
      const deadline = Date.now() + 5_000;
      for (;;) {
        const found = find().find((l) => l.msg === msg);
        if (found) return found;
        if (Date.now() > deadline) throw new Error(`no log line "${msg}" in:\n${text}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
  };
}

const fake = new FakeCardProvider();
let rpc: Awaited<ReturnType<typeof startRpcProxy>>;
let t: TestApp;

/** A live network whose RPC endpoint errors on every call (and records it). */
function liveEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    LIVE_RPC_URL: rpc.url,
    LIVE_CHAIN_ID: "31337",
    LIVE_USDC_ADDRESS: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
    LIVE_ADAO_ADDRESS: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
    LIVE_TREASURY_ADDRESS: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
    RATE_LIMIT_LIVE: "100000",
    RATE_LIMIT_SANDBOX: "100000",
    ...extra,
  };
}

const cardEnv = () => ({
  CARD_SECRET_KEY_LIVE: LIVE_SK,
  CARD_WEBHOOK_SECRET_LIVE: LIVE_WHSEC,
  CARD_API_BASE: fake.url,
});

beforeAll(async () => {
  await fake.start();
  rpc = await startRpcProxy("http://127.0.0.1:9", async () => ({
    error: { code: -32000, message: "no chain" },
  }));
  t = await startTestApp({ ...liveEnv(), ...cardEnv() });
});

afterAll(async () => {
  await t?.close();
  await rpc?.close();
  await fake.stop();
  // Nothing in this file reads the chain.
  expect(rpc.methods).toEqual([]);
});

// ---- requests and reads ------------------------------------------------------------------------

function open(ws: CreatedWorkspace, body: Json, extra: Partial<InjectOptions> = {}, app = t) {
  return app.request({
    method: "POST",
    url: "/api/v1/onramp/session",
    ...extra,
    headers: { ...bearer(ws.liveKey), ...(extra.headers ?? {}) },
    payload: body,
  });
}

async function opened(
  ws: CreatedWorkspace,
  body: Json = { destinationCurrency: "USDC", sourceAmount: "25.00" },
) {
  const res = await open(ws, body);
  expect(res.statusCode, res.body).toBe(201);
  const session = res.json() as Json;
  return { session, provider: providerSessionOf(session.id as string) };
}

/** The provider's session made for our session `id` (its metadata names it). */
function providerSessionOf(id: string): OnrampSessionObject {
  const found = [...fake.onrampSessions.values()].find((s) => s.metadata.onrampId === id);
  if (!found) throw new Error(`no provider session for ${id}`);
  return found;
}

function deliver(event: CardEvent, secret = LIVE_WHSEC): Promise<LightMyRequestResponse> {
  const signed = fake.sign(event, secret);
  return t.request({
    method: "POST",
    url: "/api/webhooks/card",
    headers: { "content-type": "application/json", "stripe-signature": signed.header },
    payload: signed.payload,
  });
}

/** The provider moves the session, then its event is delivered (and accepted, first seen). */
async function moved(
  providerId: string,
  status: OnrampSessionObject["status"],
  facts: Parameters<FakeCardProvider["setOnrampStatus"]>[2] = {},
) {
  fake.setOnrampStatus(providerId, status, facts);
  const res = await deliver(fake.onrampUpdated(providerId, { livemode: true }));
  expect(res.statusCode, res.body).toBe(200);
  expect(res.json()).toEqual({ received: true });
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

async function listSessions(ws: CreatedWorkspace, app = t): Promise<{ sessions: Json[]; total: number }> {
  const res = await app.request({
    method: "GET",
    url: "/api/v1/onramp/sessions",
    headers: bearer(ws.liveKey),
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

async function onrampEvents(ws: CreatedWorkspace): Promise<Array<{ type: string; data: Json }>> {
  const rows = await t.database.db
    .selectFrom("outbox_events")
    .select(["event_type", "payload"])
    .where("workspace_id", "=", ws.id)
    .where("event_type", "like", "onramp.%")
    .orderBy("id")
    .execute();
  return rows.map((r) => ({ type: r.event_type, data: r.payload as Json }));
}

const statusesOf = async (ws: CreatedWorkspace) =>
  (await onrampEvents(ws)).map((e) => `${e.type}:${String(e.data.status)}`);

const fakeTxHash = (seed: string) => keccak256(toHex(seed));

// ---- creating a session --------------------------------------------------------------------------

describe("POST /api/v1/onramp/session (live, the card provider's on-ramp)", () => {
  it("makes the session at the provider with the workspace EOA locked, the client's own address, and records it", async () => {
    const ws = await createWorkspace(t);
    const before = fake.onrampCalls("create").length;
    // A client-made X-Forwarded-For is not the customer's address: TRUST_PROXY is unset.
    const res = await open(
      ws,
      { destinationCurrency: "USDC", sourceAmount: "25.00" },
      { headers: { "x-forwarded-for": "203.0.113.7" } },
    );
    expect(res.statusCode, res.body).toBe(201);
    const session = res.json() as Json;
    const calls = fake.onrampCalls("create");
    expect(calls).toHaveLength(before + 1);
    const call = calls.at(-1);
    expect(call?.secretKey).toBe(LIVE_SK);
    expect(call?.idempotencyKey).toBe(`onramp-${String(session.id)}`);
    expect(call?.form).toMatchObject({
      "wallet_addresses[ethereum]": ws.eoaAddress,
      lock_wallet_address: "true",
      customer_ip_address: "127.0.0.1",
      source_currency: "usd",
      source_amount: "25.00",
      destination_currency: "usdc",
      destination_network: "ethereum",
      "metadata[onrampId]": session.id,
    });
    expect(call?.form.destination_amount).toBeUndefined();

    const provider = providerSessionOf(session.id as string);
    expect(provider.transaction_details).toMatchObject({
      wallet_address: ws.eoaAddress,
      lock_wallet_address: true,
    });
    expect(session).toEqual({
      id: expect.stringMatching(UUID),
      provider: "card",
      network: "default",
      status: "initialized",
      clientSecret: provider.client_secret,
      redirectUrl: provider.redirect_url,
      walletAddress: ws.eoaAddress,
      walletType: "eoa",
      destinationCurrency: "USDC",
      destinationNetwork: "ethereum",
      sourceAmount: "25.00",
      destinationAmount: null,
      transactionId: null,
      creditedAmount: null,
      completedAt: null,
      createdAt: expect.stringMatching(ISO),
      updatedAt: expect.stringMatching(ISO),
    });
    expect(provider.client_secret).toMatch(new RegExp(`^${provider.id}_secret_`));
    expect(await getSession(ws, session.id as string)).toEqual(session);
    const listed = await listSessions(ws);
    expect(listed.total).toBe(1);
    const { clientSecret: _secret, ...withoutSecret } = session;
    expect(listed.sessions).toEqual([withoutSecret]);
    // Making a session is not a status change.
    expect(await onrampEvents(ws)).toEqual([]);
  });

  it("asks for an amount of ETH at the literal /onramp/session", async () => {
    const ws = await createWorkspace(t);
    const res = await t.request({
      method: "POST",
      url: "/onramp/session",
      headers: bearer(ws.liveKey),
      payload: { destinationCurrency: "ETH", destinationAmount: "0.015" },
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({
      destinationCurrency: "ETH",
      destinationAmount: "0.015",
      sourceAmount: null,
    });
    expect(fake.onrampCalls("create").at(-1)?.form).toMatchObject({
      destination_currency: "eth",
      destination_amount: "0.015",
      "wallet_addresses[ethereum]": ws.eoaAddress,
    });
    expect(fake.onrampCalls("create").at(-1)?.form.source_amount).toBeUndefined();
  });

  it("takes the customer's address from X-Forwarded-For only behind a proxy TRUST_PROXY lists", async () => {
    const proxied = await startTestApp({ ...liveEnv(), ...cardEnv(), TRUST_PROXY: "10.0.0.0/8" });
    try {
      const ws = await createWorkspace(proxied);
      const body = { destinationCurrency: "USDC" };
      const via = (remoteAddress: string) =>
        open(ws, body, { remoteAddress, headers: { "x-forwarded-for": "198.51.100.23" } }, proxied);
      expect((await via("10.1.2.3")).statusCode).toBe(201);
      expect(fake.onrampCalls("create").at(-1)?.form.customer_ip_address).toBe("198.51.100.23");
      // Not from the proxy: the header is the client's own claim.
      expect((await via("192.0.2.50")).statusCode).toBe(201);
      expect(fake.onrampCalls("create").at(-1)?.form.customer_ip_address).toBe("192.0.2.50");
      expect((await listSessions(ws, proxied)).total).toBe(2);
    } finally {
      await proxied.close();
    }
  });

  it("answers 502 with a generic detail when the provider keeps failing, logs its message, and records nothing", async () => {
    const logs = capture();
    const logged = await startTestApp({ ...liveEnv(), ...cardEnv() }, { logs: logs.stream });
    try {
      const ws = await createWorkspace(logged);
      const before = fake.onrampCalls("create").length;
      // The SDK retries a 500 twice under the same key: all three fail.
      fake.failNextOnrampCreate(3);
      const res = await open(ws, { destinationCurrency: "USDC", sourceAmount: "40.00" }, {}, logged);
      expect(res.statusCode, res.body).toBe(502);
      expect(res.json()).toEqual({ error: "Card provider error", detail: GENERIC_DETAIL });
      expect(res.body).not.toContain("fake card provider");
      const calls = fake.onrampCalls("create").slice(before);
      expect(calls).toHaveLength(3);
      expect(new Set(calls.map((c) => c.idempotencyKey)).size).toBe(1);
      expect(calls[0]?.idempotencyKey).toMatch(/^onramp-[0-9a-f-]{36}$/);
      expect(await listSessions(ws, logged)).toMatchObject({ sessions: [], total: 0 });
      const rows = await logged.database.db
        .selectFrom("onramp_sessions")
        .select("id")
        .where("workspace_id", "=", ws.id)
        .execute();
      expect(rows).toEqual([]);
      // The provider's own words are in the log, with the workspace.
      const line = await logs.line("The card provider did not open an on-ramp session");
      expect(line.workspaceId).toBe(ws.id);
      expect(JSON.stringify(line.err)).toContain(
        "The crypto on-ramp is temporarily unavailable (fake card provider).",
      );
    } finally {
      await logged.close();
    }
  });

  it("answers 502 with a generic detail on the provider's refusal, once (not retried), and records nothing", async () => {
    const logs = capture();
    const logged = await startTestApp({ ...liveEnv(), ...cardEnv() }, { logs: logs.stream });
    try {
      const ws = await createWorkspace(logged);
      const before = fake.onrampCalls("create").length;
      const message = "Crypto onramp is not available for customers in this region.";
      fake.refuseNextOnrampCreate(message, { code: "crypto_onramp_unsupported_country" });
      const res = await open(ws, { destinationCurrency: "ETH" }, {}, logged);
      expect(res.statusCode, res.body).toBe(502);
      expect(res.json()).toEqual({ error: "Card provider error", detail: GENERIC_DETAIL });
      expect(res.body).not.toContain("region");
      expect(fake.onrampCalls("create")).toHaveLength(before + 1);
      expect((await listSessions(ws, logged)).total).toBe(0);
      const line = await logs.line("The card provider did not open an on-ramp session");
      expect(JSON.stringify(line.err)).toContain(message);
    } finally {
      await logged.close();
    }
  });

  it("answers 503 when the live card provider is not configured", async () => {
    const bare = await startTestApp(liveEnv());
    try {
      const ws = await createWorkspace(bare);
      const before = fake.onrampCalls("create").length;
      const res = await open(ws, { destinationCurrency: "USDC", sourceAmount: "25.00" }, {}, bare);
      expect(res.statusCode, res.body).toBe(503);
      expect(res.json().error).toContain("CARD_SECRET_KEY_LIVE");
      expect(fake.onrampCalls("create")).toHaveLength(before);
      expect((await listSessions(ws, bare)).total).toBe(0);
    } finally {
      await bare.close();
    }
  });
});

// ---- the provider's events -----------------------------------------------------------------------

describe("POST /api/webhooks/card — crypto.onramp_session_updated", () => {
  it("moves the session forward, one onramp.session.updated per change; replays and late events change nothing", async () => {
    const ws = await createWorkspace(t);
    const { session, provider } = await opened(ws);
    const id = session.id as string;

    await moved(provider.id, "requires_payment");
    expect((await getSession(ws, id)).status).toBe("requires_payment");
    const processing = fake.onrampUpdated(fake.setOnrampStatus(provider.id, "fulfillment_processing"), {
      livemode: true,
    });
    const first = await deliver(processing);
    expect(first.json()).toEqual({ received: true });
    // The same event again (the provider retries): a duplicate, nothing new.
    const again = await deliver(processing);
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json()).toEqual({ received: true, duplicate: true });
    expect(await statusesOf(ws)).toEqual([
      "onramp.session.updated:requires_payment",
      "onramp.session.updated:fulfillment_processing",
    ]);

    const txHash = fakeTxHash(`onramp ${id}`);
    await moved(provider.id, "fulfillment_complete", {
      transactionId: txHash.toUpperCase().replace("0X", "0x"),
      destinationAmount: "24.75",
    });
    const done = await getSession(ws, id);
    expect(done).toMatchObject({
      status: "fulfillment_complete",
      transactionId: txHash,
      destinationAmount: "24.75",
      sourceAmount: "25.00",
      // No chain here: fulfilled at the provider is not credited.
      creditedAmount: null,
      completedAt: null,
    });
    // A fulfillment_processing sent before, arriving after (a new event id): ignored.
    const late = { ...processing, id: `${processing.id}_late` };
    expect((await deliver(late)).json()).toEqual({ received: true });
    expect(await getSession(ws, id)).toEqual(done);
    const events = await onrampEvents(ws);
    expect(events.map((e) => `${e.type}:${String(e.data.status)}`)).toEqual([
      "onramp.session.updated:requires_payment",
      "onramp.session.updated:fulfillment_processing",
      "onramp.session.updated:fulfillment_complete",
    ]);
    // The event is the session without its client secret.
    const { clientSecret: _secret, ...publicView } = done;
    expect(events.at(-1)?.data).toEqual(publicView);
    const outcome = await t.database.db
      .selectFrom("card_events")
      .select(["event_id", "outcome"])
      .where("event_id", "=", late.id)
      .executeTakeFirstOrThrow();
    expect(outcome.outcome).toBe("ignored: session is fulfillment_complete");
  });

  it("a rejected session ends there: one event, and a later fulfillment_complete changes nothing", async () => {
    const ws = await createWorkspace(t);
    const { session, provider } = await opened(ws, { destinationCurrency: "ETH", sourceAmount: "90.00" });
    await moved(provider.id, "rejected");
    const rejected = await getSession(ws, session.id as string);
    expect(rejected).toMatchObject({ status: "rejected", creditedAmount: null, completedAt: null });
    await moved(provider.id, "fulfillment_complete", { transactionId: fakeTxHash("after rejected") });
    await moved(provider.id, "requires_payment");
    expect(await getSession(ws, session.id as string)).toEqual(rejected);
    expect(await statusesOf(ws)).toEqual(["onramp.session.updated:rejected"]);
  });

  it("skips a status: initialized straight to fulfillment_complete is one change", async () => {
    const ws = await createWorkspace(t);
    const { session, provider } = await opened(ws);
    await moved(provider.id, "fulfillment_complete", {
      transactionId: fakeTxHash("skip"),
      destinationAmount: "25",
    });
    expect((await getSession(ws, session.id as string)).status).toBe("fulfillment_complete");
    await moved(provider.id, "requires_payment");
    expect(await statusesOf(ws)).toEqual(["onramp.session.updated:fulfillment_complete"]);
  });

  it("refuses a forged signature with 400 and changes nothing", async () => {
    const ws = await createWorkspace(t);
    const { session, provider } = await opened(ws);
    const before = await getSession(ws, session.id as string);
    fake.setOnrampStatus(provider.id, "fulfillment_complete", { transactionId: fakeTxHash("forged") });
    const event = fake.onrampUpdated(provider.id, { livemode: true });
    const forged = await deliver(event, "whsec_not_the_providers_secret_0123456789");
    expect(forged.statusCode, forged.body).toBe(400);
    expect(forged.json()).toEqual({ error: "Invalid signature" });
    expect(await getSession(ws, session.id as string)).toEqual(before);
    expect(await onrampEvents(ws)).toEqual([]);
    const claimed = await t.database.db
      .selectFrom("card_events")
      .select("event_id")
      .where("event_id", "=", event.id)
      .execute();
    expect(claimed).toEqual([]);
    // The genuine event still applies afterwards (the forgery claimed nothing).
    expect((await deliver(event)).json()).toEqual({ received: true });
    expect((await getSession(ws, session.id as string)).status).toBe("fulfillment_complete");
  });

  it("accepts and records an event for a session that is not ours, changing nothing", async () => {
    const ws = await createWorkspace(t);
    const { session, provider } = await opened(ws);
    const stranger: OnrampSessionObject = { ...structuredClone(provider), id: "cos_not_ours_0123456789" };
    stranger.status = "fulfillment_complete";
    const event = fake.onrampUpdated(stranger, { livemode: true });
    expect((await deliver(event)).json()).toEqual({ received: true });
    expect((await getSession(ws, session.id as string)).status).toBe("initialized");
    expect(await onrampEvents(ws)).toEqual([]);
    const row = await t.database.db
      .selectFrom("card_events")
      .select("outcome")
      .where("event_id", "=", event.id)
      .executeTakeFirstOrThrow();
    expect(row.outcome).toBe("unknown on-ramp session");
  });
});
