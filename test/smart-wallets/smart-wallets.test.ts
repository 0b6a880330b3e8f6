import { randomBytes, randomUUID } from "node:crypto";
import type { InjectOptions } from "fastify";
import { describe, expect, it } from "vitest";
import { ADMIN_SECRET, bearer, type CreatedWorkspace } from "../support/app.ts";
import {
  ADDRESS,
  createSmartWallet,
  ISO,
  type Json,
  lower,
  newWorkspace,
  programmatic,
  SESSION_COOKIE,
  setDefault,
  smartWalletRows,
  smartWalletUrl,
  t,
  useSmartWalletsApp,
} from "../support/smart-wallets.ts";

// The smart wallet's endpoints (programmatic and dashboard) and their authorization; sandbox money
// moved with it: payments-and-payouts.test.ts; shared helpers: support/smart-wallets.ts.

useSmartWalletsApp();

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
