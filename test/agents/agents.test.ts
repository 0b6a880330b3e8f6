import { sql } from "kysely";
import { beforeAll, describe, expect, it } from "vitest";
import {
  call,
  createAgent,
  expectError,
  ISO,
  type Json,
  MISSING_UUID,
  t,
  useAgentsApp,
} from "../support/agents-and-wallets.ts";
import { type CreatedWorkspace, createWorkspace } from "../support/app.ts";

// Agents: CRUD, the list's paging, limits and search, and its query plans at scale. Wallets:
// test/wallets/wallets.test.ts; isolation and events: isolation-and-events.test.ts.

useAgentsApp();

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
