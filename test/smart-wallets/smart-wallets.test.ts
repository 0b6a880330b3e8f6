import { randomBytes, randomUUID } from "node:crypto";
import type { InjectOptions } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ADMIN_SECRET,
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";

// Smart wallets in the sandbox, without a chain (interface parts 2, 4.13, 4.14, 4.18, 7; decisions
// D3, D11, D13): the programmatic endpoints (workspace key or admin secret), the dashboard ones
// (session cookie + CSRF token), walletType selection for payments and payouts, and the simulated
// ledger balance of the smart wallet.

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const TX_HASH = /^0x[0-9a-f]{64}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const FAILURE_ADDRESS = "0x000000000000000000000000000000000000dEaD";
const SESSION_COOKIE = "svc_session";

type Json = Record<string, unknown>;

const randomAddress = () => `0x${randomBytes(20).toString("hex")}`;
const lower = (a: unknown) => String(a).toLowerCase();

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp({ RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" });
});

afterAll(async () => {
  await t?.close();
});

const newWorkspace = () => createWorkspace(t);

const smartWalletUrl = (workspaceId: string) => `/api/v1/workspaces/${workspaceId}/smart-wallet`;

function programmatic(method: "GET" | "POST" | "PATCH", workspaceId: string, token: string, payload?: Json) {
  const options: InjectOptions = { method, url: smartWalletUrl(workspaceId), headers: bearer(token) };
  if (payload !== undefined) options.payload = payload;
  return t.request(options);
}

/** With the sandbox key: `setDefault: true` sets the sandbox's default (D21). */
async function createSmartWallet(ws: CreatedWorkspace, payload?: Json) {
  const res = await programmatic("POST", ws.id, ws.testKey, payload);
  expect([200, 201], res.body).toContain(res.statusCode);
  return res.json() as {
    success: boolean;
    workspaceId: string;
    smartWallet: { address: string; ownerAddress: string; walletId: string };
    defaultWalletType: string;
  };
}

/** The sandbox's default wallet type, set with the sandbox key (D21). */
async function setDefault(ws: CreatedWorkspace, value: string) {
  const res = await programmatic("PATCH", ws.id, ws.testKey, { defaultWalletType: value });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

function smartWalletRows(workspaceId: string) {
  return t.database.db
    .selectFrom("workspace_wallets")
    .select(["id", "address"])
    .where("workspace_id", "=", workspaceId)
    .where("kind", "=", "smart_wallet")
    .execute();
}

const payout = (ws: CreatedWorkspace, body: Json) =>
  t.request({ method: "POST", url: "/api/v1/payouts", headers: bearer(ws.testKey), payload: body });

const createPayment = (ws: CreatedWorkspace, body: Json) =>
  t.request({ method: "POST", url: "/api/v1/payments", headers: bearer(ws.testKey), payload: body });

async function faucet(ws: CreatedWorkspace, body: Json) {
  const res = await t.request({
    method: "POST",
    url: "/api/v1/sandbox/faucet",
    headers: bearer(ws.testKey),
    payload: body,
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

async function balances(ws: CreatedWorkspace) {
  const res = await t.request({ method: "GET", url: "/api/v1/wallet/balance", headers: bearer(ws.testKey) });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

const ledgerUsdc = (address: string) => t.app.services.ledger.balance(address, "USDC");

// ---------------------------------------------------------------------------------------------
// Programmatic endpoints (4.13)

describe("POST /api/v1/workspaces/{id}/smart-wallet", () => {
  it("creates the smart wallet: 201 with address, the EOA as owner, walletId; default stays workspace", async () => {
    const ws = await newWorkspace();
    const res = await programmatic("POST", ws.id, ws.testKey);
    expect(res.statusCode, res.body).toBe(201);
    expect(res.headers["content-type"]).toMatch(/^application\/json/);
    const body = res.json();
    expect(body).toEqual({
      success: true,
      workspaceId: ws.id,
      smartWallet: {
        address: expect.stringMatching(ADDRESS),
        ownerAddress: ws.eoaAddress,
        walletId: expect.any(String),
      },
      defaultWalletType: "workspace",
    });
    expect(body.smartWallet.walletId.length).toBeGreaterThan(0);
    expect(lower(body.smartWallet.address)).not.toBe(lower(ws.eoaAddress));
    const rows = await smartWalletRows(ws.id);
    expect(rows).toHaveLength(1);
    expect(lower(rows[0]?.address)).toBe(lower(body.smartWallet.address));
  });

  it("accepts an empty JSON object as body", async () => {
    const ws = await newWorkspace();
    const res = await programmatic("POST", ws.id, ws.testKey, {});
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().defaultWalletType).toBe("workspace");
  });

  it("is idempotent: a second call returns the same address and walletId, without a second row", async () => {
    const ws = await newWorkspace();
    const first = await programmatic("POST", ws.id, ws.testKey);
    expect(first.statusCode, first.body).toBe(201);
    const second = await programmatic("POST", ws.id, ws.testKey);
    expect([200, 201], second.body).toContain(second.statusCode);
    expect(second.json()).toEqual(first.json());
    expect(await smartWalletRows(ws.id)).toHaveLength(1);
  });

  it("10 concurrent calls give one smart wallet: same address and walletId everywhere, one row", async () => {
    const ws = await newWorkspace();
    const results = await Promise.all(
      Array.from({ length: 10 }, () => programmatic("POST", ws.id, ws.testKey)),
    );
    for (const res of results) expect([200, 201], res.body).toContain(res.statusCode);
    expect(results.filter((r) => r.statusCode === 201).length).toBeGreaterThanOrEqual(1);
    const wallets = results.map((r) => r.json().smartWallet);
    const first = wallets[0];
    expect(first.address).toMatch(ADDRESS);
    for (const w of wallets) expect(w).toEqual(first);
    const rows = await smartWalletRows(ws.id);
    expect(rows).toHaveLength(1);
    expect(rows[0]?.id).toBe(first.walletId);
  });

  it("different workspaces get different smart wallets", async () => {
    const a = await newWorkspace();
    const b = await newWorkspace();
    const wa = await createSmartWallet(a);
    const wb = await createSmartWallet(b);
    expect(lower(wa.smartWallet.address)).not.toBe(lower(wb.smartWallet.address));
    expect(wa.smartWallet.walletId).not.toBe(wb.smartWallet.walletId);
    expect(wb.smartWallet.ownerAddress).toBe(b.eoaAddress);
  });

  it("setDefault: true makes smart_wallet the default of the key's environment after creation", async () => {
    const ws = await newWorkspace();
    const res = await programmatic("POST", ws.id, ws.liveKey, { setDefault: true });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({
      success: true,
      workspaceId: ws.id,
      defaultWalletType: "smart_wallet",
    });
    expect((await programmatic("GET", ws.id, ws.liveKey)).json().defaultWalletType).toBe("smart_wallet");
    // The sandbox keeps its own (D21).
    expect((await programmatic("GET", ws.id, ws.testKey)).json().defaultWalletType).toBe("workspace");
  });

  it("setDefault: true on an existing smart wallet switches the default and keeps the wallet", async () => {
    const ws = await newWorkspace();
    const created = await createSmartWallet(ws);
    expect(created.defaultWalletType).toBe("workspace");
    const again = await createSmartWallet(ws, { setDefault: true });
    expect(again.defaultWalletType).toBe("smart_wallet");
    expect(again.smartWallet).toEqual(created.smartWallet);
    expect(await smartWalletRows(ws.id)).toHaveLength(1);
  });

  it("setDefault: false leaves the default alone", async () => {
    const ws = await newWorkspace();
    const res = await programmatic("POST", ws.id, ws.testKey, { setDefault: false });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().defaultWalletType).toBe("workspace");
  });

  it("a non-boolean setDefault → 400, and no wallet is created", async () => {
    const ws = await newWorkspace();
    const res = await programmatic("POST", ws.id, ws.testKey, { setDefault: "yes" });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error).toEqual(expect.any(String));
    expect(await smartWalletRows(ws.id)).toHaveLength(0);
  });

  it("works with the live key too (the smart wallet belongs to the workspace)", async () => {
    const ws = await newWorkspace();
    const viaLive = await programmatic("POST", ws.id, ws.liveKey);
    expect(viaLive.statusCode, viaLive.body).toBe(201);
    const viaTest = await programmatic("GET", ws.id, ws.testKey);
    expect(viaTest.json().smartWallet).toMatchObject({
      address: viaLive.json().smartWallet.address,
      walletId: viaLive.json().smartWallet.walletId,
    });
  });
});

describe("GET /api/v1/workspaces/{id}/smart-wallet", () => {
  it("before creation: the EOA, smartWallet null and defaultWalletType workspace", async () => {
    const ws = await newWorkspace();
    const res = await programmatic("GET", ws.id, ws.testKey);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      workspaceId: ws.id,
      eoa: { address: ws.eoaAddress, createdAt: expect.stringMatching(ISO) },
      smartWallet: null,
      defaultWalletType: "workspace",
    });
  });

  it("after creation: address, walletId and createdAt of the smart wallet", async () => {
    const ws = await newWorkspace();
    const created = await createSmartWallet(ws);
    const res = await programmatic("GET", ws.id, ws.testKey);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      workspaceId: ws.id,
      eoa: { address: ws.eoaAddress, createdAt: expect.stringMatching(ISO) },
      smartWallet: {
        address: created.smartWallet.address,
        walletId: created.smartWallet.walletId,
        createdAt: expect.stringMatching(ISO),
      },
      defaultWalletType: "workspace",
    });
  });
});

describe("PATCH /api/v1/workspaces/{id}/smart-wallet", () => {
  it("switches the default between smart_wallet and workspace", async () => {
    const ws = await newWorkspace();
    await createSmartWallet(ws);
    expect(await setDefault(ws, "smart_wallet")).toEqual({
      success: true,
      workspaceId: ws.id,
      defaultWalletType: "smart_wallet",
    });
    expect((await programmatic("GET", ws.id, ws.testKey)).json().defaultWalletType).toBe("smart_wallet");
    expect(await setDefault(ws, "workspace")).toEqual({
      success: true,
      workspaceId: ws.id,
      defaultWalletType: "workspace",
    });
    expect((await programmatic("GET", ws.id, ws.testKey)).json().defaultWalletType).toBe("workspace");
  });

  it.each([
    ["an unknown value", { defaultWalletType: "eoa" }],
    ["another unknown value", { defaultWalletType: "vault" }],
    ["a non-string", { defaultWalletType: 1 }],
    ["a missing field", {}],
  ])("answers 400 for %s and leaves the default unchanged", async (_label, payload) => {
    const ws = await newWorkspace();
    await createSmartWallet(ws, { setDefault: true });
    const res = await programmatic("PATCH", ws.id, ws.liveKey, payload);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error).toEqual(expect.any(String));
    expect((await programmatic("GET", ws.id, ws.testKey)).json().defaultWalletType).toBe("smart_wallet");
  });

  it("answers 400 for smart_wallet while the workspace has none (nothing to default to)", async () => {
    const ws = await newWorkspace();
    const res = await programmatic("PATCH", ws.id, ws.liveKey, { defaultWalletType: "smart_wallet" });
    expect(res.statusCode, res.body).toBe(400);
    expect((await programmatic("GET", ws.id, ws.testKey)).json().defaultWalletType).toBe("workspace");
  });
});

describe("programmatic smart-wallet endpoints: authorization", () => {
  it("another workspace's id with my key → 403 on all three, and nothing changes there", async () => {
    const mine = await newWorkspace();
    const other = await newWorkspace();
    for (const key of [mine.testKey, mine.liveKey]) {
      const post = await programmatic("POST", other.id, key, { setDefault: true });
      expect(post.statusCode, post.body).toBe(403);
      expect(post.json().error).toEqual(expect.any(String));
      const get = await programmatic("GET", other.id, key);
      expect(get.statusCode, get.body).toBe(403);
      const patch = await programmatic("PATCH", other.id, key, { defaultWalletType: "workspace" });
      expect(patch.statusCode, patch.body).toBe(403);
    }
    expect(await smartWalletRows(other.id)).toHaveLength(0);
    expect(await smartWalletRows(mine.id)).toHaveLength(0);
  });

  it("no key or an invalid key → 401", async () => {
    const ws = await newWorkspace();
    const none = await t.request({ method: "GET", url: smartWalletUrl(ws.id) });
    expect(none.statusCode, none.body).toBe(401);
    const invalid = await programmatic("POST", ws.id, `svc_test_${"x".repeat(40)}`);
    expect(invalid.statusCode, invalid.body).toBe(401);
    expect(await smartWalletRows(ws.id)).toHaveLength(0);
  });

  it("the admin secret works on POST, GET and PATCH for any workspace", async () => {
    const ws = await newWorkspace();
    const before = await programmatic("GET", ws.id, ADMIN_SECRET);
    expect(before.statusCode, before.body).toBe(200);
    expect(before.json()).toMatchObject({
      workspaceId: ws.id,
      smartWallet: null,
      defaultWalletType: "workspace",
    });

    const created = await programmatic("POST", ws.id, ADMIN_SECRET, { setDefault: true });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json()).toEqual({
      success: true,
      workspaceId: ws.id,
      smartWallet: {
        address: expect.stringMatching(ADDRESS),
        ownerAddress: ws.eoaAddress,
        walletId: expect.any(String),
      },
      defaultWalletType: "smart_wallet",
    });

    const patched = await programmatic("PATCH", ws.id, ADMIN_SECRET, { defaultWalletType: "workspace" });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json()).toEqual({ success: true, workspaceId: ws.id, defaultWalletType: "workspace" });

    // The workspace's own key sees what the admin did.
    const seen = await programmatic("GET", ws.id, ws.testKey);
    expect(seen.json()).toMatchObject({
      smartWallet: {
        address: created.json().smartWallet.address,
        walletId: created.json().smartWallet.walletId,
      },
      defaultWalletType: "workspace",
    });
  });

  it.each([
    ["an unknown UUID", () => randomUUID()],
    ["a malformed id", () => "not-a-workspace"],
  ])("the admin secret with %s → 404 Workspace not found on all three", async (_label, makeId) => {
    const id = makeId();
    const post = await programmatic("POST", id, ADMIN_SECRET);
    expect(post.statusCode, post.body).toBe(404);
    expect(post.json()).toEqual({ error: "Workspace not found" });
    const postDefault = await programmatic("POST", id, ADMIN_SECRET, { setDefault: true });
    expect(postDefault.statusCode, postDefault.body).toBe(404);
    expect(postDefault.json()).toEqual({ error: "Workspace not found" });
    const get = await programmatic("GET", id, ADMIN_SECRET);
    expect(get.statusCode, get.body).toBe(404);
    expect(get.json()).toEqual({ error: "Workspace not found" });
    for (const value of ["workspace", "smart_wallet"]) {
      const patch = await programmatic("PATCH", id, ADMIN_SECRET, { defaultWalletType: value });
      expect(patch.statusCode, `${value}: ${patch.body}`).toBe(404);
      expect(patch.json()).toEqual({ error: "Workspace not found" });
    }
  });
});

describe("GET /api/v1/workspaces/{id} shows the smart wallet", () => {
  it("smartWallet is null before creation and the created wallet after, with the same walletId", async () => {
    const ws = await newWorkspace();
    const get = () =>
      t.request({ method: "GET", url: `/api/v1/workspaces/${ws.id}`, headers: bearer(ws.testKey) });
    const before = await get();
    expect(before.statusCode, before.body).toBe(200);
    expect(before.json().workspace).toMatchObject({ smartWallet: null, defaultWalletType: "workspace" });

    const created = await createSmartWallet(ws, { setDefault: true });
    const state = (await programmatic("GET", ws.id, ws.testKey)).json();
    const after = await get();
    expect(after.statusCode, after.body).toBe(200);
    expect(after.json().workspace).toMatchObject({
      id: ws.id,
      defaultWalletType: "smart_wallet",
      eoa: { address: ws.eoaAddress },
    });
    expect(after.json().workspace.smartWallet).toMatchObject({
      address: created.smartWallet.address,
      createdAt: state.smartWallet.createdAt,
    });
    // walletId identifies the same wallet in every response that carries it.
    expect(after.json().workspace.smartWallet.walletId).toBe(created.smartWallet.walletId);
    // Optional extras, when present, must be right (part 2).
    const extra = after.json().workspace.smartWallet;
    if ("ownerAddress" in extra) expect(extra.ownerAddress).toBe(ws.eoaAddress);
    if ("type" in extra) expect(extra.type).toBe("smart_wallet");

    const viaAdmin = await t.request({
      method: "GET",
      url: `/api/v1/workspaces/${ws.id}`,
      headers: bearer(ADMIN_SECRET),
    });
    expect(viaAdmin.json().workspace.smartWallet).toMatchObject({ address: created.smartWallet.address });
  });
});

// ---------------------------------------------------------------------------------------------
// Dashboard endpoints (4.14, D11, D12)

describe("dashboard: /api/workspaces/smart-wallet", () => {
  async function session(ws: CreatedWorkspace) {
    const opened = await t.app.services.sessions.open(ws.id);
    return { cookie: `${SESSION_COOKIE}=${opened.token}`, csrfToken: opened.csrfToken };
  }

  const dashboard = (method: "POST" | "PATCH", headers: Record<string, string>, payload?: Json) => {
    const options: InjectOptions = { method, url: "/api/workspaces/smart-wallet", headers };
    if (payload !== undefined) options.payload = payload;
    return t.request(options);
  };

  it("POST creates the signed-in workspace's smart wallet: 200 {smartWallet: {address, type, ownerAddress}, message}", async () => {
    const ws = await newWorkspace();
    const s = await session(ws);
    const res = await dashboard("POST", { cookie: s.cookie, "x-csrf-token": s.csrfToken });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^application\/json/);
    const body = res.json();
    expect(body).toEqual({
      smartWallet: {
        address: expect.stringMatching(ADDRESS),
        type: "smart_wallet",
        ownerAddress: ws.eoaAddress,
      },
      message: expect.any(String),
    });
    expect(body.message.length).toBeGreaterThan(0);

    // The same wallet the programmatic endpoint reports; one row.
    const state = (await programmatic("GET", ws.id, ws.testKey)).json();
    expect(state.smartWallet.address).toBe(body.smartWallet.address);
    expect(await smartWalletRows(ws.id)).toHaveLength(1);
  });

  it("POST is idempotent, also against the programmatic create", async () => {
    const ws = await newWorkspace();
    const viaKey = await createSmartWallet(ws);
    const s = await session(ws);
    const headers = { cookie: s.cookie, "x-csrf-token": s.csrfToken };
    const first = await dashboard("POST", headers);
    const second = await dashboard("POST", headers);
    expect(first.statusCode, first.body).toBe(200);
    expect(second.statusCode, second.body).toBe(200);
    expect(first.json().smartWallet).toEqual({
      address: viaKey.smartWallet.address,
      type: "smart_wallet",
      ownerAddress: ws.eoaAddress,
    });
    expect(second.json().smartWallet).toEqual(first.json().smartWallet);
    expect(await smartWalletRows(ws.id)).toHaveLength(1);
  });

  it("acts only on the session's workspace", async () => {
    const a = await newWorkspace();
    const b = await newWorkspace();
    const s = await session(a);
    const res = await dashboard("POST", { cookie: s.cookie, "x-csrf-token": s.csrfToken });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().smartWallet.ownerAddress).toBe(a.eoaAddress);
    expect(await smartWalletRows(a.id)).toHaveLength(1);
    expect(await smartWalletRows(b.id)).toHaveLength(0);
  });

  it("without a session cookie → 401 (POST and PATCH), nothing created", async () => {
    const ws = await newWorkspace();
    const post = await dashboard("POST", {});
    expect(post.statusCode, post.body).toBe(401);
    expect(post.json().error).toEqual(expect.any(String));
    const patch = await dashboard("PATCH", {}, { defaultWalletType: "workspace" });
    expect(patch.statusCode, patch.body).toBe(401);
    const unknown = await dashboard("POST", {
      cookie: `${SESSION_COOKIE}=${randomBytes(32).toString("base64url")}`,
      "x-csrf-token": "whatever",
    });
    expect(unknown.statusCode, unknown.body).toBe(401);
    expect(await smartWalletRows(ws.id)).toHaveLength(0);
  });

  it("an API key alone → 401 on both dashboard endpoints", async () => {
    const ws = await newWorkspace();
    const post = await dashboard("POST", bearer(ws.testKey));
    expect(post.statusCode, post.body).toBe(401);
    const patch = await dashboard("PATCH", bearer(ws.liveKey), { defaultWalletType: "workspace" });
    expect(patch.statusCode, patch.body).toBe(401);
    const admin = await dashboard("POST", bearer(ADMIN_SECRET));
    expect(admin.statusCode, admin.body).toBe(401);
    expect(await smartWalletRows(ws.id)).toHaveLength(0);
  });

  it("a session cookie without the CSRF token, or with a wrong one → 403, nothing changes", async () => {
    const ws = await newWorkspace();
    const s = await session(ws);
    const missing = await dashboard("POST", { cookie: s.cookie });
    expect(missing.statusCode, missing.body).toBe(403);
    expect(missing.json().error).toEqual(expect.any(String));
    const wrong = await dashboard("POST", { cookie: s.cookie, "x-csrf-token": `${s.csrfToken}x` });
    expect(wrong.statusCode, wrong.body).toBe(403);
    // Another session's token is not this session's.
    const other = await session(ws);
    const foreign = await dashboard("POST", { cookie: s.cookie, "x-csrf-token": other.csrfToken });
    expect(foreign.statusCode, foreign.body).toBe(403);
    expect(await smartWalletRows(ws.id)).toHaveLength(0);

    await createSmartWallet(ws);
    const patch = await dashboard("PATCH", { cookie: s.cookie }, { defaultWalletType: "smart_wallet" });
    expect(patch.statusCode, patch.body).toBe(403);
    const patchWrong = await dashboard(
      "PATCH",
      { cookie: s.cookie, "x-csrf-token": "not-the-token" },
      { defaultWalletType: "smart_wallet" },
    );
    expect(patchWrong.statusCode, patchWrong.body).toBe(403);
    expect((await programmatic("GET", ws.id, ws.testKey)).json().defaultWalletType).toBe("workspace");
  });

  it("PATCH sets the default wallet type: 200 {defaultWalletType, message}", async () => {
    const ws = await newWorkspace();
    const s = await session(ws);
    const headers = { cookie: s.cookie, "x-csrf-token": s.csrfToken };
    expect((await dashboard("POST", headers)).statusCode).toBe(200);

    // Without ?environment the session sets live's default (D21).
    const toSmart = await dashboard("PATCH", headers, { defaultWalletType: "smart_wallet" });
    expect(toSmart.statusCode, toSmart.body).toBe(200);
    expect(toSmart.json()).toEqual({ defaultWalletType: "smart_wallet", message: expect.any(String) });
    expect((await programmatic("GET", ws.id, ws.liveKey)).json().defaultWalletType).toBe("smart_wallet");

    const toEoa = await dashboard("PATCH", headers, { defaultWalletType: "workspace" });
    expect(toEoa.statusCode, toEoa.body).toBe(200);
    expect(toEoa.json()).toEqual({ defaultWalletType: "workspace", message: expect.any(String) });
    expect((await programmatic("GET", ws.id, ws.liveKey)).json().defaultWalletType).toBe("workspace");

    const invalid = await dashboard("PATCH", headers, { defaultWalletType: "eoa" });
    expect(invalid.statusCode, invalid.body).toBe(400);
    const missing = await dashboard("PATCH", headers, {});
    expect(missing.statusCode, missing.body).toBe(400);
    expect((await programmatic("GET", ws.id, ws.liveKey)).json().defaultWalletType).toBe("workspace");
  });

  it("an expired or closed session → 401", async () => {
    const ws = await newWorkspace();
    const opened = await t.app.services.sessions.open(ws.id);
    await t.app.services.sessions.close(opened.token);
    const res = await dashboard("POST", {
      cookie: `${SESSION_COOKIE}=${opened.token}`,
      "x-csrf-token": opened.csrfToken,
    });
    expect(res.statusCode, res.body).toBe(401);
    expect(await smartWalletRows(ws.id)).toHaveLength(0);
  });
});

// ---------------------------------------------------------------------------------------------
// walletType for payments (4.1, 4.18, D13)

describe("payments with walletType", () => {
  it("walletType smart_wallet receives on the smart wallet; eoa and the default on the EOA", async () => {
    const ws = await newWorkspace();
    const { smartWallet } = await createSmartWallet(ws);
    const smart = await createPayment(ws, { tokenSymbol: "USDC", amount: "5", walletType: "smart_wallet" });
    expect(smart.statusCode, smart.body).toBe(201);
    expect(smart.json().receivingAddress).toBe(smartWallet.address);
    expect(smart.json().payment.status).toBe("forwarded");

    const eoa = await createPayment(ws, { tokenSymbol: "USDC", amount: "5", walletType: "eoa" });
    expect(eoa.statusCode, eoa.body).toBe(201);
    expect(eoa.json().receivingAddress).toBe(ws.eoaAddress);

    const omitted = await createPayment(ws, { tokenSymbol: "USDC", amount: "5" });
    expect(omitted.statusCode, omitted.body).toBe(201);
    expect(omitted.json().receivingAddress).toBe(ws.eoaAddress);
  });

  it("with the default switched to smart_wallet, a payment without walletType receives on the smart wallet", async () => {
    const ws = await newWorkspace();
    const { smartWallet } = await createSmartWallet(ws);
    await setDefault(ws, "smart_wallet");
    const omitted = await createPayment(ws, { tokenSymbol: "ETH", amount: "0.1" });
    expect(omitted.statusCode, omitted.body).toBe(201);
    expect(omitted.json().receivingAddress).toBe(smartWallet.address);
    // An explicit eoa still wins over the default.
    const eoa = await createPayment(ws, { tokenSymbol: "ETH", amount: "0.1", walletType: "eoa" });
    expect(eoa.json().receivingAddress).toBe(ws.eoaAddress);

    await setDefault(ws, "workspace");
    const back = await createPayment(ws, { tokenSymbol: "ETH", amount: "0.1" });
    expect(back.json().receivingAddress).toBe(ws.eoaAddress);
  });

  it("walletType smart_wallet without a smart wallet → 400", async () => {
    const ws = await newWorkspace();
    const res = await createPayment(ws, { tokenSymbol: "USDC", amount: "5", walletType: "smart_wallet" });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error).toEqual(expect.any(String));
  });
});

// ---------------------------------------------------------------------------------------------
// Sandbox payouts from the smart wallet (4.10, 4.18, 7, D3, D13)

describe("sandbox payouts with walletType smart_wallet", () => {
  it("the faucet credits the smart wallet; a payout moves its simulated balance only", async () => {
    const ws = await newWorkspace();
    const { smartWallet } = await createSmartWallet(ws);
    const funded = await faucet(ws, { tokenSymbol: "USDC", amount: "100", walletType: "smart_wallet" });
    expect(funded).toEqual({
      tokenSymbol: "USDC",
      walletType: "smart_wallet",
      address: smartWallet.address,
      balance: "100.00",
    });
    expect(await ledgerUsdc(smartWallet.address)).toBe(100_000_000n);
    expect(await ledgerUsdc(ws.eoaAddress)).toBe(0n);

    const destination = randomAddress();
    const res = await payout(ws, {
      tokenSymbol: "USDC",
      amount: "30.5",
      destinationAddress: destination,
      walletType: "smart_wallet",
      description: "smart refund",
      metadata: { order: "S-1" },
    });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.timestamp).toMatch(ISO);
    expect(body.payout).toMatchObject({
      txHash: expect.stringMatching(TX_HASH),
      amount: "30.50",
      tokenSymbol: "USDC",
      destinationAddress: destination,
      fromAddress: smartWallet.address,
      environment: "sandbox",
      status: "completed",
      description: "smart refund",
      metadata: { order: "S-1" },
    });
    expect(await ledgerUsdc(smartWallet.address)).toBe(69_500_000n);
    expect(await ledgerUsdc(destination)).toBe(30_500_000n);
    expect(await ledgerUsdc(ws.eoaAddress)).toBe(0n);

    const history = await t.request({ method: "GET", url: "/api/v1/payouts", headers: bearer(ws.testKey) });
    expect(history.json()).toMatchObject({
      total: 1,
      payouts: [
        { txHash: body.payout.txHash, type: "ERC20", details: { amount: "30.50", tokenSymbol: "USDC" } },
      ],
    });
  });

  it("a smart wallet payout response carries userOpHash next to txHash (D13)", async () => {
    const ws = await newWorkspace();
    await createSmartWallet(ws);
    await faucet(ws, { tokenSymbol: "USDC", amount: "10", walletType: "smart_wallet" });
    const res = await payout(ws, {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: randomAddress(),
      walletType: "smart_wallet",
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().payout.txHash).toMatch(TX_HASH);
    expect(res.json().payout.userOpHash).toMatch(TX_HASH);
    expect(res.json().payout.userOpHash).not.toBe(res.json().payout.txHash);
  });

  it("ETH and ADAO payouts from the smart wallet need no gas and move exact amounts", async () => {
    const ws = await newWorkspace();
    const { smartWallet } = await createSmartWallet(ws);
    await faucet(ws, { tokenSymbol: "ETH", amount: "1", walletType: "smart_wallet" });
    await faucet(ws, { tokenSymbol: "ADAO", amount: "50", walletType: "smart_wallet" });
    const destination = randomAddress();
    const eth = await payout(ws, {
      tokenSymbol: "ETH",
      amount: "0.25",
      destinationAddress: destination,
      walletType: "smart_wallet",
    });
    expect(eth.statusCode, eth.body).toBe(200);
    expect(eth.json().payout).toMatchObject({
      amount: "0.25",
      tokenSymbol: "ETH",
      fromAddress: smartWallet.address,
    });
    const adao = await payout(ws, {
      tokenSymbol: "ADAO",
      amount: "12.5",
      destinationAddress: destination,
      walletType: "smart_wallet",
    });
    expect(adao.statusCode, adao.body).toBe(200);
    const after = await balances(ws);
    expect(after.smartWallet).toEqual({
      address: smartWallet.address,
      balances: { USDC: "0.00", ETH: "0.75", ADAO: "37.50", DAI: "0.00" },
    });
    expect(await t.app.services.ledger.balance(destination, "ETH")).toBe(250_000_000_000_000_000n);
    expect(await t.app.services.ledger.balance(destination, "ADAO")).toBe(12_500_000_000_000_000_000n);
  });

  it("insufficient smart wallet balance → 400 Insufficient balance with the smart wallet's figures, even when the EOA could pay", async () => {
    const ws = await newWorkspace();
    const { smartWallet } = await createSmartWallet(ws);
    await faucet(ws, { tokenSymbol: "USDC", amount: "5", walletType: "smart_wallet" });
    await faucet(ws, { tokenSymbol: "USDC", amount: "1000" }); // the EOA
    const destination = randomAddress();
    const res = await payout(ws, {
      tokenSymbol: "USDC",
      amount: "20",
      destinationAddress: destination,
      walletType: "smart_wallet",
    });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({
      error: "Insufficient balance",
      available: "5.00",
      requested: "20.00",
      tokenSymbol: "USDC",
    });
    expect(await ledgerUsdc(smartWallet.address)).toBe(5_000_000n);
    expect(await ledgerUsdc(ws.eoaAddress)).toBe(1_000_000_000n);
    expect(await ledgerUsdc(destination)).toBe(0n);
    // A balance pre-check is not a failed transfer (D13).
    const state = await t.request({
      method: "GET",
      url: `/api/v1/workspaces/${ws.id}/payout-state`,
      headers: bearer(ws.testKey),
    });
    expect(state.json()).toMatchObject({ status: "active", failStreak: 0 });
  });

  it("walletType smart_wallet without a smart wallet → 400, nothing sent", async () => {
    const ws = await newWorkspace();
    await faucet(ws, { tokenSymbol: "USDC", amount: "10" });
    const res = await payout(ws, {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: randomAddress(),
      walletType: "smart_wallet",
    });
    expect(res.statusCode, res.body).toBe(400);
    expect(await ledgerUsdc(ws.eoaAddress)).toBe(10_000_000n);
  });

  it("the default wallet type decides payouts that omit walletType", async () => {
    const ws = await newWorkspace();
    const { smartWallet } = await createSmartWallet(ws);
    await faucet(ws, { tokenSymbol: "USDC", amount: "100", walletType: "smart_wallet" });
    await faucet(ws, { tokenSymbol: "USDC", amount: "50" });
    const destination = randomAddress();
    const send = (amount: string, extra: Json = {}) =>
      payout(ws, { tokenSymbol: "USDC", amount, destinationAddress: destination, ...extra });

    const beforeSwitch = await send("1");
    expect(beforeSwitch.statusCode, beforeSwitch.body).toBe(200);
    expect(beforeSwitch.json().payout.fromAddress).toBe(ws.eoaAddress);
    expect(await ledgerUsdc(ws.eoaAddress)).toBe(49_000_000n);
    expect(await ledgerUsdc(smartWallet.address)).toBe(100_000_000n);

    await setDefault(ws, "smart_wallet");
    const onSmart = await send("10");
    expect(onSmart.statusCode, onSmart.body).toBe(200);
    expect(onSmart.json().payout.fromAddress).toBe(smartWallet.address);
    expect(await ledgerUsdc(smartWallet.address)).toBe(90_000_000n);
    expect(await ledgerUsdc(ws.eoaAddress)).toBe(49_000_000n);

    // An explicit walletType still wins over the default.
    const explicitEoa = await send("2", { walletType: "eoa" });
    expect(explicitEoa.statusCode, explicitEoa.body).toBe(200);
    expect(explicitEoa.json().payout.fromAddress).toBe(ws.eoaAddress);
    expect(await ledgerUsdc(ws.eoaAddress)).toBe(47_000_000n);

    // The default's balance is the one checked: 95 from the smart wallet's 90 fails.
    const tooMuch = await send("95");
    expect(tooMuch.statusCode, tooMuch.body).toBe(400);
    expect(tooMuch.json()).toMatchObject({ error: "Insufficient balance", available: "90.00" });

    await setDefault(ws, "workspace");
    const backOnEoa = await send("3");
    expect(backOnEoa.statusCode, backOnEoa.body).toBe(200);
    expect(backOnEoa.json().payout.fromAddress).toBe(ws.eoaAddress);
    expect(await ledgerUsdc(ws.eoaAddress)).toBe(44_000_000n);
    expect(await ledgerUsdc(smartWallet.address)).toBe(90_000_000n);
    expect(await ledgerUsdc(destination)).toBe(16_000_000n);
  });

  it("a failed smart wallet transfer counts toward the circuit breaker: 500 PAYOUT_FAILED, payout.failed", async () => {
    const ws = await newWorkspace();
    const { smartWallet } = await createSmartWallet(ws);
    await faucet(ws, { tokenSymbol: "USDC", amount: "10", walletType: "smart_wallet" });
    const res = await payout(ws, {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: FAILURE_ADDRESS,
      walletType: "smart_wallet",
    });
    expect(res.statusCode, res.body).toBe(500);
    expect(res.json()).toMatchObject({
      error: "Payout failed",
      code: "PAYOUT_FAILED",
      detail: expect.any(String),
      failStreak: 1,
      remainingBeforePause: 2,
      circuitBreaker: false,
    });
    expect(await ledgerUsdc(smartWallet.address)).toBe(10_000_000n);
    const failed = await t.database.db
      .selectFrom("outbox_events")
      .select(["payload"])
      .where("workspace_id", "=", ws.id)
      .where("event_type", "=", "payout.failed")
      .execute();
    expect(failed).toHaveLength(1);
    expect(failed[0]?.payload).toMatchObject({ fromAddress: smartWallet.address, failStreak: 1 });
  });
});

describe("GET /api/v1/wallet/balance with a smart wallet", () => {
  it("lists the smart wallet with its balances next to the EOA", async () => {
    const ws = await newWorkspace();
    const before = await balances(ws);
    expect(before).toEqual({
      environment: "sandbox",
      eoa: { address: ws.eoaAddress, balances: { USDC: "0.00", ETH: "0.00", ADAO: "0.00", DAI: "0.00" } },
      smartWallet: null,
    });

    const { smartWallet } = await createSmartWallet(ws);
    expect(await balances(ws)).toEqual({
      environment: "sandbox",
      eoa: { address: ws.eoaAddress, balances: { USDC: "0.00", ETH: "0.00", ADAO: "0.00", DAI: "0.00" } },
      smartWallet: {
        address: smartWallet.address,
        balances: { USDC: "0.00", ETH: "0.00", ADAO: "0.00", DAI: "0.00" },
      },
    });

    await faucet(ws, { tokenSymbol: "USDC", amount: "12.345678", walletType: "smart_wallet" });
    await faucet(ws, { tokenSymbol: "ETH", amount: "0.5", walletType: "smart_wallet" });
    await faucet(ws, { tokenSymbol: "ADAO", amount: "3" });
    expect(await balances(ws)).toEqual({
      environment: "sandbox",
      eoa: { address: ws.eoaAddress, balances: { USDC: "0.00", ETH: "0.00", ADAO: "3.00", DAI: "0.00" } },
      smartWallet: {
        address: smartWallet.address,
        balances: { USDC: "12.345678", ETH: "0.50", ADAO: "0.00", DAI: "0.00" },
      },
    });
  });
});
