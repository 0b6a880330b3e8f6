import { sql } from "kysely";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_SECRET, bearer, createWorkspace, startTestApp, type TestApp } from "../support/app.ts";

// Workspaces and API keys: D2, D13 and the authentication rules of part 5 of the interface.

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const SANDBOX_KEY = /^svc_test_[0-9A-Za-z]{32,}$/;
const LIVE_KEY = /^svc_live_[0-9A-Za-z]{32,}$/;

/** Every row of every table of the public schema, as one string: "is this secret stored anywhere?" */
async function dumpDatabase(t: TestApp): Promise<string> {
  const tables = await sql<{ table_name: string }>`
    SELECT table_name FROM information_schema.tables
    WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`.execute(t.database.db);
  expect(tables.rows.map((r) => r.table_name)).toEqual(
    expect.arrayContaining(["api_keys", "workspace_wallets"]),
  );
  const parts: string[] = [];
  for (const { table_name } of tables.rows) {
    const rows = await sql`SELECT * FROM ${sql.table(table_name)}`.execute(t.database.db);
    parts.push(JSON.stringify(rows.rows, (_k, v) => (typeof v === "bigint" ? v.toString() : v)));
  }
  return parts.join("\n");
}

describe("workspaces", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => t.close());

  describe("POST /api/v1/workspaces (admin secret)", () => {
    it("answers 201 with the workspace and one sandbox and one live key (D2 shape)", async () => {
      const res = await t.request({
        method: "POST",
        url: "/api/v1/workspaces",
        headers: bearer(ADMIN_SECRET),
        payload: {
          name: "Acme Shop",
          settlementAddress: "0x2222222222222222222222222222222222222222",
          adminEmail: "owner@acme.example",
          adminPassword: "correct horse battery",
        },
      });
      expect(res.statusCode).toBe(201);
      expect(res.headers["content-type"]).toMatch(/^application\/json/);
      const body = res.json();

      const ws = body.workspace;
      expect(ws.id).toMatch(UUID);
      expect(ws.name).toBe("Acme Shop");
      expect(ws.settlement_address).toBe("0x2222222222222222222222222222222222222222");
      expect(ws.defaultWalletType).toBe("workspace");
      expect(ws.eoa.address).toMatch(ADDRESS);
      expect(ws.eoa.createdAt).toMatch(ISO);
      expect(ws.smartWallet).toBeNull();
      expect(ws.createdAt).toMatch(ISO);
      expect(Number.isNaN(Date.parse(ws.createdAt))).toBe(false);

      const { test, live } = body.apiKeys;
      expect(test.id).toMatch(UUID);
      expect(live.id).toMatch(UUID);
      expect(test.id).not.toBe(live.id);
      expect(test.key).toMatch(SANDBOX_KEY);
      expect(live.key).toMatch(LIVE_KEY);
      expect(test.prefix).toBe(test.key.slice(0, 12));
      expect(live.prefix).toBe(live.key.slice(0, 12));
      expect(test.environment).toBe("sandbox");
      expect(live.environment).toBe("live");

      // Both keys work at once, and each acts in its own environment.
      const sandboxList = await t.request({ method: "GET", url: "/api/v1/keys", headers: bearer(test.key) });
      expect(sandboxList.statusCode).toBe(200);
      expect(sandboxList.json().apiKeys.map((k: { id: string }) => k.id)).toEqual([test.id]);
      const liveList = await t.request({ method: "GET", url: "/api/v1/keys", headers: bearer(live.key) });
      expect(liveList.statusCode).toBe(200);
      expect(liveList.json().apiKeys.map((k: { id: string }) => k.id)).toEqual([live.id]);
    });

    it("issues different keys and different EOAs for every workspace", async () => {
      const a = await createWorkspace(t, { name: "A" });
      const b = await createWorkspace(t, { name: "B" });
      expect(a.id).not.toBe(b.id);
      expect(a.eoaAddress.toLowerCase()).not.toBe(b.eoaAddress.toLowerCase());
      expect(new Set([a.testKey, a.liveKey, b.testKey, b.liveKey]).size).toBe(4);
    });

    it("creates a workspace with only a name; settlement_address is then null", async () => {
      const res = await t.request({
        method: "POST",
        url: "/api/v1/workspaces",
        headers: bearer(ADMIN_SECRET),
        payload: { name: "Minimal" },
      });
      expect(res.statusCode).toBe(201);
      expect(res.json().workspace).toMatchObject({
        name: "Minimal",
        settlement_address: null,
        defaultWalletType: "workspace",
        smartWallet: null,
      });
    });

    it("stores API keys only as a hash: no plaintext key anywhere in the database", async () => {
      const ws = await createWorkspace(t, { name: "Hashing" });
      const created = await t.request({
        method: "POST",
        url: "/api/v1/keys",
        headers: bearer(ws.testKey),
        payload: { environment: "sandbox", name: "extra" },
      });
      expect(created.statusCode).toBe(201);
      const extraKey: string = created.json().apiKey.key;

      const rows = await t.database.db
        .selectFrom("api_keys")
        .selectAll()
        .where("workspace_id", "=", ws.id)
        .execute();
      expect(rows).toHaveLength(3);
      const dump = await dumpDatabase(t);
      for (const key of [ws.testKey, ws.liveKey, extraKey]) {
        const secretPart = key.slice(12); // everything after the displayable prefix
        expect(secretPart.length).toBeGreaterThanOrEqual(20);
        expect(dump).not.toContain(key);
        expect(dump).not.toContain(secretPart);
        const row = rows.find((r) => r.prefix === key.slice(0, 12));
        expect(row, `row for ${key.slice(0, 12)}`).toBeDefined();
        expect(row?.key_hash).toBeTruthy();
        expect(row?.key_hash).not.toContain(secretPart);
      }
    });

    it("stores the EOA private key encrypted (v1:...), never in clear", async () => {
      const ws = await createWorkspace(t, { name: "Encrypted" });
      const wallets = await t.database.db
        .selectFrom("workspace_wallets")
        .selectAll()
        .where("workspace_id", "=", ws.id)
        .execute();
      expect(wallets).toHaveLength(1);
      const wallet = wallets[0];
      if (!wallet) throw new Error("no wallet row");
      expect(wallet.kind).toBe("eoa");
      expect(wallet.address.toLowerCase()).toBe(ws.eoaAddress.toLowerCase());
      const stored = wallet.encrypted_private_key;
      expect(typeof stored).toBe("string");
      expect(stored?.startsWith("v1:")).toBe(true);
      expect(stored).not.toMatch(/0x[0-9a-fA-F]{64}/);
      expect(stored).not.toMatch(/[0-9a-fA-F]{64}/);

      // It really is the key of the EOA, recoverable only with the master key...
      const privateKey = t.app.ctx.secrets.decrypt(stored as string) as `0x${string}`;
      expect(privateKey).toMatch(/^0x[0-9a-f]{64}$/i);
      expect(privateKeyToAccount(privateKey).address.toLowerCase()).toBe(ws.eoaAddress.toLowerCase());
      // ...and its hex appears nowhere in the database.
      const dump = await dumpDatabase(t);
      expect(dump.toLowerCase()).not.toContain(privateKey.slice(2).toLowerCase());
    });

    it.each([
      ["a missing name", { settlementAddress: "0x1111111111111111111111111111111111111111" }, "name"],
      ["an empty name", { name: "" }, "name"],
      ["a blank name", { name: "   " }, "name"],
      ["a bad settlementAddress", { name: "X", settlementAddress: "0x1234" }, "settlementAddress"],
      [
        "a non-hex settlementAddress",
        { name: "X", settlementAddress: `0x${"g".repeat(40)}` },
        "settlementAddress",
      ],
      ["a bad adminEmail", { name: "X", adminEmail: "not-an-email" }, "adminEmail"],
      ["a short adminPassword", { name: "X", adminPassword: "short-pw" }, "adminPassword"],
      ["an 11-character adminPassword", { name: "X", adminPassword: "a".repeat(11) }, "adminPassword"],
    ])("refuses %s with 400 naming the field", async (_label, payload, field) => {
      const before = await t.database.db
        .selectFrom("workspaces")
        .select((eb) => eb.fn.countAll<string>().as("n"))
        .executeTakeFirstOrThrow();
      const res = await t.request({
        method: "POST",
        url: "/api/v1/workspaces",
        headers: bearer(ADMIN_SECRET),
        payload,
      });
      expect(res.statusCode).toBe(400);
      expect(res.headers["content-type"]).toMatch(/^application\/json/);
      const body = res.json();
      expect(typeof body.error).toBe("string");
      expect(body.error).toContain(field);
      const after = await t.database.db
        .selectFrom("workspaces")
        .select((eb) => eb.fn.countAll<string>().as("n"))
        .executeTakeFirstOrThrow();
      expect(Number(after.n)).toBe(Number(before.n));
    });

    it("accepts a 12-character adminPassword (the minimum)", async () => {
      const res = await t.request({
        method: "POST",
        url: "/api/v1/workspaces",
        headers: bearer(ADMIN_SECRET),
        payload: { name: "Pw", adminPassword: "a".repeat(12) },
      });
      expect(res.statusCode).toBe(201);
    });
  });

  describe("authentication of the admin-only create", () => {
    it("no Authorization header → 401", async () => {
      const res = await t.request({ method: "POST", url: "/api/v1/workspaces", payload: { name: "X" } });
      expect(res.statusCode).toBe(401);
      expect(typeof res.json().error).toBe("string");
    });

    it("a garbage token → 401", async () => {
      const res = await t.request({
        method: "POST",
        url: "/api/v1/workspaces",
        headers: bearer("definitely-not-the-secret"),
        payload: { name: "X" },
      });
      expect(res.statusCode).toBe(401);
      expect(typeof res.json().error).toBe("string");
    });

    it("a well-formed but unknown key → 401", async () => {
      const res = await t.request({
        method: "POST",
        url: "/api/v1/workspaces",
        headers: bearer(`svc_test_${"A".repeat(40)}`),
        payload: { name: "X" },
      });
      expect(res.statusCode).toBe(401);
    });

    it("a valid workspace key on the admin-only create → 403", async () => {
      const ws = await createWorkspace(t);
      for (const key of [ws.testKey, ws.liveKey]) {
        const res = await t.request({
          method: "POST",
          url: "/api/v1/workspaces",
          headers: bearer(key),
          payload: { name: "Sneaky" },
        });
        expect(res.statusCode).toBe(403);
        expect(typeof res.json().error).toBe("string");
      }
      const sneaky = await t.database.db
        .selectFrom("workspaces")
        .select("id")
        .where("name", "=", "Sneaky")
        .execute();
      expect(sneaky).toHaveLength(0);
    });

    it("the admin secret is refused (401) when the app has no ADMIN_SECRET configured", async () => {
      const noAdmin = await startTestApp({ ADMIN_SECRET: "" });
      try {
        expect(noAdmin.config.adminSecret).toBeUndefined();
        const created = await noAdmin.request({
          method: "POST",
          url: "/api/v1/workspaces",
          headers: bearer(ADMIN_SECRET),
          payload: { name: "NoAdmin" },
        });
        expect(created.statusCode).toBe(401);
        expect(typeof created.json().error).toBe("string");
        // An empty bearer is no admin secret either.
        const empty = await noAdmin.request({
          method: "POST",
          url: "/api/v1/workspaces",
          headers: { authorization: "Bearer " },
          payload: { name: "NoAdmin" },
        });
        expect(empty.statusCode).toBe(401);
        const read = await noAdmin.request({
          method: "GET",
          url: "/api/v1/workspaces/00000000-0000-4000-8000-000000000000",
          headers: bearer(ADMIN_SECRET),
        });
        expect(read.statusCode).toBe(401);
      } finally {
        await noAdmin.close();
      }
    });
  });

  describe("GET /api/v1/workspaces/{id}", () => {
    it("own key (sandbox or live) → 200 with the workspace", async () => {
      const ws = await createWorkspace(t, { name: "Reader" });
      for (const key of [ws.testKey, ws.liveKey]) {
        const res = await t.request({
          method: "GET",
          url: `/api/v1/workspaces/${ws.id}`,
          headers: bearer(key),
        });
        expect(res.statusCode).toBe(200);
        const workspace = res.json().workspace;
        expect(workspace).toMatchObject({
          id: ws.id,
          name: "Reader",
          settlement_address: "0x1111111111111111111111111111111111111111",
          defaultWalletType: "workspace",
          smartWallet: null,
        });
        expect(workspace.eoa.address).toBe(ws.eoaAddress);
        expect(workspace.eoa.createdAt).toMatch(ISO);
      }
    });

    it("another workspace's id with my key → 403", async () => {
      const mine = await createWorkspace(t, { name: "Mine" });
      const theirs = await createWorkspace(t, { name: "Theirs" });
      const res = await t.request({
        method: "GET",
        url: `/api/v1/workspaces/${theirs.id}`,
        headers: bearer(mine.testKey),
      });
      expect(res.statusCode).toBe(403);
      expect(typeof res.json().error).toBe("string");
      expect(res.body).not.toContain("Theirs");
      expect(res.body).not.toContain(theirs.eoaAddress);
    });

    it("admin secret → 200 for any workspace", async () => {
      const ws = await createWorkspace(t, { name: "AdminRead" });
      const res = await t.request({
        method: "GET",
        url: `/api/v1/workspaces/${ws.id}`,
        headers: bearer(ADMIN_SECRET),
      });
      expect(res.statusCode).toBe(200);
      expect(res.json().workspace).toMatchObject({ id: ws.id, name: "AdminRead" });
      expect(res.json().workspace.eoa.address).toBe(ws.eoaAddress);
    });

    it.each([
      ["an unknown id", "00000000-0000-4000-8000-000000000000"],
      ["a malformed id", "not-a-uuid"],
      ["a SQL-looking id", "1'%20OR%20'1'='1"],
    ])("admin secret with %s → 404 Workspace not found", async (_label, id) => {
      const res = await t.request({
        method: "GET",
        url: `/api/v1/workspaces/${id}`,
        headers: bearer(ADMIN_SECRET),
      });
      expect(res.statusCode).toBe(404);
      expect(res.headers["content-type"]).toMatch(/^application\/json/);
      expect(res.json()).toEqual({ error: "Workspace not found" });
    });

    it("no key → 401, garbage key → 401", async () => {
      const ws = await createWorkspace(t);
      const none = await t.request({ method: "GET", url: `/api/v1/workspaces/${ws.id}` });
      expect(none.statusCode).toBe(401);
      const garbage = await t.request({
        method: "GET",
        url: `/api/v1/workspaces/${ws.id}`,
        headers: bearer("xyz"),
      });
      expect(garbage.statusCode).toBe(401);
    });
  });
});

describe("API keys", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => t.close());

  const listKeys = async (key: string) => {
    const res = await t.request({ method: "GET", url: "/api/v1/keys", headers: bearer(key) });
    expect(res.statusCode).toBe(200);
    return res.json().apiKeys as Array<Record<string, unknown>>;
  };

  it("POST /api/v1/keys → 201, the key is shown once and works immediately", async () => {
    const ws = await createWorkspace(t);
    const res = await t.request({
      method: "POST",
      url: "/api/v1/keys",
      headers: bearer(ws.testKey),
      payload: { environment: "sandbox", name: "ci" },
    });
    expect(res.statusCode).toBe(201);
    const apiKey = res.json().apiKey;
    expect(apiKey.id).toMatch(UUID);
    expect(apiKey.key).toMatch(SANDBOX_KEY);
    expect(apiKey.prefix).toBe(apiKey.key.slice(0, 12));
    expect(apiKey.environment).toBe("sandbox");
    expect(apiKey.name).toBe("ci");
    expect(apiKey.createdAt).toMatch(ISO);
    expect(apiKey.key).not.toBe(ws.testKey);

    // Usable at once: reads the workspace and lists itself.
    const read = await t.request({
      method: "GET",
      url: `/api/v1/workspaces/${ws.id}`,
      headers: bearer(apiKey.key),
    });
    expect(read.statusCode).toBe(200);
    const listed = await listKeys(apiKey.key);
    expect(listed.map((k) => k.id)).toContain(apiKey.id);
  });

  it("a live key creates live keys", async () => {
    const ws = await createWorkspace(t);
    const res = await t.request({
      method: "POST",
      url: "/api/v1/keys",
      headers: bearer(ws.liveKey),
      payload: { environment: "live", name: "live-ci" },
    });
    expect(res.statusCode).toBe(201);
    expect(res.json().apiKey.key).toMatch(LIVE_KEY);
    expect(res.json().apiKey.environment).toBe("live");
    expect((await listKeys(res.json().apiKey.key)).map((k) => k.id)).toContain(res.json().apiKey.id);
  });

  it("GET /api/v1/keys lists metadata only: no key, no hash, with revokedAt", async () => {
    const ws = await createWorkspace(t);
    const created = await t.request({
      method: "POST",
      url: "/api/v1/keys",
      headers: bearer(ws.testKey),
      payload: { environment: "sandbox", name: "second" },
    });
    const second = created.json().apiKey;
    const res = await t.request({ method: "GET", url: "/api/v1/keys", headers: bearer(ws.testKey) });
    expect(res.statusCode).toBe(200);
    const keys = res.json().apiKeys as Array<Record<string, unknown>>;
    expect(keys).toHaveLength(2);
    for (const k of keys) {
      expect(k.id).toMatch(UUID);
      expect(k.prefix).toMatch(/^svc_test_[0-9A-Za-z]{3}$/);
      expect(k.environment).toBe("sandbox");
      expect(k).toHaveProperty("name");
      expect(k.createdAt).toMatch(ISO);
      expect(k).toHaveProperty("lastUsedAt");
      expect(k).toHaveProperty("revokedAt");
      expect(k.revokedAt).toBeNull();
      expect(k).not.toHaveProperty("key");
      expect(k).not.toHaveProperty("key_hash");
      expect(k).not.toHaveProperty("keyHash");
      expect(k).not.toHaveProperty("hash");
    }
    expect(keys.find((k) => k.id === second.id)).toMatchObject({ name: "second", prefix: second.prefix });

    const hashes = await t.database.db
      .selectFrom("api_keys")
      .select("key_hash")
      .where("workspace_id", "=", ws.id)
      .execute();
    for (const secret of [ws.testKey, second.key, ...hashes.map((h) => h.key_hash)]) {
      expect(res.body).not.toContain(secret);
    }
  });

  it("a sandbox key asking for a live key → 403 and no key is created", async () => {
    const ws = await createWorkspace(t);
    const res = await t.request({
      method: "POST",
      url: "/api/v1/keys",
      headers: bearer(ws.testKey),
      payload: { environment: "live", name: "escalate" },
    });
    expect(res.statusCode).toBe(403);
    expect(typeof res.json().error).toBe("string");
    expect(res.body).not.toContain("svc_live_");
    expect(await listKeys(ws.liveKey)).toHaveLength(1);
    const rows = await t.database.db
      .selectFrom("api_keys")
      .select("id")
      .where("workspace_id", "=", ws.id)
      .execute();
    expect(rows).toHaveLength(2);
  });

  it("a live key asking for a sandbox key → 403", async () => {
    const ws = await createWorkspace(t);
    const res = await t.request({
      method: "POST",
      url: "/api/v1/keys",
      headers: bearer(ws.liveKey),
      payload: { environment: "sandbox" },
    });
    expect(res.statusCode).toBe(403);
  });

  it("an invalid environment → 400 naming the field", async () => {
    const ws = await createWorkspace(t);
    const res = await t.request({
      method: "POST",
      url: "/api/v1/keys",
      headers: bearer(ws.testKey),
      payload: { environment: "production" },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toContain("environment");
  });

  it("DELETE revokes: the revoked key gets 401 on its very next request, other keys keep working", async () => {
    const ws = await createWorkspace(t);
    const created = await t.request({
      method: "POST",
      url: "/api/v1/keys",
      headers: bearer(ws.testKey),
      payload: { environment: "sandbox", name: "doomed" },
    });
    const doomed = created.json().apiKey;
    // The doomed key works (and has been used) before revocation.
    expect(
      (await t.request({ method: "GET", url: "/api/v1/keys", headers: bearer(doomed.key) })).statusCode,
    ).toBe(200);

    const del = await t.request({
      method: "DELETE",
      url: `/api/v1/keys/${doomed.id}`,
      headers: bearer(ws.testKey),
    });
    expect(del.statusCode).toBe(200);
    expect(del.json()).toEqual({ success: true });

    const after = await t.request({ method: "GET", url: "/api/v1/keys", headers: bearer(doomed.key) });
    expect(after.statusCode).toBe(401);
    expect(typeof after.json().error).toBe("string");
    const afterWs = await t.request({
      method: "GET",
      url: `/api/v1/workspaces/${ws.id}`,
      headers: bearer(doomed.key),
    });
    expect(afterWs.statusCode).toBe(401);
    const afterPay = await t.request({
      method: "POST",
      url: "/api/v1/payments",
      headers: bearer(doomed.key),
      payload: { tokenSymbol: "USDC", amount: "1" },
    });
    expect(afterPay.statusCode).toBe(401);

    // The other keys of the workspace are untouched.
    const others = await listKeys(ws.testKey);
    const revoked = others.find((k) => k.id === doomed.id);
    expect(revoked, "revoked key stays listed").toBeDefined();
    expect(revoked?.revokedAt).toMatch(ISO);
    expect(others.find((k) => k.id !== doomed.id)?.revokedAt).toBeNull();
    expect(
      (await t.request({ method: "GET", url: `/api/v1/workspaces/${ws.id}`, headers: bearer(ws.liveKey) }))
        .statusCode,
    ).toBe(200);
  });

  it("a key can revoke itself and is refused right after", async () => {
    const ws = await createWorkspace(t);
    const created = await t.request({
      method: "POST",
      url: "/api/v1/keys",
      headers: bearer(ws.testKey),
      payload: { environment: "sandbox" },
    });
    const self = created.json().apiKey;
    const del = await t.request({
      method: "DELETE",
      url: `/api/v1/keys/${self.id}`,
      headers: bearer(self.key),
    });
    expect(del.statusCode).toBe(200);
    const again = await t.request({
      method: "DELETE",
      url: `/api/v1/keys/${self.id}`,
      headers: bearer(self.key),
    });
    expect(again.statusCode).toBe(401);
    expect((await listKeys(ws.testKey)).find((k) => k.id === self.id)?.revokedAt).toMatch(ISO);
  });

  it("deleting another workspace's key id → 404 and the key keeps working", async () => {
    const mine = await createWorkspace(t);
    const theirs = await createWorkspace(t);
    const theirKeyId = (await listKeys(theirs.testKey))[0]?.id as string;
    expect(theirKeyId).toMatch(UUID);
    const res = await t.request({
      method: "DELETE",
      url: `/api/v1/keys/${theirKeyId}`,
      headers: bearer(mine.testKey),
    });
    expect(res.statusCode).toBe(404);
    expect(typeof res.json().error).toBe("string");
    expect((await listKeys(theirs.testKey))[0]?.revokedAt).toBeNull();
    const row = await t.database.db
      .selectFrom("api_keys")
      .select("revoked_at")
      .where("id", "=", theirKeyId)
      .executeTakeFirstOrThrow();
    expect(row.revoked_at).toBeNull();
  });

  it.each([
    ["a malformed id", "not-a-uuid"],
    ["an unknown id", "00000000-0000-4000-8000-000000000000"],
  ])("deleting %s → 404", async (_label, id) => {
    const ws = await createWorkspace(t);
    const res = await t.request({ method: "DELETE", url: `/api/v1/keys/${id}`, headers: bearer(ws.testKey) });
    expect(res.statusCode).toBe(404);
    expect(res.headers["content-type"]).toMatch(/^application\/json/);
    expect(typeof res.json().error).toBe("string");
  });

  it("a live key cannot see (or revoke) sandbox keys", async () => {
    const ws = await createWorkspace(t);
    const sandboxKeys = await listKeys(ws.testKey);
    const liveKeys = await listKeys(ws.liveKey);
    expect(liveKeys.length).toBeGreaterThan(0);
    for (const k of liveKeys) expect(k.environment).toBe("live");
    const sandboxIds = sandboxKeys.map((k) => k.id);
    for (const k of liveKeys) expect(sandboxIds).not.toContain(k.id);
    expect(JSON.stringify(liveKeys)).not.toContain("svc_test_");

    const del = await t.request({
      method: "DELETE",
      url: `/api/v1/keys/${sandboxIds[0]}`,
      headers: bearer(ws.liveKey),
    });
    expect(del.statusCode).toBe(404);
    expect(
      (await t.request({ method: "GET", url: "/api/v1/keys", headers: bearer(ws.testKey) })).statusCode,
    ).toBe(200);
  });

  it("the admin secret is not a workspace key for /api/v1/keys", async () => {
    const res = await t.request({ method: "GET", url: "/api/v1/keys", headers: bearer(ADMIN_SECRET) });
    expect([401, 403]).toContain(res.statusCode);
    expect(res.body).not.toContain("svc_");
  });

  it("no key → 401 on every key endpoint", async () => {
    for (const [method, url] of [
      ["GET", "/api/v1/keys"],
      ["POST", "/api/v1/keys"],
      ["DELETE", "/api/v1/keys/00000000-0000-4000-8000-000000000000"],
    ] as const) {
      const res = await t.request({ method, url, ...(method === "POST" ? { payload: {} } : {}) });
      expect(res.statusCode, `${method} ${url}`).toBe(401);
    }
  });
});
