import { sql } from "kysely";
import { createWalletClient, erc20Abi, http, parseUnits } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Devnet, startDevnet } from "../../src/devnet/chain.ts";
import { WebhookDispatcher } from "../../src/modules/webhooks/dispatcher.ts";
import { createWorkers, type Workers } from "../../src/workers.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { liveNetworkEnv } from "../support/devnet-env.ts";
import { WebhookReceiver } from "../support/receiver.ts";

// The agents and wallets families (parts 2, 4.16, 4.17, 6; D8, D13): {success, data} envelopes,
// {success: false, error} errors, validation, paging, search, tenant and environment isolation,
// key encryption at rest, and the agent.* / wallet.* events as a webhook receiver gets them.

// biome-ignore lint/suspicious/noExplicitAny: response bodies are read field by field and asserted
type Json = Record<string, any>;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const MISSING_UUID = "00000000-0000-4000-8000-000000000000";

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp({ RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" });
}, 60_000);

afterAll(async () => {
  await t?.close();
});

async function call(
  key: string,
  method: "GET" | "POST" | "PATCH" | "DELETE",
  url: string,
  payload?: unknown,
) {
  const res = await t.request({
    method,
    url,
    headers: bearer(key),
    ...(payload !== undefined ? { payload: payload as Json } : {}),
  });
  let json: Json = {};
  try {
    json = res.json();
  } catch {}
  return { status: res.statusCode, json, body: res.body, headers: res.headers };
}

async function createAgent(key: string, body: Json) {
  const res = await call(key, "POST", "/api/agents/create", body);
  expect(res.status, res.body).toBe(201);
  return res.json.data as Json;
}

async function createWallet(key: string, body: Json) {
  const res = await call(key, "POST", "/api/wallets/create", body);
  expect(res.status, res.body).toBe(201);
  return res.json.data as Json;
}

function expectError(res: { status: number; json: Json; body: string }, status: number, field?: RegExp) {
  expect(res.status, res.body).toBe(status);
  expect(res.json.success).toBe(false);
  expect(typeof res.json.error).toBe("string");
  expect(res.json.error.length).toBeGreaterThan(0);
  if (field) expect(res.json.error).toMatch(field);
  expect(res.json).not.toHaveProperty("data");
}

// ---- agents ------------------------------------------------------------------------------------

describe("agents", () => {
  let ws: CreatedWorkspace;
  beforeAll(async () => {
    ws = await createWorkspace(t);
  });

  it("creates an agent: 201 {success, data: Agent}", async () => {
    const res = await call(ws.testKey, "POST", "/api/agents/create", {
      name: "Research bot",
      description: "Finds things",
      metadata: { team: "growth", tier: 2 },
    });
    expect(res.status, res.body).toBe(201);
    expect(res.headers["content-type"]).toMatch(/application\/json/);
    expect(res.json.success).toBe(true);
    const agent = res.json.data;
    expect(agent).toMatchObject({
      name: "Research bot",
      description: "Finds things",
      metadata: { team: "growth", tier: 2 },
    });
    expect(typeof agent.agentId).toBe("string");
    expect(agent.createdAt).toMatch(ISO);
    expect(agent).not.toHaveProperty("updatedAt");
  });

  it("reads an agent back by id", async () => {
    const created = await createAgent(ws.testKey, { name: "Reader" });
    const res = await call(ws.testKey, "GET", `/api/agents/${created.agentId}`);
    expect(res.status, res.body).toBe(200);
    expect(res.json).toEqual({ success: true, data: created });
    // Absent optional fields (D13): description null, metadata {}.
    expect(res.json.data.description).toBeNull();
    expect(res.json.data.metadata).toEqual({});
  });

  it("updates an agent: fields change, updatedAt appears, untouched fields stay", async () => {
    const created = await createAgent(ws.testKey, { name: "Before", description: "d1", metadata: { a: 1 } });
    const res = await call(ws.testKey, "PATCH", `/api/agents/${created.agentId}`, { name: "After" });
    expect(res.status, res.body).toBe(200);
    expect(res.json.success).toBe(true);
    expect(res.json.data).toMatchObject({
      agentId: created.agentId,
      name: "After",
      description: "d1",
      metadata: { a: 1 },
      createdAt: created.createdAt,
    });
    expect(res.json.data.updatedAt).toMatch(ISO);
    expect(Date.parse(res.json.data.updatedAt)).toBeGreaterThanOrEqual(Date.parse(created.createdAt));
    const read = await call(ws.testKey, "GET", `/api/agents/${created.agentId}`);
    expect(read.json.data).toEqual(res.json.data);

    const meta = await call(ws.testKey, "PATCH", `/api/agents/${created.agentId}`, {
      description: "d2",
      metadata: { b: 2 },
    });
    expect(meta.status, meta.body).toBe(200);
    expect(meta.json.data).toMatchObject({ name: "After", description: "d2", metadata: { b: 2 } });
  });

  it("deletes an agent: {agentId, deleted: true}; afterwards it is gone from get, update, list", async () => {
    const created = await createAgent(ws.testKey, { name: "Doomed agent zzqx" });
    const res = await call(ws.testKey, "DELETE", `/api/agents/${created.agentId}`);
    expect(res.status, res.body).toBe(200);
    expect(res.json).toEqual({ success: true, data: { agentId: created.agentId, deleted: true } });
    expectError(await call(ws.testKey, "GET", `/api/agents/${created.agentId}`), 404);
    expectError(await call(ws.testKey, "PATCH", `/api/agents/${created.agentId}`, { name: "x" }), 404);
    expectError(await call(ws.testKey, "DELETE", `/api/agents/${created.agentId}`), 404);
    const list = await call(ws.testKey, "GET", "/api/agents?search=zzqx");
    expect(list.json.data.items).toEqual([]);
    expect(list.json.data.pagination.total).toBe(0);
  });

  it("unknown or malformed agent ids → 404 {success: false, error}", async () => {
    expectError(await call(ws.testKey, "GET", `/api/agents/${MISSING_UUID}`), 404);
    expectError(await call(ws.testKey, "GET", "/api/agents/not-a-uuid"), 404);
    expectError(await call(ws.testKey, "PATCH", `/api/agents/${MISSING_UUID}`, { name: "n" }), 404);
    expectError(await call(ws.testKey, "DELETE", `/api/agents/${MISSING_UUID}`), 404);
  });

  it("rejects a missing, empty or over-long name with 400 naming the field", async () => {
    expectError(await call(ws.testKey, "POST", "/api/agents/create", {}), 400, /name/);
    expectError(
      await call(ws.testKey, "POST", "/api/agents/create", { description: "no name" }),
      400,
      /name/,
    );
    expectError(await call(ws.testKey, "POST", "/api/agents/create", { name: "" }), 400, /name/);
    expectError(await call(ws.testKey, "POST", "/api/agents/create", { name: 42 }), 400, /name/);
    expectError(await call(ws.testKey, "POST", "/api/agents/create", { name: "x".repeat(201) }), 400, /name/);
    // 200 characters is the upper bound and is accepted.
    const ok = await call(ws.testKey, "POST", "/api/agents/create", { name: "y".repeat(200) });
    expect(ok.status, ok.body).toBe(201);
    expect(ok.json.data.name).toBe("y".repeat(200));
    // Update validates the same way.
    expectError(
      await call(ws.testKey, "PATCH", `/api/agents/${ok.json.data.agentId}`, { name: "x".repeat(201) }),
      400,
      /name/,
    );
    expectError(
      await call(ws.testKey, "PATCH", `/api/agents/${ok.json.data.agentId}`, { name: "" }),
      400,
      /name/,
    );
  });

  it("rejects metadata that is not an object", async () => {
    expectError(
      await call(ws.testKey, "POST", "/api/agents/create", { name: "m", metadata: "nope" }),
      400,
      /metadata/,
    );
    expectError(
      await call(ws.testKey, "POST", "/api/agents/create", { name: "m", metadata: [1, 2] }),
      400,
      /metadata/,
    );
  });

  it("requires the API key", async () => {
    const res = await t.request({ method: "GET", url: "/api/agents" });
    expect(res.statusCode).toBe(401);
    expect(res.json().success).toBe(false);
    expect(typeof res.json().error).toBe("string");
  });
});

describe("agent list: paging, limits and search", () => {
  let ws: CreatedWorkspace;
  const names: string[] = [];

  beforeAll(async () => {
    ws = await createWorkspace(t);
    for (let i = 0; i < 7; i++) {
      const agent = await createAgent(ws.testKey, {
        name: `Pager ${i}`,
        description: i % 2 ? "odd one" : null,
      });
      names.push(agent.name);
    }
  });

  it("defaults to page 1, limit 20, newest first, with pagination {total, page, limit, totalPages}", async () => {
    const res = await call(ws.testKey, "GET", "/api/agents");
    expect(res.status, res.body).toBe(200);
    expect(res.json.success).toBe(true);
    expect(res.json.data.pagination).toEqual({ total: 7, page: 1, limit: 20, totalPages: 1 });
    expect(res.json.data.items.map((a: Json) => a.name)).toEqual([...names].reverse());
    for (const item of res.json.data.items) {
      expect(typeof item.agentId).toBe("string");
      expect(item.createdAt).toMatch(ISO);
    }
  });

  it("pages through: full pages, the short last page, and a page beyond the end", async () => {
    const p1 = await call(ws.testKey, "GET", "/api/agents?limit=3&page=1");
    const p2 = await call(ws.testKey, "GET", "/api/agents?limit=3&page=2");
    const p3 = await call(ws.testKey, "GET", "/api/agents?limit=3&page=3");
    const p9 = await call(ws.testKey, "GET", "/api/agents?limit=3&page=9");
    expect(p1.json.data.pagination).toEqual({ total: 7, page: 1, limit: 3, totalPages: 3 });
    expect(p2.json.data.pagination).toEqual({ total: 7, page: 2, limit: 3, totalPages: 3 });
    expect(p3.json.data.pagination).toEqual({ total: 7, page: 3, limit: 3, totalPages: 3 });
    expect(p1.json.data.items).toHaveLength(3);
    expect(p2.json.data.items).toHaveLength(3);
    expect(p3.json.data.items).toHaveLength(1);
    const all = [...p1.json.data.items, ...p2.json.data.items, ...p3.json.data.items].map(
      (a: Json) => a.name,
    );
    expect(all).toEqual([...names].reverse());
    expect(p9.status, p9.body).toBe(200);
    expect(p9.json.data.items).toEqual([]);
    expect(p9.json.data.pagination).toEqual({ total: 7, page: 9, limit: 3, totalPages: 3 });
  });

  it("limit 100 is accepted; limit 0, 101, page 0 and non-numbers → 400 {success: false, error}", async () => {
    const ok = await call(ws.testKey, "GET", "/api/agents?limit=100");
    expect(ok.status, ok.body).toBe(200);
    expect(ok.json.data.pagination.limit).toBe(100);
    expectError(await call(ws.testKey, "GET", "/api/agents?limit=0"), 400, /limit/);
    expectError(await call(ws.testKey, "GET", "/api/agents?limit=101"), 400, /limit/);
    expectError(await call(ws.testKey, "GET", "/api/agents?limit=abc"), 400, /limit/);
    expectError(await call(ws.testKey, "GET", "/api/agents?page=0"), 400, /page/);
  });

  it("search is a case-insensitive substring over name and description", async () => {
    const s = await createWorkspace(t);
    const a = await createAgent(s.testKey, { name: "Alpha TRADER", description: "buys low" });
    const b = await createAgent(s.testKey, { name: "Beta", description: "A friendly Trader of goods" });
    await createAgent(s.testKey, { name: "Gamma", description: "sells high" });
    await createAgent(s.testKey, { name: "Delta" });

    const byTrader = await call(s.testKey, "GET", "/api/agents?search=trAdEr");
    expect(byTrader.status, byTrader.body).toBe(200);
    expect(byTrader.json.data.items.map((x: Json) => x.agentId).sort()).toEqual(
      [a.agentId, b.agentId].sort(),
    );
    expect(byTrader.json.data.pagination).toEqual({ total: 2, page: 1, limit: 20, totalPages: 1 });

    const byDescription = await call(s.testKey, "GET", "/api/agents?search=SELLS");
    expect(byDescription.json.data.items.map((x: Json) => x.name)).toEqual(["Gamma"]);

    const none = await call(s.testKey, "GET", "/api/agents?search=nomatch-xyz");
    expect(none.json.data.items).toEqual([]);
    expect(none.json.data.pagination.total).toBe(0);

    // LIKE wildcards in the needle are literal.
    const percent = await call(s.testKey, "GET", `/api/agents?search=${encodeURIComponent("%")}`);
    expect(percent.json.data.items).toEqual([]);
    const underscore = await call(s.testKey, "GET", "/api/agents?search=_");
    expect(underscore.json.data.items).toEqual([]);
  });
});

// ---- wallets -----------------------------------------------------------------------------------

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
    expect(Object.keys(res.json.data).sort()).toEqual(["balance", "currency", "updatedAt", "walletId"]);
    expect(res.json.data).toMatchObject({ walletId: wallet.walletId, currency: "USDC", balance: "12.50" });
    expect(res.json.data.updatedAt).toMatch(ISO);
    const full = await call(ws.testKey, "GET", `/api/wallets/${wallet.walletId}`);
    expect(full.json.data.balances).toEqual({ USDC: "12.50" });
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
    await new Promise((r) => setTimeout(r, 300));
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

  it("wallet.balance.updated from the sandbox faucet: {walletId, address, currency, balance, previousBalance, updatedAt}", async () => {
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

describe("agent list and search query plans at 100,000 agents", () => {
  it.skipIf(!process.env.DATABASE_URL)(
    "uses indexes, no Seq Scan on agents",
    async () => {
      const ws = await createWorkspace(t);
      const db = t.database.db;
      await sql`
        INSERT INTO agents (workspace_id, environment, name, description, created_at)
        SELECT ${ws.id}::uuid, 'sandbox', 'Agent ' || g, 'description number ' || g || ' of many',
               now() - (g || ' seconds')::interval
        FROM generate_series(1, 100000) AS g
      `.execute(db);
      await sql`ANALYZE agents`.execute(db);

      const plan = async (query: ReturnType<typeof sql>) => {
        const rows = await query.execute(db);
        return (rows.rows as Json[]).map((r) => String(Object.values(r)[0])).join("\n");
      };
      const listPlan = await plan(sql`
        EXPLAIN SELECT id, name, description, metadata, created_at, updated_at FROM agents
        WHERE workspace_id = ${ws.id}::uuid AND environment = 'sandbox' AND deleted_at IS NULL
        ORDER BY created_at DESC, id DESC LIMIT 20`);
      expect(listPlan).not.toContain("Seq Scan on agents");
      expect(listPlan).toMatch(/Index/);

      const searchPlan = await plan(sql`
        EXPLAIN SELECT id, name, description, metadata, created_at, updated_at FROM agents
        WHERE workspace_id = ${ws.id}::uuid AND environment = 'sandbox' AND deleted_at IS NULL
          AND lower(name || ' ' || coalesce(description, '')) LIKE '%number 4242 %'
        ORDER BY created_at DESC, id DESC LIMIT 20`);
      expect(searchPlan).not.toContain("Seq Scan on agents");

      // The endpoint answers the same search correctly at this size.
      const res = await call(ws.testKey, "GET", `/api/agents?search=${encodeURIComponent("NUMBER 4242 ")}`);
      expect(res.status, res.body).toBe(200);
      expect(res.json.data.pagination.total).toBe(1);
      expect(res.json.data.items[0].name).toBe("Agent 4242");
      const list = await call(ws.testKey, "GET", "/api/agents?limit=20&page=5000");
      expect(list.json.data.pagination).toEqual({ total: 100000, page: 5000, limit: 20, totalPages: 5000 });
      expect(list.json.data.items).toHaveLength(20);
    },
    180_000,
  );
});

// ---- devnet: a real transfer into a live agent wallet -------------------------------------------

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
    // Let the watcher set its cursor before the transfer.
    await new Promise((r) => setTimeout(r, 1_500));

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
