import { randomBytes } from "node:crypto";
import type { InjectOptions } from "fastify";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SANDBOX_A } from "../../src/chain/simulated/networks.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";

// CSV exports of payments and payouts (D18, D13, D4), against the real app on a real database.

const PAYMENT_HEADER =
  "id,status,environment,network,paymentMethod,paymentProvider,tokenSymbol,grossAmount,feeAmount,netAmount," +
  "description,metadata,merchantWallet,walletType,receivingAddress,payerAddress,txHash," +
  "settlementNetTxHash,settlementFeeTxHash,failureReason,expiresAt,createdAt,updatedAt";
const PAYOUT_HEADER =
  "id,status,environment,network,tokenSymbol,amount,fromAddress,destinationAddress,txHash,userOpHash," +
  "description,metadata,createdAt,completedAt";
const MERCHANT = "0x2222222222222222222222222222222222222222";

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp({ RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" });
});
afterAll(async () => t.close());

const request = (key: string, method: "GET" | "POST", url: string, payload?: unknown) =>
  t.request({
    method,
    url,
    headers: bearer(key),
    ...(payload === undefined ? {} : { payload: payload as InjectOptions["payload"] }),
  });

async function exportCsv(key: string, what: "payments" | "payouts", query: Record<string, string> = {}) {
  const search = new URLSearchParams(query).toString();
  const res = await request(key, "GET", `/api/v1/${what}/export.csv${search ? `?${search}` : ""}`);
  expect(res.statusCode, res.body).toBe(200);
  expect(res.headers["content-type"]).toBe("text/csv; charset=utf-8");
  expect(res.body.endsWith("\r\n")).toBe(true);
  return res;
}

/** The first column of each record (ids: no quoting there), header left out. */
const idsIn = (csv: string) =>
  csv
    .split("\r\n")
    .slice(1, -1)
    .map((line) => line.split(",")[0] ?? "");

const exportedIds = async (key: string, query: Record<string, string> = {}) =>
  idsIn((await exportCsv(key, "payments", query)).body);

interface Inserted {
  environment?: "sandbox" | "live";
  status?: string;
  tokenSymbol?: string;
  paymentMethod?: "crypto" | "card";
  createdAt: string;
  description?: string;
}

async function insertPayment(ws: CreatedWorkspace, p: Inserted): Promise<string> {
  const card = p.paymentMethod === "card";
  const createdAt = new Date(p.createdAt);
  const row = await t.database.db
    .insertInto("payments")
    .values({
      workspace_id: ws.id,
      environment: p.environment ?? "sandbox",
      status: p.status ?? "forwarded",
      payment_method: p.paymentMethod ?? "crypto",
      payment_provider: card ? "card" : "onchain",
      token_symbol: p.tokenSymbol ?? (card ? "USD" : "USDC"),
      gross_amount: "10000",
      fee_amount: "150",
      net_amount: "9850",
      merchant_wallet: MERCHANT,
      wallet_type: "eoa",
      receiving_address: card ? null : ws.eoaAddress,
      description: p.description ?? null,
      metadata: JSON.stringify({}),
      return_url: null,
      cancel_url: null,
      expires_at: new Date(createdAt.getTime() + 3_600_000),
      created_at: createdAt,
      updated_at: createdAt,
    })
    .returning("id")
    .executeTakeFirstOrThrow();
  return row.id;
}

/**
 * Rows i = 1..count with created_at `k.at`: five per millisecond with microsecond offsets, so
 * that many share a created_at (ties broken by id) and a key rounded to the millisecond would
 * lose rows at the boundaries of batches. Inserted in ONE statement.
 */
const series = (count: number) => sql`generate_series(1, ${count}::int) AS i,
  LATERAL (SELECT timestamptz '2024-06-01 00:00:00+00' + (i / 5) * interval '1 millisecond'
                  + (i % 3 + 1) * interval '1 microsecond' AS at) AS k`;

/** The workspace's ids in the order of the lists: created_at, then id, both descending. */
async function idsNewestFirst(table: "payments" | "payouts", ws: CreatedWorkspace): Promise<string[]> {
  const rows = await t.database.db
    .selectFrom(table)
    .select("id")
    .where("workspace_id", "=", ws.id)
    .orderBy("created_at", "desc")
    .orderBy("id", "desc")
    .execute();
  return rows.map((row) => row.id);
}

describe("GET /api/v1/payments/export.csv", () => {
  it("answers the header and one record per payment, exactly, as an attachment", async () => {
    const ws = await createWorkspace(t);
    const created = await request(ws.testKey, "POST", "/api/v1/payments", {
      tokenSymbol: "USDC",
      amount: "100",
      description: "Order A-1",
      metadata: { order: "A-1" },
    });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().payment.id as string;
    const p = (await request(ws.testKey, "GET", `/api/v1/payments/${id}`)).json().payment;

    const res = await exportCsv(ws.testKey, "payments");
    expect(res.headers["content-disposition"]).toBe('attachment; filename="payments-sandbox.csv"');
    const record = [
      id,
      "forwarded",
      "sandbox",
      SANDBOX_A.id,
      "crypto",
      "onchain",
      "USDC",
      "100.00",
      "1.50",
      "98.50",
      "Order A-1",
      '"{""order"":""A-1""}"',
      p.merchantWallet ?? "",
      "eoa",
      ws.eoaAddress,
      p.payerAddress ?? "",
      p.txHash ?? "",
      p.settlementTxHashes?.net ?? "",
      p.settlementTxHashes?.fee ?? "",
      p.failureReason ?? "",
      p.expiresAt,
      p.createdAt,
      p.updatedAt,
    ].join(",");
    expect(res.body).toBe(`${PAYMENT_HEADER}\r\n${record}\r\n`);
  });

  it("quotes commas, quotes and newlines, and prefixes ' to cells beginning with = + - @", async () => {
    const ws = await createWorkspace(t);
    const descriptions = [
      'Hello, "world"\nsecond line',
      "just\na newline",
      "=SUM(A1:A9)",
      "+1",
      "-1",
      "@cmd",
      "=1,2",
      "a=b",
    ];
    for (const description of descriptions) {
      const res = await request(ws.testKey, "POST", "/api/v1/payments", {
        tokenSymbol: "USDC",
        amount: "1",
        description,
      });
      expect(res.statusCode, res.body).toBe(201);
    }
    const body = (await exportCsv(ws.testKey, "payments")).body;
    const cells = [
      ',"Hello, ""world""\nsecond line",',
      ',"just\na newline",',
      ",'=SUM(A1:A9),",
      ",'+1,",
      ",'-1,",
      ",'@cmd,",
      ',"\'=1,2",',
      ",a=b,",
    ];
    for (const cell of cells) expect(body).toContain(cell);
    // Each newline stays inside its quoted cell: one line per record, and the header.
    expect(body.split("\r\n")).toHaveLength(descriptions.length + 2);
  });

  describe("filters", () => {
    let ws: CreatedWorkspace;
    const ids: Record<string, string> = {};
    beforeAll(async () => {
      ws = await createWorkspace(t);
      ids.a = await insertPayment(ws, {
        createdAt: "2025-01-10T00:00:00Z",
        description: "Invoice 100% paid",
      });
      ids.b = await insertPayment(ws, {
        status: "pending",
        tokenSymbol: "ETH",
        createdAt: "2025-01-20T00:00:00Z",
        description: "invoice 1000 paid",
      });
      ids.c = await insertPayment(ws, {
        paymentMethod: "card",
        createdAt: "2025-02-05T00:00:00Z",
        description: "Card order a_b",
      });
      ids.d = await insertPayment(ws, {
        status: "cancelled",
        createdAt: "2025-02-20T00:00:00Z",
        description: "Card order axb",
      });
      ids.live = await insertPayment(ws, {
        environment: "live",
        createdAt: "2025-01-15T00:00:00Z",
        description: "Invoice live",
      });
    });

    it.each([
      [{}, ["d", "c", "b", "a"]],
      [{ status: "forwarded" }, ["c", "a"]],
      [{ tokenSymbol: "USDC" }, ["d", "a"]],
      [{ tokenSymbol: "USD" }, ["c"]],
      [{ paymentMethod: "card" }, ["c"]],
      [{ createdFrom: "2025-01-20", createdTo: "2025-02-20T00:00:00Z" }, ["c", "b"]],
      [{ createdFrom: "2025-01-20T00:00:00.001Z" }, ["d", "c"]],
      [{ search: "INVOICE" }, ["b", "a"]],
      [{ search: "100%" }, ["a"]],
      [{ search: "a_b" }, ["c"]],
      [{ status: "forwarded", tokenSymbol: "USDC", paymentMethod: "crypto" }, ["a"]],
      [{ status: "cancelled", search: "order" }, ["d"]],
    ])("%j → %j", async (query, expected) => {
      expect(await exportedIds(ws.testKey, query)).toEqual(expected.map((name) => ids[name]));
    });

    it("a full payment id finds that payment, in any case", async () => {
      expect(await exportedIds(ws.testKey, { search: (ids.b ?? "").toUpperCase() })).toEqual([ids.b]);
      expect(await exportedIds(ws.testKey, { search: ids.b ?? "", status: "forwarded" })).toEqual([]);
    });

    it("shows only the key's environment; naming the other gives the header row alone (D13)", async () => {
      expect(await exportedIds(ws.liveKey)).toEqual([ids.live]);
      expect(await exportedIds(ws.liveKey, { environment: "live" })).toEqual([ids.live]);
      const other = await exportCsv(ws.testKey, "payments", { environment: "live" });
      expect(other.body).toBe(`${PAYMENT_HEADER}\r\n`);
      expect(other.headers["content-disposition"]).toBe('attachment; filename="payments-live.csv"');
      expect((await exportCsv(ws.liveKey, "payments", { environment: "sandbox" })).body).toBe(
        `${PAYMENT_HEADER}\r\n`,
      );
    });

    it("never shows another workspace's payments", async () => {
      const other = await createWorkspace(t);
      const theirs = await insertPayment(other, {
        createdAt: "2025-01-12T00:00:00Z",
        description: "Invoice",
      });
      expect(await exportedIds(ws.testKey, { search: "invoice" })).toEqual([ids.b, ids.a]);
      expect(await exportedIds(ws.testKey, { search: theirs })).toEqual([]);
      expect(await exportedIds(other.testKey)).toEqual([theirs]);
    });

    it.each([
      [{ status: "paid" }, "status"],
      [{ environment: "staging" }, "environment"],
      [{ tokenSymbol: "BTC" }, "tokenSymbol"],
      [{ paymentMethod: "cash" }, "paymentMethod"],
      [{ createdFrom: "yesterday" }, "createdFrom"],
      [{ createdTo: "2025-02-30" }, "createdTo"],
      [{ createdFrom: "2025-02-01", createdTo: "2025-01-01" }, "createdTo"],
      [{ search: "x".repeat(1001) }, "search"],
      ["status=forwarded&status=pending", "status"],
      ["search=a&search=b", "search"],
    ])("refuses %j with 400 JSON naming %s", async (query, field) => {
      const search = typeof query === "string" ? query : new URLSearchParams(query).toString();
      const res = await request(ws.testKey, "GET", `/api/v1/payments/export.csv?${search}`);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.headers["content-type"]).toMatch(/^application\/json/);
      expect(res.json().error).toMatch(new RegExp(`^${field} `));
    });

    it("needs an API key", async () => {
      const res = await t.request({ method: "GET", url: "/api/v1/payments/export.csv" });
      expect(res.statusCode).toBe(401);
      expect(res.headers["content-type"]).toMatch(/^application\/json/);
    });
  });

  it("streams 2,500 payments, each exactly once, newest first, across batches of 1,000", async () => {
    const ws = await createWorkspace(t);
    await sql`
      INSERT INTO payments (workspace_id, environment, status, payment_method, payment_provider, token_symbol,
                            gross_amount, fee_amount, net_amount, wallet_type, receiving_address, description,
                            expires_at, created_at, updated_at)
      SELECT ${ws.id}::uuid, 'sandbox', 'forwarded', 'crypto', 'onchain', 'USDC', 1000000, 15000, 985000, 'eoa',
             ${ws.eoaAddress}, 'bulk ' || i, k.at + interval '1 hour', k.at, k.at
      FROM ${series(2500)}`.execute(t.database.db);
    const ids = await exportedIds(ws.testKey);
    expect(new Set(ids).size).toBe(2500);
    expect(ids).toEqual(await idsNewestFirst("payments", ws));
  });
});

describe("GET /api/v1/payouts/export.csv", () => {
  it("streams more than a batch of payouts, each once, newest first, ties broken by id", async () => {
    const ws = await createWorkspace(t);
    await sql`
      INSERT INTO payouts (workspace_id, environment, network, status, token_symbol, amount, destination_address,
                           from_address, wallet_type, created_at, completed_at)
      SELECT ${ws.id}::uuid, 'sandbox', ${SANDBOX_A.id}, CASE WHEN i % 4 = 0 THEN 'failed' ELSE 'completed' END, 'USDC', 1000,
             ${MERCHANT}, ${ws.eoaAddress}, 'eoa', k.at, k.at
      FROM ${series(1200)}`.execute(t.database.db);
    const ids = idsIn((await exportCsv(ws.testKey, "payouts")).body);
    expect(new Set(ids).size).toBe(1200);
    expect(ids).toEqual(await idsNewestFirst("payouts", ws));
  });

  it("exports the key's payouts of every status, newest first, with the same rules", async () => {
    const ws = await createWorkspace(t, { adminEmail: `csv-${randomBytes(4).toString("hex")}@example.test` });
    const faucet = await request(ws.testKey, "POST", "/api/v1/sandbox/faucet", {
      tokenSymbol: "USDC",
      amount: "100",
    });
    expect(faucet.statusCode, faucet.body).toBe(200);
    const destination = `0x${randomBytes(20).toString("hex")}`;
    const sent: Array<{ description: string; status: number; destination: string }> = [
      { description: 'Refund, "A"', status: 200, destination },
      { description: "=HYPERLINK(1)", status: 200, destination },
      { description: "fails", status: 500, destination: "0x000000000000000000000000000000000000dEaD" },
    ];
    for (const s of sent) {
      const res = await request(ws.testKey, "POST", "/api/v1/payouts", {
        tokenSymbol: "USDC",
        amount: "2.5",
        destinationAddress: s.destination,
        description: s.description,
      });
      expect(res.statusCode, res.body).toBe(s.status);
    }
    const rows = await t.database.db
      .selectFrom("payouts")
      .selectAll()
      .where("workspace_id", "=", ws.id)
      .orderBy("created_at", "desc")
      .orderBy("id", "desc")
      .execute();
    expect(rows.map((r) => r.description)).toEqual(["fails", "=HYPERLINK(1)", 'Refund, "A"']);
    const line = (r: (typeof rows)[number], description: string) =>
      [
        r.id,
        r.status,
        "sandbox",
        SANDBOX_A.id,
        "USDC",
        "2.50",
        ws.eoaAddress,
        r.destination_address,
        r.tx_hash ?? "",
        "",
        description,
        "{}",
        r.created_at.toISOString(),
        r.completed_at?.toISOString() ?? "",
      ].join(",");
    const [failed, formula, quoted] = rows as [
      (typeof rows)[number],
      (typeof rows)[number],
      (typeof rows)[number],
    ];
    expect(failed.status).toBe("failed");

    const all = await exportCsv(ws.testKey, "payouts");
    expect(all.headers["content-disposition"]).toBe('attachment; filename="payouts-sandbox.csv"');
    expect(all.body).toBe(
      `${PAYOUT_HEADER}\r\n${line(failed, "fails")}\r\n${line(formula, "'=HYPERLINK(1)")}\r\n${line(quoted, '"Refund, ""A"""')}\r\n`,
    );
    expect((await exportCsv(ws.testKey, "payouts", { status: "failed" })).body).toBe(
      `${PAYOUT_HEADER}\r\n${line(failed, "fails")}\r\n`,
    );
    expect(
      (await exportCsv(ws.testKey, "payouts", { status: "completed", environment: "sandbox" })).body,
    ).toBe(
      `${PAYOUT_HEADER}\r\n${line(formula, "'=HYPERLINK(1)")}\r\n${line(quoted, '"Refund, ""A"""')}\r\n`,
    );
    // The other environment, and another workspace, see none of them.
    expect((await exportCsv(ws.testKey, "payouts", { environment: "live" })).body).toBe(
      `${PAYOUT_HEADER}\r\n`,
    );
    expect((await exportCsv(ws.liveKey, "payouts")).body).toBe(`${PAYOUT_HEADER}\r\n`);
    const other = await createWorkspace(t);
    expect((await exportCsv(other.testKey, "payouts")).body).toBe(`${PAYOUT_HEADER}\r\n`);

    for (const [query, field] of [
      ["status=done", "status"],
      ["environment=prod", "environment"],
      ["status=failed&status=completed", "status"],
    ] as const) {
      const res = await request(ws.testKey, "GET", `/api/v1/payouts/export.csv?${query}`);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.headers["content-type"]).toMatch(/^application\/json/);
      expect(res.json().error).toMatch(new RegExp(`^${field} `));
    }
  });
});
