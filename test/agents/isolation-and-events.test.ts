import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebhookDispatcher } from "../../src/modules/webhooks/dispatcher.ts";
import {
  call,
  createAgent,
  createWallet,
  expectError,
  ISO,
  type Json,
  t,
  useAgentsApp,
} from "../support/agents-and-wallets.ts";
import { bearer, type CreatedWorkspace, createWorkspace } from "../support/app.ts";
import { elapse } from "../support/poll.ts";
import { WebhookReceiver } from "../support/receiver.ts";

// Agents and wallets across tenants and environments, and their events delivered to a webhook
// receiver; shared helpers: support/agents-and-wallets.ts.

useAgentsApp();

describe("tenant and environment isolation", () => {
  it("another workspace's agents and wallets are invisible: 404 {success: false, error}, not listed", async () => {
    const owner = await createWorkspace(t);
    const intruder = await createWorkspace(t);
    const agent = await createAgent(owner.testKey, { name: "Private agent" });
    const wallet = await createWallet(owner.testKey, {
      ownerId: agent.agentId,
      type: "agent",
      currencies: ["USDC"],
    });

    expectError(await call(intruder.testKey, "GET", `/api/agents/${agent.agentId}`), 404);
    expectError(
      await call(intruder.testKey, "PATCH", `/api/agents/${agent.agentId}`, { name: "pwned" }),
      404,
    );
    expectError(await call(intruder.testKey, "DELETE", `/api/agents/${agent.agentId}`), 404);
    expectError(await call(intruder.testKey, "GET", `/api/wallets/${wallet.walletId}`), 404);
    expectError(await call(intruder.testKey, "GET", `/api/wallets/${wallet.walletId}/balance/USDC`), 404);
    expectError(
      await call(intruder.testKey, "POST", `/api/wallets/${wallet.walletId}/currencies`, { currency: "DAI" }),
      404,
    );
    const faucet = await call(intruder.testKey, "POST", "/api/v1/sandbox/faucet", {
      walletId: wallet.walletId,
      tokenSymbol: "USDC",
      amount: "1",
    });
    expect(faucet.status, faucet.body).toBe(404);

    const agents = await call(intruder.testKey, "GET", "/api/agents");
    expect(agents.json.data.items).toEqual([]);
    expect(agents.json.data.pagination.total).toBe(0);
    const wallets = await call(intruder.testKey, "GET", `/api/wallets?ownerId=${agent.agentId}`);
    expect(wallets.json.data.items).toEqual([]);

    // Nothing changed for the owner.
    const still = await call(owner.testKey, "GET", `/api/agents/${agent.agentId}`);
    expect(still.json.data.name).toBe("Private agent");
    const w = await call(owner.testKey, "GET", `/api/wallets/${wallet.walletId}`);
    expect(w.json.data.currencies).toEqual(["USDC"]);
  });

  it("the live key does not see sandbox records, and the other way round", async () => {
    const ws = await createWorkspace(t);
    const agent = await createAgent(ws.testKey, { name: "Sandbox only" });
    const wallet = await createWallet(ws.testKey, { ownerId: "u-1", type: "user", currencies: ["USDC"] });

    expectError(await call(ws.liveKey, "GET", `/api/agents/${agent.agentId}`), 404);
    expectError(await call(ws.liveKey, "PATCH", `/api/agents/${agent.agentId}`, { name: "x" }), 404);
    expectError(await call(ws.liveKey, "DELETE", `/api/agents/${agent.agentId}`), 404);
    expectError(await call(ws.liveKey, "GET", `/api/wallets/${wallet.walletId}`), 404);
    const liveAgents = await call(ws.liveKey, "GET", "/api/agents");
    expect(liveAgents.status, liveAgents.body).toBe(200);
    expect(liveAgents.json.data.items).toEqual([]);
    expect(liveAgents.json.data.pagination.total).toBe(0);
    const liveWallets = await call(ws.liveKey, "GET", "/api/wallets");
    expect(liveWallets.status, liveWallets.body).toBe(200);
    expect(liveWallets.json.data.pagination.total).toBe(0);

    const liveAgent = await createAgent(ws.liveKey, { name: "Live only" });
    expectError(await call(ws.testKey, "GET", `/api/agents/${liveAgent.agentId}`), 404);
    const sandboxAgents = await call(ws.testKey, "GET", "/api/agents");
    expect(sandboxAgents.json.data.items.map((a: Json) => a.agentId)).toEqual([agent.agentId]);
  });
});

// ---- events (sandbox) ----------------------------------------------------------------------------

describe("agent and wallet events delivered to a webhook receiver", () => {
  let receiver: WebhookReceiver;
  let dispatcher: WebhookDispatcher;
  let ws: CreatedWorkspace;

  beforeAll(async () => {
    receiver = new WebhookReceiver();
    await receiver.start();
    ws = await createWorkspace(t);
    const reg = await t.request({
      method: "POST",
      url: "/api/v1/webhooks",
      headers: bearer(ws.testKey),
      payload: { url: receiver.url, events: ["*"] },
    });
    expect(reg.statusCode, reg.body).toBe(201);
    dispatcher = new WebhookDispatcher(t.app.ctx, { pollIntervalMs: 50 });
    dispatcher.start();
  });

  afterAll(async () => {
    await dispatcher?.stop();
    await receiver?.stop();
  });

  const ofEvent =
    (event: string, match: (data: Json) => boolean = () => true) =>
    (r: { json: Json }) =>
      r.json.event === event && match((r.json.data ?? {}) as Json);

  it("agent.created, agent.updated (exact body) and agent.deleted", async () => {
    const agent = await createAgent(ws.testKey, {
      name: "Evented",
      description: "first",
      metadata: { k: "v" },
    });
    const [created] = await receiver.waitFor(
      1,
      ofEvent("agent.created", (d) => d.agentId === agent.agentId),
    );
    expect(created?.headers["x-service-event"]).toBe("agent.created");
    expect(created?.json.data).toMatchObject({ agentId: agent.agentId, name: "Evented" });

    const updated = await call(ws.testKey, "PATCH", `/api/agents/${agent.agentId}`, {
      name: "Evented 2",
      metadata: { k: "w" },
    });
    expect(updated.status, updated.body).toBe(200);
    const [upd] = await receiver.waitFor(
      1,
      ofEvent("agent.updated", (d) => d.agentId === agent.agentId),
    );
    expect(upd?.json).toEqual({
      event: "agent.updated",
      data: {
        agentId: agent.agentId,
        name: "Evented 2",
        description: "first",
        metadata: { k: "w" },
        updatedAt: updated.json.data.updatedAt,
      },
    });
    expect(upd?.headers["x-service-event"]).toBe("agent.updated");

    await call(ws.testKey, "DELETE", `/api/agents/${agent.agentId}`);
    const [deleted] = await receiver.waitFor(
      1,
      ofEvent("agent.deleted", (d) => d.agentId === agent.agentId),
    );
    expect(deleted?.json.event).toBe("agent.deleted");
    expect(deleted?.json.data).toMatchObject({ agentId: agent.agentId });
  });

  it("wallet.created, wallet.currency.added (once: re-adding emits nothing)", async () => {
    const wallet = await createWallet(ws.testKey, { ownerId: "user-ev", type: "user", currencies: ["USDC"] });
    const [created] = await receiver.waitFor(
      1,
      ofEvent("wallet.created", (d) => d.walletId === wallet.walletId),
    );
    expect(created?.json.data).toMatchObject({
      walletId: wallet.walletId,
      address: wallet.address,
      ownerId: "user-ev",
      type: "user",
      currencies: ["USDC"],
    });

    await call(ws.testKey, "POST", `/api/wallets/${wallet.walletId}/currencies`, { currency: "ETH" });
    const again = await call(ws.testKey, "POST", `/api/wallets/${wallet.walletId}/currencies`, {
      currency: "ETH",
    });
    expect(again.status, again.body).toBe(200);
    const [added] = await receiver.waitFor(
      1,
      ofEvent("wallet.currency.added", (d) => d.walletId === wallet.walletId),
    );
    expect(added?.json.data).toMatchObject({ walletId: wallet.walletId, currencies: ["USDC", "ETH"] });

    // Flush: an event written after the re-add is delivered; by then a second currency.added would be too.
    const marker = await createAgent(ws.testKey, { name: "marker" });
    await receiver.waitFor(
      1,
      ofEvent("agent.created", (d) => d.agentId === marker.agentId),
    );
    // A fixed wait on purpose: after the marker, time for a duplicate event to show, were there one.
    await elapse(300);
    const addedEvents = receiver.received.filter(
      ofEvent("wallet.currency.added", (d) => d.walletId === wallet.walletId),
    );
    expect(addedEvents).toHaveLength(1);
    const outbox = await t.database.db
      .selectFrom("outbox_events")
      .select(["payload"])
      .where("event_type", "=", "wallet.currency.added")
      .where(sql<boolean>`payload->>'walletId' = ${wallet.walletId}`)
      .execute();
    expect(outbox).toHaveLength(1);
  });

  it("wallet.balance.updated from the sandbox faucet: {walletId, address, network, currency, balance, previousBalance, updatedAt}", async () => {
    const wallet = await createWallet(ws.testKey, {
      ownerId: "user-bal",
      type: "user",
      currencies: ["USDC"],
    });
    const f1 = await call(ws.testKey, "POST", "/api/v1/sandbox/faucet", {
      walletId: wallet.walletId,
      tokenSymbol: "USDC",
      amount: "10",
    });
    expect(f1.status, f1.body).toBe(200);
    expect(f1.json.balance).toBe("10.00");
    const [first] = await receiver.waitFor(
      1,
      ofEvent("wallet.balance.updated", (d) => d.walletId === wallet.walletId),
    );
    expect(first?.json).toEqual({
      event: "wallet.balance.updated",
      data: {
        walletId: wallet.walletId,
        address: wallet.address,
        network: "sandbox-a",
        currency: "USDC",
        balance: "10.00",
        previousBalance: "0.00",
        updatedAt: expect.stringMatching(ISO),
      },
    });

    await call(ws.testKey, "POST", "/api/v1/sandbox/faucet", {
      walletId: wallet.walletId,
      tokenSymbol: "USDC",
      amount: "5",
    });
    const both = await receiver.waitFor(
      2,
      ofEvent("wallet.balance.updated", (d) => d.walletId === wallet.walletId),
    );
    const second = both.find((r) => (r.json.data as Json).balance !== "10.00");
    expect(second?.json.data).toMatchObject({ balance: "15.00", previousBalance: "10.00", currency: "USDC" });

    // A currency the wallet does not hold → 400, no event.
    const bad = await call(ws.testKey, "POST", "/api/v1/sandbox/faucet", {
      walletId: wallet.walletId,
      tokenSymbol: "DAI",
      amount: "1",
    });
    expect(bad.status, bad.body).toBe(400);
    const balance = await call(ws.testKey, "GET", `/api/wallets/${wallet.walletId}/balance/USDC`);
    expect(balance.json.data.balance).toBe("15.00");
  });

  it("another workspace's receiver gets none of these events", async () => {
    const otherReceiver = new WebhookReceiver();
    await otherReceiver.start();
    try {
      const other = await createWorkspace(t);
      const reg = await t.request({
        method: "POST",
        url: "/api/v1/webhooks",
        headers: bearer(other.testKey),
        payload: { url: otherReceiver.url, events: ["*"] },
      });
      expect(reg.statusCode, reg.body).toBe(201);
      const agent = await createAgent(ws.testKey, { name: "Not yours" });
      await receiver.waitFor(
        1,
        ofEvent("agent.created", (d) => d.agentId === agent.agentId),
      );
      const mine = await createAgent(other.testKey, { name: "Yours" });
      await otherReceiver.waitFor(
        1,
        ofEvent("agent.created", (d) => d.agentId === mine.agentId),
      );
      expect(
        otherReceiver.received.filter(ofEvent("agent.created", (d) => d.agentId === agent.agentId)),
      ).toEqual([]);
    } finally {
      await otherReceiver.stop();
    }
  });
});

// ---- query plans (PostgreSQL only) ----------------------------------------------------------------
