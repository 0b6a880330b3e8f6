import { sql } from "kysely";
import { createWalletClient, erc20Abi, http, parseUnits } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Devnet, startDevnet } from "../../src/devnet/chain.ts";
import { createWorkers, type Workers } from "../../src/workers.ts";
import {
  ADDRESS,
  call,
  createAgent,
  createWallet,
  expectError,
  ISO,
  type Json,
  MISSING_UUID,
  t,
  useAgentsApp,
} from "../support/agents-and-wallets.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { liveNetworkEnv } from "../support/devnet-env.ts";
import { until } from "../support/poll.ts";

// Wallets: CRUD, the list's filters and paging, wallet.balance.updated from the devnet. Agents:
// test/agents/agents.test.ts; shared helpers: support/agents-and-wallets.ts.

useAgentsApp();

describe("wallets", () => {
  let ws: CreatedWorkspace;
  let agent: Json;
  beforeAll(async () => {
    ws = await createWorkspace(t);
    agent = await createAgent(ws.testKey, { name: "Wallet owner" });
  });

  it("creates an agent wallet: 201 {walletId, address, ownerId, type, currencies, createdAt}", async () => {
    const res = await call(ws.testKey, "POST", "/api/wallets/create", {
      ownerId: agent.agentId,
      type: "agent",
      currencies: ["USDC", "ETH"],
    });
    expect(res.status, res.body).toBe(201);
    expect(res.json.success).toBe(true);
    const wallet = res.json.data;
    expect(Object.keys(wallet).sort()).toEqual(
      ["address", "createdAt", "currencies", "ownerId", "type", "walletId"].sort(),
    );
    expect(wallet.address).toMatch(ADDRESS);
    expect(wallet).toMatchObject({ ownerId: agent.agentId, type: "agent", currencies: ["USDC", "ETH"] });
    expect(typeof wallet.walletId).toBe("string");
    expect(wallet.createdAt).toMatch(ISO);
  });

  it("creates a user wallet for any owner id; every wallet gets its own address", async () => {
    const a = await createWallet(ws.testKey, { ownerId: "user_123", type: "user", currencies: ["DAI"] });
    const b = await createWallet(ws.testKey, { ownerId: "user_123", type: "user", currencies: ["DAI"] });
    expect(a.type).toBe("user");
    expect(a.ownerId).toBe("user_123");
    expect(a.address.toLowerCase()).not.toBe(b.address.toLowerCase());
  });

  it("stores the wallet's private key encrypted (v1:…), never the raw key", async () => {
    const wallet = await createWallet(ws.testKey, {
      ownerId: agent.agentId,
      type: "agent",
      currencies: ["ETH"],
    });
    const row = await t.database.db
      .selectFrom("agent_wallets")
      .select(["encrypted_private_key", "address"])
      .where("id", "=", wallet.walletId)
      .executeTakeFirstOrThrow();
    expect(row.encrypted_private_key.startsWith("v1:")).toBe(true);
    expect(row.encrypted_private_key).not.toMatch(/0x[0-9a-f]{64}/i);
    expect(row.address.toLowerCase()).toBe(wallet.address.toLowerCase());
    const decrypted = t.app.ctx.secrets.decrypt(row.encrypted_private_key) as `0x${string}`;
    expect(privateKeyToAccount(decrypted).address.toLowerCase()).toBe(wallet.address.toLowerCase());
  });

  it("reads a wallet with balances for every currency (zero for a fresh wallet)", async () => {
    const created = await createWallet(ws.testKey, {
      ownerId: agent.agentId,
      type: "agent",
      currencies: ["USDC", "DAI"],
    });
    const res = await call(ws.testKey, "GET", `/api/wallets/${created.walletId}`);
    expect(res.status, res.body).toBe(200);
    expect(res.json.success).toBe(true);
    expect(res.json.data).toMatchObject(created);
    expect(Object.keys(res.json.data.balances).sort()).toEqual(["DAI", "USDC"]);
    expect(Number(res.json.data.balances.USDC)).toBe(0);
    expect(Number(res.json.data.balances.DAI)).toBe(0);
  });

  it("balance by currency: {walletId, currency, balance, updatedAt}; faucet credits show up", async () => {
    const wallet = await createWallet(ws.testKey, {
      ownerId: agent.agentId,
      type: "agent",
      currencies: ["USDC"],
    });
    const faucet = await call(ws.testKey, "POST", "/api/v1/sandbox/faucet", {
      walletId: wallet.walletId,
      tokenSymbol: "USDC",
      amount: "12.5",
    });
    expect(faucet.status, faucet.body).toBe(200);
    // A malformed walletId of UUID length is a 404, never a database error.
    const malformed = await call(ws.testKey, "POST", "/api/v1/sandbox/faucet", {
      walletId: "-".repeat(36),
      tokenSymbol: "USDC",
      amount: "1",
    });
    expect(malformed.status, malformed.body).toBe(404);
    const res = await call(ws.testKey, "GET", `/api/wallets/${wallet.walletId}/balance/USDC`);
    expect(res.status, res.body).toBe(200);
    expect(res.json.success).toBe(true);
    expect(Object.keys(res.json.data).sort()).toEqual([
      "balance",
      "currency",
      "network",
      "updatedAt",
      "walletId",
    ]);
    expect(res.json.data).toMatchObject({
      walletId: wallet.walletId,
      currency: "USDC",
      network: "sandbox-a",
      balance: "12.50",
    });
    expect(res.json.data.updatedAt).toMatch(ISO);
    const namedA = await call(
      ws.testKey,
      "GET",
      `/api/wallets/${wallet.walletId}/balance/USDC?network=sandbox-a`,
    );
    expect(namedA.json.data).toMatchObject({ network: "sandbox-a", balance: "12.50" });
    const unknown = await call(
      ws.testKey,
      "GET",
      `/api/wallets/${wallet.walletId}/balance/USDC?network=base`,
    );
    expect({ status: unknown.status, body: unknown.json }).toEqual({
      status: 400,
      body: { success: false, error: "Unknown network", network: "base" },
    });
    // The faucet on sandbox-b credits that network only.
    const onB = await call(ws.testKey, "POST", "/api/v1/sandbox/faucet", {
      walletId: wallet.walletId,
      tokenSymbol: "USDC",
      amount: "3",
      network: "sandbox-b",
    });
    expect(onB.json).toMatchObject({ network: "sandbox-b", balance: "3.00" });
    const named = async (network: string) =>
      (await call(ws.testKey, "GET", `/api/wallets/${wallet.walletId}/balance/USDC?network=${network}`)).json
        .data;
    expect(await named("sandbox-b")).toMatchObject({ network: "sandbox-b", balance: "3.00" });
    // Each network's balances under networks (D22); balances stays the default network's.
    const full = await call(ws.testKey, "GET", `/api/wallets/${wallet.walletId}`);
    expect(full.json.data.balances).toEqual({ USDC: "12.50" });
    expect(full.json.data.networks).toEqual({
      "sandbox-a": { USDC: "12.50" },
      "sandbox-b": { USDC: "3.00" },
    });
  });

  it("balance of a currency the wallet lacks → 400; of an unknown currency → 400; unknown wallet → 404", async () => {
    const wallet = await createWallet(ws.testKey, {
      ownerId: agent.agentId,
      type: "agent",
      currencies: ["USDC"],
    });
    expectError(await call(ws.testKey, "GET", `/api/wallets/${wallet.walletId}/balance/DAI`), 400, /DAI/);
    expectError(
      await call(ws.testKey, "GET", `/api/wallets/${wallet.walletId}/balance/BTC`),
      400,
      /currency/i,
    );
    expectError(await call(ws.testKey, "GET", `/api/wallets/${MISSING_UUID}/balance/USDC`), 404);
    expectError(await call(ws.testKey, "GET", `/api/wallets/${MISSING_UUID}`), 404);
    expectError(await call(ws.testKey, "GET", "/api/wallets/nope"), 404);
  });

  it("adds a currency: returns the wallet with it; adding one it has → 200 unchanged", async () => {
    const wallet = await createWallet(ws.testKey, {
      ownerId: agent.agentId,
      type: "agent",
      currencies: ["USDC"],
    });
    const added = await call(ws.testKey, "POST", `/api/wallets/${wallet.walletId}/currencies`, {
      currency: "DAI",
    });
    expect(added.status, added.body).toBe(200);
    expect(added.json.success).toBe(true);
    expect(added.json.data).toMatchObject({
      walletId: wallet.walletId,
      address: wallet.address,
      ownerId: wallet.ownerId,
      type: "agent",
      currencies: ["USDC", "DAI"],
      createdAt: wallet.createdAt,
    });
    expect(Object.keys(added.json.data.balances).sort()).toEqual(["DAI", "USDC"]);

    const again = await call(ws.testKey, "POST", `/api/wallets/${wallet.walletId}/currencies`, {
      currency: "DAI",
    });
    expect(again.status, again.body).toBe(200);
    expect(again.json.data.currencies).toEqual(["USDC", "DAI"]);
    expect(again.json.data).toEqual(added.json.data);

    const balance = await call(ws.testKey, "GET", `/api/wallets/${wallet.walletId}/balance/DAI`);
    expect(balance.status, balance.body).toBe(200);

    expectError(
      await call(ws.testKey, "POST", `/api/wallets/${wallet.walletId}/currencies`, { currency: "BTC" }),
      400,
      /currency/,
    );
    expectError(
      await call(ws.testKey, "POST", `/api/wallets/${wallet.walletId}/currencies`, {}),
      400,
      /currency/,
    );
    expectError(
      await call(ws.testKey, "POST", `/api/wallets/${MISSING_UUID}/currencies`, { currency: "DAI" }),
      404,
    );
  });

  it("validates create: type, currencies (unknown, empty, duplicate, not an array), ownerId", async () => {
    const base = { ownerId: agent.agentId, type: "agent", currencies: ["USDC"] };
    const post = (body: Json) => call(ws.testKey, "POST", "/api/wallets/create", body);
    expectError(await post({ ...base, type: "robot" }), 400, /type/);
    expectError(await post({ ownerId: "u1", currencies: ["USDC"] }), 400, /type/);
    expectError(await post({ ...base, currencies: ["BTC"] }), 400, /currencies/);
    expectError(await post({ ...base, currencies: ["usdc"] }), 400, /currencies/);
    expectError(await post({ ...base, currencies: [] }), 400, /currencies/);
    expectError(await post({ ...base, currencies: "USDC" }), 400, /currencies/);
    expectError(await post({ ownerId: agent.agentId, type: "agent" }), 400, /currencies/);
    expectError(await post({ ...base, currencies: ["USDC", "USDC"] }), 400, /currencies/);
    expectError(await post({ type: "user", currencies: ["USDC"] }), 400, /ownerId/);
    // All rejected: nothing was created.
    const list = await call(ws.testKey, "GET", `/api/wallets?ownerId=${agent.agentId}&currency=USDC`);
    for (const item of list.json.data.items) expect(item.currencies).not.toContain("BTC");
  });

  it("an agent wallet's owner must be an agent of this workspace and environment → else 400", async () => {
    const post = (key: string, ownerId: string) =>
      call(key, "POST", "/api/wallets/create", { ownerId, type: "agent", currencies: ["USDC"] });
    expectError(await post(ws.testKey, MISSING_UUID), 400, /ownerId/);
    expectError(await post(ws.testKey, "not-an-agent"), 400, /ownerId/);
    const other = await createWorkspace(t);
    const foreign = await createAgent(other.testKey, { name: "Foreign" });
    expectError(await post(ws.testKey, foreign.agentId), 400, /ownerId/);
    // The same workspace's sandbox agent is not an agent of the live environment.
    expectError(await post(ws.liveKey, agent.agentId), 400, /ownerId/);
    // A deleted agent is no longer an owner.
    const gone = await createAgent(ws.testKey, { name: "Gone" });
    await call(ws.testKey, "DELETE", `/api/agents/${gone.agentId}`);
    expectError(await post(ws.testKey, gone.agentId), 400, /ownerId/);
  });
});

describe("wallet list filters and paging", () => {
  let ws: CreatedWorkspace;
  let a1: Json;
  let a2: Json;
  const wallets: Json[] = [];

  beforeAll(async () => {
    ws = await createWorkspace(t);
    a1 = await createAgent(ws.testKey, { name: "A1" });
    a2 = await createAgent(ws.testKey, { name: "A2" });
    wallets.push(
      await createWallet(ws.testKey, { ownerId: a1.agentId, type: "agent", currencies: ["USDC"] }),
    );
    wallets.push(
      await createWallet(ws.testKey, { ownerId: a1.agentId, type: "agent", currencies: ["ETH", "DAI"] }),
    );
    wallets.push(await createWallet(ws.testKey, { ownerId: a2.agentId, type: "agent", currencies: ["DAI"] }));
    wallets.push(
      await createWallet(ws.testKey, { ownerId: "user-9", type: "user", currencies: ["USDC", "ETH"] }),
    );
    wallets.push(await createWallet(ws.testKey, { ownerId: "user-9", type: "user", currencies: ["USDC"] }));
  });

  const ids = (res: { json: Json }) => res.json.data.items.map((w: Json) => w.walletId);

  it("lists every wallet newest first with balances and pagination", async () => {
    const res = await call(ws.testKey, "GET", "/api/wallets");
    expect(res.status, res.body).toBe(200);
    expect(res.json.success).toBe(true);
    expect(ids(res)).toEqual(wallets.map((w) => w.walletId).reverse());
    expect(res.json.data.pagination).toEqual({ total: 5, page: 1, limit: 20, totalPages: 1 });
    for (const item of res.json.data.items) {
      expect(item.address).toMatch(ADDRESS);
      expect(Object.keys(item.balances).sort()).toEqual([...item.currencies].sort());
    }
  });

  it("filters by ownerId, type and currency, alone and combined", async () => {
    const [w0, w1, w2, w3, w4] = wallets.map((w) => w.walletId);
    const get = (q: string) => call(ws.testKey, "GET", `/api/wallets?${q}`);
    expect(ids(await get(`ownerId=${a1.agentId}`))).toEqual([w1, w0]);
    expect(ids(await get("type=user"))).toEqual([w4, w3]);
    expect(ids(await get("type=agent"))).toEqual([w2, w1, w0]);
    expect(ids(await get("currency=DAI"))).toEqual([w2, w1]);
    expect(ids(await get("currency=USDC"))).toEqual([w4, w3, w0]);
    expect(ids(await get("currency=ETH&type=user"))).toEqual([w3]);
    expect(ids(await get(`ownerId=${a1.agentId}&currency=USDC`))).toEqual([w0]);
    const none = await get("ownerId=nobody");
    expect(none.json.data.items).toEqual([]);
    expect(none.json.data.pagination.total).toBe(0);
    const counted = await get("currency=USDC");
    expect(counted.json.data.pagination.total).toBe(3);
  });

  it("rejects an unknown type or currency filter and bad limits with 400", async () => {
    expectError(await call(ws.testKey, "GET", "/api/wallets?type=robot"), 400, /type/);
    expectError(await call(ws.testKey, "GET", "/api/wallets?currency=BTC"), 400, /currency/);
    expectError(await call(ws.testKey, "GET", "/api/wallets?limit=0"), 400, /limit/);
    expectError(await call(ws.testKey, "GET", "/api/wallets?limit=101"), 400, /limit/);
  });

  it("pages: the short last page and a page beyond the end keep the total", async () => {
    const p3 = await call(ws.testKey, "GET", "/api/wallets?limit=2&page=3");
    expect(p3.json.data.items.map((w: Json) => w.walletId)).toEqual([wallets[0]?.walletId]);
    expect(p3.json.data.pagination).toEqual({ total: 5, page: 3, limit: 2, totalPages: 3 });
    const p4 = await call(ws.testKey, "GET", "/api/wallets?limit=2&page=4");
    expect(p4.status, p4.body).toBe(200);
    expect(p4.json.data.items).toEqual([]);
    expect(p4.json.data.pagination).toEqual({ total: 5, page: 4, limit: 2, totalPages: 3 });
  });
});

// ---- isolation -----------------------------------------------------------------------------------

describe("wallet.balance.updated from a real USDC transfer on the devnet", () => {
  let devnet: Devnet;
  let live: TestApp;
  let workers: Workers | undefined;

  beforeAll(async () => {
    devnet = await startDevnet();
    live = await startTestApp(liveNetworkEnv(devnet));
  }, 120_000);

  afterAll(async () => {
    await workers?.stop();
    await live?.close();
    await devnet?.stop();
  });

  it("a transfer to a live agent wallet emits previousBalance 0.00 and the new balance", async () => {
    const ws = await createWorkspace(live);
    const req = async (method: "GET" | "POST", url: string, payload?: Json) => {
      const res = await live.request({
        method,
        url,
        headers: bearer(ws.liveKey),
        ...(payload ? { payload } : {}),
      });
      return { status: res.statusCode, json: res.json() as Json, body: res.body };
    };
    const agentRes = await req("POST", "/api/agents/create", { name: "Live agent" });
    expect(agentRes.status, agentRes.body).toBe(201);
    const walletRes = await req("POST", "/api/wallets/create", {
      ownerId: agentRes.json.data.agentId,
      type: "agent",
      currencies: ["USDC"],
    });
    expect(walletRes.status, walletRes.body).toBe(201);
    const wallet = walletRes.json.data as Json;

    workers = createWorkers(live.app, { dispatcher: { pollIntervalMs: 50 } });
    workers.start();
    // The watcher sets its cursor before the transfer (polled): it scans from there on.
    await until(
      "the live watcher's cursor",
      () =>
        live.database.db
          .selectFrom("chain_cursors")
          .select("block_number")
          .where("environment", "=", "live")
          .executeTakeFirst(),
      (row) => row !== undefined,
      30_000,
    );

    const payer = createWalletClient({
      account: privateKeyToAccount(devnet.accounts.payer.privateKey),
      chain: devnet.chain,
      transport: http(devnet.rpcUrl),
    });
    await payer.writeContract({
      address: devnet.tokens.USDC,
      abi: erc20Abi,
      functionName: "transfer",
      args: [wallet.address, parseUnits("7.25", 6)],
      chain: devnet.chain,
      account: payer.account ?? null,
    });

    const deadline = Date.now() + 30_000;
    let events: Json[] = [];
    while (Date.now() < deadline) {
      const rows = await live.database.db
        .selectFrom("outbox_events")
        .select(["payload", "environment", "workspace_id"])
        .where("event_type", "=", "wallet.balance.updated")
        .where(sql<boolean>`payload->>'walletId' = ${wallet.walletId}`)
        .execute();
      events = rows as Json[];
      if (events.length > 0) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(events, "no wallet.balance.updated event").toHaveLength(1);
    expect(events[0]?.environment).toBe("live");
    expect(events[0]?.workspace_id).toBe(ws.id);
    expect(events[0]?.payload).toEqual({
      walletId: wallet.walletId,
      address: wallet.address,
      network: "default",
      currency: "USDC",
      balance: "7.25",
      previousBalance: "0.00",
      updatedAt: expect.stringMatching(ISO),
    });

    const balance = await req("GET", `/api/wallets/${wallet.walletId}/balance/USDC`);
    expect(balance.status, balance.body).toBe(200);
    expect(balance.json.data.balance).toBe("7.25");
    const read = await req("GET", `/api/wallets/${wallet.walletId}`);
    expect(read.json.data.balances).toEqual({ USDC: "7.25" });
  }, 60_000);
});
