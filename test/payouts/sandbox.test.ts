import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { InjectOptions } from "fastify";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { headerOf, MailSink } from "../support/mail-sink.ts";

// Payouts and the circuit breaker in the sandbox (interface parts 3, 4.10–4.12, 6, 7; decisions
// D3, D6, D13): the real app on a real database, money on the simulated ledger funded by the
// sandbox faucet, and the breaker's e-mail delivered to a real SMTP listener on 127.0.0.1.

const FAILURE_ADDRESS = "0x000000000000000000000000000000000000dEaD";
const TX_HASH = /^0x[0-9a-f]{64}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

const MSG = {
  required: "Missing required fields: tokenSymbol, amount, destinationAddress",
  invalidDestination: "Invalid destinationAddress format",
  invalidAmount: "Amount must be a positive number",
  insufficient: "Insufficient balance",
  noWallet: "No workspace wallet found. Provision a wallet first.",
  liveNotConfigured: "Live network is not configured",
  duplicateNote: "Duplicate idempotencyKey; original result returned",
} as const;

type Json = Record<string, unknown>;

const randomAddress = () => `0x${randomBytes(20).toString("hex")}`;
const uniqueEmail = () => `admin-${randomBytes(6).toString("hex")}@example.test`;

// ---------------------------------------------------------------------------------------------

const tempDirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "payouts-sandbox-"));
  tempDirs.push(dir);
  return dir;
}

const mail = new MailSink();
let t: TestApp;
/** Apps started by a single test (closed in afterEach). */
const extraApps: TestApp[] = [];

beforeAll(async () => {
  const smtpUrl = await mail.start();
  t = await startTestApp({
    SMTP_URL: smtpUrl,
    DATA_DIR: tempDir(),
    RATE_LIMIT_SANDBOX: "100000",
    RATE_LIMIT_LIVE: "100000",
  });
});

afterEach(async () => {
  t?.setNow(undefined);
  for (const app of extraApps.splice(0)) await app.close();
});

afterAll(async () => {
  await t?.close();
  await mail.stop();
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

function post(key: string, url: string, payload?: unknown, app: TestApp = t) {
  return app.request({
    method: "POST",
    url,
    headers: bearer(key),
    ...(payload === undefined ? {} : { payload: payload as InjectOptions["payload"] }),
  });
}

function get(key: string, url: string, app: TestApp = t) {
  return app.request({ method: "GET", url, headers: bearer(key) });
}

const payout = (key: string, body: unknown, app: TestApp = t) => post(key, "/api/v1/payouts", body, app);

async function newWorkspace(app: TestApp = t, body: Json = {}) {
  const adminEmail = uniqueEmail();
  const name = `Payouts ${randomBytes(4).toString("hex")}`;
  const ws = await createWorkspace(app, { name, adminEmail, ...body });
  return { ...ws, adminEmail, name };
}

async function faucet(ws: CreatedWorkspace, tokenSymbol: string, amount: string, app: TestApp = t) {
  const res = await post(ws.testKey, "/api/v1/sandbox/faucet", { tokenSymbol, amount }, app);
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as Json;
}

async function eoaBalances(ws: CreatedWorkspace, app: TestApp = t): Promise<Record<string, string>> {
  const res = await get(ws.testKey, "/api/v1/wallet/balance", app);
  expect(res.statusCode, res.body).toBe(200);
  return res.json().eoa.balances;
}

async function payoutState(ws: CreatedWorkspace, key = ws.testKey, app: TestApp = t) {
  const res = await get(key, `/api/v1/workspaces/${ws.id}/payout-state`, app);
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as Json;
}

/** Transfers the simulated ledger recorded from the workspace wallet (payout attempts). */
function ledgerTransfersFrom(ws: CreatedWorkspace, app: TestApp = t) {
  return app.database.db
    .selectFrom("ledger_transactions")
    .select(["tx_hash", "to_address", "amount", "status", "token_symbol"])
    .where("from_address", "=", ws.eoaAddress.toLowerCase())
    .execute();
}

function payoutRows(ws: CreatedWorkspace, app: TestApp = t) {
  return app.database.db
    .selectFrom("payouts")
    .select(["id", "status", "tx_hash", "environment"])
    .where("workspace_id", "=", ws.id)
    .execute();
}

function outbox(ws: CreatedWorkspace, type: string, app: TestApp = t) {
  return app.database.db
    .selectFrom("outbox_events")
    .select(["event_type", "payload", "environment"])
    .where("workspace_id", "=", ws.id)
    .where("event_type", "=", type)
    .orderBy("id")
    .execute();
}

async function ledgerBalance(address: string, token: string, app: TestApp = t): Promise<bigint> {
  const rows = await app.database.db
    .selectFrom("ledger_entries")
    .select("amount")
    .where("address", "=", address.toLowerCase())
    .where("token_symbol", "=", token)
    .execute();
  return rows.reduce((sum, row) => sum + BigInt(row.amount), 0n);
}

const failing = (amount = "1") => ({ tokenSymbol: "USDC", amount, destinationAddress: FAILURE_ADDRESS });

/** Three failed payouts: the third pauses the workspace (answers 503). */
async function tripBreaker(ws: CreatedWorkspace, app: TestApp = t) {
  for (const streak of [1, 2]) {
    const res = await payout(ws.testKey, failing(), app);
    expect(res.statusCode, res.body).toBe(500);
    expect(res.json().failStreak).toBe(streak);
  }
  const third = await payout(ws.testKey, failing(), app);
  expect(third.statusCode, third.body).toBe(503);
  return third.json() as Json;
}

// ---------------------------------------------------------------------------------------------

describe("sandbox payouts: success", () => {
  it("pays out from a faucet-funded wallet: 200 with the payout, and the balances move", async () => {
    const ws = await newWorkspace();
    const funded = await faucet(ws, "USDC", "100");
    expect(funded).toEqual({
      tokenSymbol: "USDC",
      walletType: "eoa",
      address: ws.eoaAddress,
      balance: "100.00",
    });

    const before = await get(ws.testKey, "/api/v1/wallet/balance");
    expect(before.json()).toEqual({
      environment: "sandbox",
      eoa: { address: ws.eoaAddress, balances: { USDC: "100.00", ETH: "0.00", ADAO: "0.00", DAI: "0.00" } },
      smartWallet: null,
    });

    const destination = randomAddress();
    const res = await payout(ws.testKey, {
      tokenSymbol: "USDC",
      amount: "10",
      destinationAddress: destination,
      description: "Refund #42",
      metadata: { orderId: "ord_42" },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^application\/json/);
    const body = res.json();
    expect(body.timestamp).toMatch(ISO);
    expect(body.payout).toMatchObject({
      txHash: expect.stringMatching(TX_HASH),
      amount: "10.00",
      tokenSymbol: "USDC",
      destinationAddress: destination,
      fromAddress: ws.eoaAddress,
      environment: "sandbox",
      status: "completed",
      description: "Refund #42",
      metadata: { orderId: "ord_42" },
    });

    const after = await get(ws.testKey, "/api/v1/wallet/balance");
    expect(after.json()).toEqual({
      environment: "sandbox",
      eoa: { address: ws.eoaAddress, balances: { USDC: "90.00", ETH: "0.00", ADAO: "0.00", DAI: "0.00" } },
      smartWallet: null,
    });
    expect(await ledgerBalance(destination, "USDC")).toBe(10_000_000n);
    const transfers = await ledgerTransfersFrom(ws);
    expect(transfers).toEqual([
      {
        tx_hash: body.payout.txHash,
        to_address: destination.toLowerCase(),
        amount: "10000000",
        status: "success",
        token_symbol: "USDC",
      },
    ]);
  });

  it("pays out ETH and ADAO with exact amounts (no rounding, no exponent)", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "ETH", "1");
    await faucet(ws, "ADAO", "50");
    const destination = randomAddress();
    const eth = await payout(ws.testKey, {
      tokenSymbol: "ETH",
      amount: "0.000015",
      destinationAddress: destination,
    });
    expect(eth.statusCode, eth.body).toBe(200);
    expect(eth.json().payout).toMatchObject({ amount: "0.000015", tokenSymbol: "ETH", status: "completed" });
    const adao = await payout(ws.testKey, {
      tokenSymbol: "ADAO",
      amount: "12.123456789012345678",
      destinationAddress: destination,
    });
    expect(adao.statusCode, adao.body).toBe(200);
    expect(adao.json().payout).toMatchObject({ amount: "12.123456789012345678", tokenSymbol: "ADAO" });
    expect(await eoaBalances(ws)).toEqual({
      USDC: "0.00",
      ETH: "0.999985",
      ADAO: "37.876543210987654322",
      DAI: "0.00",
    });
    expect(await ledgerBalance(destination, "ETH")).toBe(15_000_000_000_000n);
    expect(await ledgerBalance(destination, "ADAO")).toBe(12_123_456_789_012_345_678n);
  });

  it("a sandbox payment credits the net amount to the workspace wallet, which can then be paid out", async () => {
    const ws = await newWorkspace();
    const created = await post(ws.testKey, "/api/v1/payments", {
      tokenSymbol: "USDC",
      amount: "100",
      merchantWallet: randomAddress(),
    });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json().payment.status).toBe("forwarded");
    expect((await eoaBalances(ws)).USDC).toBe("98.50");

    const all = await payout(ws.testKey, {
      tokenSymbol: "USDC",
      amount: "98.50",
      destinationAddress: randomAddress(),
    });
    expect(all.statusCode, all.body).toBe(200);
    expect((await eoaBalances(ws)).USDC).toBe("0.00");

    const more = await payout(ws.testKey, {
      tokenSymbol: "USDC",
      amount: "0.01",
      destinationAddress: randomAddress(),
    });
    expect(more.statusCode, more.body).toBe(400);
    expect(more.json()).toEqual({
      error: MSG.insufficient,
      available: "0.00",
      requested: "0.01",
      tokenSymbol: "USDC",
    });
  });
});

describe("sandbox payouts: validation and pre-checks (part 7)", () => {
  const valid = () => ({ tokenSymbol: "USDC", amount: "1", destinationAddress: randomAddress() });

  it("answers every validation error with the interface's message, word for word", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    const cases: Array<[string, unknown, string]> = [
      ["empty body object", {}, MSG.required],
      ["no tokenSymbol", { amount: "1", destinationAddress: randomAddress() }, MSG.required],
      ["no amount", { tokenSymbol: "USDC", destinationAddress: randomAddress() }, MSG.required],
      ["no destinationAddress", { tokenSymbol: "USDC", amount: "1" }, MSG.required],
      ["null destinationAddress", { ...valid(), destinationAddress: null }, MSG.required],
      ["short address", { ...valid(), destinationAddress: "0x1234" }, MSG.invalidDestination],
      ["address without 0x", { ...valid(), destinationAddress: "22".repeat(20) }, MSG.invalidDestination],
      ["41 hex chars", { ...valid(), destinationAddress: `0x${"a".repeat(41)}` }, MSG.invalidDestination],
      ["non-hex chars", { ...valid(), destinationAddress: `0x${"g".repeat(40)}` }, MSG.invalidDestination],
      ["address as a number", { ...valid(), destinationAddress: 12345 }, MSG.invalidDestination],
      ["zero", { ...valid(), amount: "0" }, MSG.invalidAmount],
      ["0.00", { ...valid(), amount: "0.00" }, MSG.invalidAmount],
      ["negative", { ...valid(), amount: "-5" }, MSG.invalidAmount],
      ["plus sign", { ...valid(), amount: "+5" }, MSG.invalidAmount],
      ["words", { ...valid(), amount: "ten" }, MSG.invalidAmount],
      ["exponent", { ...valid(), amount: "1e3" }, MSG.invalidAmount],
      ["hex", { ...valid(), amount: "0x10" }, MSG.invalidAmount],
      ["spaces", { ...valid(), amount: " 1" }, MSG.invalidAmount],
      ["a JSON number", { ...valid(), amount: 10 }, MSG.invalidAmount],
      ["more decimals than USDC has", { ...valid(), amount: "1.0000001" }, MSG.invalidAmount],
      ["trailing dot", { ...valid(), amount: "1." }, MSG.invalidAmount],
    ];
    for (const [label, body, message] of cases) {
      const res = await payout(ws.testKey, body);
      expect(res.statusCode, `${label}: ${res.body}`).toBe(400);
      expect(res.headers["content-type"], label).toMatch(/^application\/json/);
      expect(res.json(), label).toEqual({ error: message });
    }
    // Validation errors never move money and never count toward the breaker (D13).
    expect(await ledgerTransfersFrom(ws)).toEqual([]);
    expect(await payoutRows(ws)).toEqual([]);
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });
    expect((await eoaBalances(ws)).USDC).toBe("100.00");
  });

  it("an empty amount string is a malformed amount (D13: empty → Amount must be a positive number)", async () => {
    const ws = await newWorkspace();
    const res = await payout(ws.testKey, { ...valid(), amount: "" });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ error: MSG.invalidAmount });
  });

  it("refuses an unknown or lower-case token symbol with 400", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "10");
    for (const tokenSymbol of ["BTC", "usdc", "DAI", "USD"]) {
      const res = await payout(ws.testKey, { ...valid(), tokenSymbol });
      expect(res.statusCode, `${tokenSymbol}: ${res.body}`).toBe(400);
      expect(typeof res.json().error).toBe("string");
    }
    expect(await ledgerTransfersFrom(ws)).toEqual([]);
  });

  it("Insufficient balance: 400 with available, requested and tokenSymbol; nothing is sent", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "5");
    const res = await payout(ws.testKey, { ...valid(), amount: "10" });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({
      error: MSG.insufficient,
      available: "5.00",
      requested: "10.00",
      tokenSymbol: "USDC",
    });
    const eth = await payout(ws.testKey, { ...valid(), tokenSymbol: "ETH", amount: "0.5" });
    expect(eth.statusCode, eth.body).toBe(400);
    expect(eth.json()).toEqual({
      error: MSG.insufficient,
      available: "0.00",
      requested: "0.50",
      tokenSymbol: "ETH",
    });
    expect(await ledgerTransfersFrom(ws)).toEqual([]);
    expect((await eoaBalances(ws)).USDC).toBe("5.00");
    // A balance pre-check is not a failed transfer (D13).
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });
    expect(await outbox(ws, "payout.failed")).toEqual([]);
  });

  it("concurrent payouts beyond the balance: those that fit complete, the rest get Insufficient balance and record nothing", async () => {
    // The balance is checked where the money moves, under the wallet's debit lock: two app
    // instances on one database race for the same wallet, and none of them overdraws it or
    // counts a short balance as a failed transfer.
    const other = await startTestApp({}, { database: t.database });
    try {
      const ws = await newWorkspace();
      await faucet(ws, "USDC", "10");
      const answers = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          payout(ws.testKey, { ...valid(), amount: "3", description: `race ${i}` }, i % 2 === 0 ? t : other),
        ),
      );
      const ok = answers.filter((a) => a.statusCode === 200);
      const short = answers.filter((a) => a.statusCode !== 200);
      expect(ok).toHaveLength(3);
      expect(short.map((a) => [a.statusCode, a.json()])).toEqual([
        [400, { error: MSG.insufficient, available: "1.00", requested: "3.00", tokenSymbol: "USDC" }],
        [400, { error: MSG.insufficient, available: "1.00", requested: "3.00", tokenSymbol: "USDC" }],
        [400, { error: MSG.insufficient, available: "1.00", requested: "3.00", tokenSymbol: "USDC" }],
      ]);
      expect(await ledgerBalance(ws.eoaAddress, "USDC")).toBe(1_000_000n);
      const rows = await payoutRows(ws);
      expect(rows.map((row) => row.status)).toEqual(["completed", "completed", "completed"]);
      expect((await ledgerTransfersFrom(ws)).map((tx) => tx.status)).toEqual([
        "success",
        "success",
        "success",
      ]);
      expect(await outbox(ws, "payout.completed")).toHaveLength(3);
      expect(await outbox(ws, "payout.failed")).toEqual([]);
      expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });
    } finally {
      await other.close(true);
    }
  });

  it("a workspace without a wallet answers the part 7 message", async () => {
    const ws = await newWorkspace();
    // Not reachable through the API (creating a workspace provisions its EOA): remove the record.
    await t.database.db
      .deleteFrom("workspace_wallets")
      .where("workspace_id", "=", ws.id)
      .where("kind", "=", "eoa")
      .execute();
    const res = await payout(ws.testKey, valid());
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ error: MSG.noWallet });
  });

  it("the faucet refuses live keys with 403", async () => {
    const ws = await newWorkspace();
    const res = await post(ws.liveKey, "/api/v1/sandbox/faucet", { tokenSymbol: "USDC", amount: "100" });
    expect(res.statusCode, res.body).toBe(403);
    expect(typeof res.json().error).toBe("string");
    expect((await eoaBalances(ws)).USDC).toBe("0.00");
  });

  it("a live payout with no live network configured answers 503 Live network is not configured", async () => {
    const ws = await newWorkspace();
    const res = await payout(ws.liveKey, valid());
    expect(res.statusCode, res.body).toBe(503);
    expect(res.json()).toEqual({ error: MSG.liveNotConfigured });
    expect(await payoutRows(ws)).toEqual([]);
  });

  it("needs an API key", async () => {
    const res = await t.request({ method: "POST", url: "/api/v1/payouts", payload: valid() });
    expect(res.statusCode).toBe(401);
  });
});

describe("sandbox payouts: idempotencyKey", () => {
  it("a repeat returns the original txHash with the duplicate note, and the money moves once", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    const body = {
      tokenSymbol: "USDC",
      amount: "10",
      destinationAddress: randomAddress(),
      idempotencyKey: "payout-key-1",
    };
    const first = await payout(ws.testKey, body);
    expect(first.statusCode, first.body).toBe(200);
    const txHash = first.json().payout.txHash;
    expect(txHash).toMatch(TX_HASH);

    const repeat = await payout(ws.testKey, body);
    expect(repeat.statusCode, repeat.body).toBe(200);
    expect(repeat.json()).toMatchObject({
      payout: { txHash, status: "completed", note: MSG.duplicateNote },
    });
    expect((await eoaBalances(ws)).USDC).toBe("90.00");
    expect(await ledgerBalance(body.destinationAddress, "USDC")).toBe(10_000_000n);
    expect(await ledgerTransfersFrom(ws)).toHaveLength(1);
    expect(await payoutRows(ws)).toHaveLength(1);
    expect(await outbox(ws, "payout.completed")).toHaveLength(1);

    // The same key in another workspace is another payout.
    const other = await newWorkspace();
    await faucet(other, "USDC", "10");
    const elsewhere = await payout(other.testKey, body);
    expect(elsewhere.statusCode, elsewhere.body).toBe(200);
    expect(elsewhere.json().payout.note).toBeUndefined();
    expect(elsewhere.json().payout.txHash).not.toBe(txHash);
  });

  it("10 concurrent requests with one idempotencyKey make exactly one transfer", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    const destination = randomAddress();
    const body = {
      tokenSymbol: "USDC",
      amount: "7",
      destinationAddress: destination,
      idempotencyKey: "conc-1",
    };
    const responses = await Promise.all(Array.from({ length: 10 }, () => payout(ws.testKey, body)));
    for (const res of responses) expect(res.statusCode, res.body).toBe(200);
    const hashes = new Set(responses.map((r) => r.json().payout.txHash));
    expect(hashes.size).toBe(1);
    expect([...hashes][0]).toMatch(TX_HASH);
    expect(responses.filter((r) => r.json().payout.note === undefined)).toHaveLength(1);
    expect(responses.filter((r) => r.json().payout.note === MSG.duplicateNote)).toHaveLength(9);
    expect((await eoaBalances(ws)).USDC).toBe("93.00");
    expect(await ledgerBalance(destination, "USDC")).toBe(7_000_000n);
    expect(await ledgerTransfersFrom(ws)).toHaveLength(1);
    expect(await payoutRows(ws)).toHaveLength(1);
  });
});

describe("sandbox circuit breaker", () => {
  it("walks the breaker table: 500, 500, then 503 on the 3rd failure; paused payouts send nothing", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    expect(await payoutState(ws)).toEqual({ status: "active", failStreak: 0, pausedAt: null, reason: null });

    const first = await payout(ws.testKey, failing());
    expect(first.statusCode, first.body).toBe(500);
    expect(first.json()).toEqual({
      error: "Payout failed",
      code: "PAYOUT_FAILED",
      detail: expect.any(String),
      failStreak: 1,
      remainingBeforePause: 2,
      circuitBreaker: false,
    });
    expect(first.json().detail.length).toBeGreaterThan(0);
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 1, pausedAt: null });

    const second = await payout(ws.testKey, failing());
    expect(second.statusCode, second.body).toBe(500);
    expect(second.json()).toEqual({
      error: "Payout failed",
      code: "PAYOUT_FAILED",
      detail: expect.any(String),
      failStreak: 2,
      remainingBeforePause: 1,
      circuitBreaker: false,
    });

    const third = await payout(ws.testKey, failing());
    expect(third.statusCode, third.body).toBe(503);
    const tripped = third.json();
    expect(tripped).toMatchObject({
      error: expect.any(String),
      code: "CIRCUIT_BREAKER_OPEN",
      circuitBreaker: true,
      detail: expect.any(String),
      remainingBeforePause: 0,
      failStreak: 3,
      pausedAt: expect.stringMatching(ISO),
      resumeAction: expect.any(String),
    });
    expect(tripped.resumeAction.length).toBeGreaterThan(0);

    const state = await payoutState(ws);
    expect(state).toEqual({
      status: "paused",
      failStreak: 3,
      pausedAt: tripped.pausedAt,
      reason: expect.any(String),
    });
    expect(await ledgerTransfersFrom(ws)).toHaveLength(3);

    // While paused every payout answers 503 without a transaction: a valid one, a failing one, and
    // one over the balance.
    for (const body of [
      { tokenSymbol: "USDC", amount: "10", destinationAddress: randomAddress() },
      failing(),
      { tokenSymbol: "USDC", amount: "1000", destinationAddress: randomAddress() },
    ]) {
      const res = await payout(ws.testKey, body);
      expect(res.statusCode, res.body).toBe(503);
      expect(res.json()).toMatchObject({
        error: expect.any(String),
        code: "CIRCUIT_BREAKER_OPEN",
        circuitBreaker: true,
        failStreak: 3,
        pausedAt: tripped.pausedAt,
        resumeAction: expect.any(String),
      });
    }
    const transfers = await ledgerTransfersFrom(ws);
    expect(transfers).toHaveLength(3);
    expect(transfers.every((tx) => tx.status !== "success")).toBe(true);
    expect((await eoaBalances(ws)).USDC).toBe("100.00");
    expect(await payoutState(ws)).toMatchObject({ status: "paused", failStreak: 3 });
    expect((await payoutRows(ws)).filter((p) => p.status === "completed")).toEqual([]);

    // The administrator got exactly one e-mail through SMTP.
    const mails = mail.to(ws.adminEmail);
    expect(mails).toHaveLength(1);
    expect(mails[0]?.subject).toMatch(/paused/i);
    expect(headerOf(mails[0]?.raw ?? "", "To")).toContain(ws.adminEmail);
  });

  it("10 concurrent failing payouts on a fresh workspace trip it exactly once", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    const responses = await Promise.all(Array.from({ length: 10 }, () => payout(ws.testKey, failing())));
    const statuses = responses.map((r) => r.statusCode).sort();
    expect(statuses).toEqual([500, 500, 503, 503, 503, 503, 503, 503, 503, 503]);
    for (const res of responses.filter((r) => r.statusCode === 503)) {
      expect(res.json()).toMatchObject({ code: "CIRCUIT_BREAKER_OPEN", circuitBreaker: true, failStreak: 3 });
    }
    expect(
      responses
        .filter((r) => r.statusCode === 500)
        .map((r) => r.json().failStreak)
        .sort(),
    ).toEqual([1, 2]);

    const attempts = await ledgerTransfersFrom(ws);
    expect(attempts).toHaveLength(3);
    expect(attempts.every((a) => a.status === "reverted")).toBe(true);
    const rows = await payoutRows(ws);
    expect(rows).toHaveLength(3);
    expect(rows.every((r) => r.status === "failed")).toBe(true);
    expect(await outbox(ws, "payout.failed")).toHaveLength(3);
    expect(await payoutState(ws)).toMatchObject({ status: "paused", failStreak: 3 });
    expect(mail.to(ws.adminEmail)).toHaveLength(1);
  });

  it("payout-state of another workspace is 403", async () => {
    const ws = await newWorkspace();
    const other = await newWorkspace();
    const res = await get(ws.testKey, `/api/v1/workspaces/${other.id}/payout-state`);
    expect(res.statusCode, res.body).toBe(403);
  });

  it("auto-resumes 30 minutes after the pause: 29 min still 503, 30 min the attempt runs", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    const pausedAt = new Date(Date.now() - 60 * 60_000);
    t.setNow(pausedAt);
    const tripped = await tripBreaker(ws);
    expect(tripped.pausedAt).toBe(pausedAt.toISOString());

    const destination = randomAddress();
    const body = { tokenSymbol: "USDC", amount: "10", destinationAddress: destination };
    t.setNow(new Date(pausedAt.getTime() + 29 * 60_000));
    const early = await payout(ws.testKey, body);
    expect(early.statusCode, early.body).toBe(503);
    expect(early.json().code).toBe("CIRCUIT_BREAKER_OPEN");
    expect(await ledgerBalance(destination, "USDC")).toBe(0n);

    t.setNow(new Date(pausedAt.getTime() + 30 * 60_000));
    const resumed = await payout(ws.testKey, body);
    expect(resumed.statusCode, resumed.body).toBe(200);
    expect(resumed.json().payout.status).toBe("completed");
    expect(await ledgerBalance(destination, "USDC")).toBe(10_000_000n);
    expect(await payoutState(ws)).toEqual({ status: "active", failStreak: 0, pausedAt: null, reason: null });
  });

  it("after 30 minutes a failing attempt is attempted again and starts a new streak", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    const pausedAt = new Date(Date.now() - 60 * 60_000);
    t.setNow(pausedAt);
    await tripBreaker(ws);
    t.setNow(new Date(pausedAt.getTime() + 31 * 60_000));
    const res = await payout(ws.testKey, failing());
    expect(res.statusCode, res.body).toBe(500);
    expect(res.json()).toMatchObject({
      code: "PAYOUT_FAILED",
      failStreak: 1,
      remainingBeforePause: 2,
      circuitBreaker: false,
    });
    expect(await ledgerTransfersFrom(ws)).toHaveLength(4);
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 1 });
  });

  it("POST /workspaces/{id}/resume resumes a paused workspace; on an active one resumed is false", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    const tripped = await tripBreaker(ws);
    const state = await payoutState(ws);

    const res = await post(ws.testKey, `/api/v1/workspaces/${ws.id}/resume`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      resumed: true,
      workspace: ws.name,
      previousStreak: 3,
      previousReason: state.reason,
    });
    expect(typeof res.json().previousReason).toBe("string");
    expect(tripped.detail).toBeDefined();
    expect(await payoutState(ws)).toEqual({ status: "active", failStreak: 0, pausedAt: null, reason: null });

    const destination = randomAddress();
    const ok = await payout(ws.testKey, {
      tokenSymbol: "USDC",
      amount: "5",
      destinationAddress: destination,
    });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(await ledgerBalance(destination, "USDC")).toBe(5_000_000n);

    const again = await post(ws.testKey, `/api/v1/workspaces/${ws.id}/resume`);
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json()).toMatchObject({ resumed: false, workspace: ws.name, previousStreak: 0 });
    expect(typeof again.json().previousReason).toBe("string");
  });

  it("resume with another workspace's id is 403 and changes nothing", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    await tripBreaker(ws);
    const other = await newWorkspace();
    const res = await post(other.testKey, `/api/v1/workspaces/${ws.id}/resume`);
    expect(res.statusCode, res.body).toBe(403);
    expect(await payoutState(ws)).toMatchObject({ status: "paused", failStreak: 3 });
  });

  it("a success resets the streak", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    for (const streak of [1, 2]) {
      const res = await payout(ws.testKey, failing());
      expect(res.json().failStreak).toBe(streak);
    }
    const ok = await payout(ws.testKey, {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: randomAddress(),
    });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });
    const next = await payout(ws.testKey, failing());
    expect(next.statusCode, next.body).toBe(500);
    expect(next.json()).toMatchObject({ failStreak: 1, remainingBeforePause: 2, circuitBreaker: false });
    const after = await payout(ws.testKey, failing());
    expect(after.statusCode, after.body).toBe(500);
    expect(after.json().failStreak).toBe(2);
  });

  it("sandbox failures never pause live; resume with the live key leaves the sandbox paused", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    await tripBreaker(ws);
    expect(await payoutState(ws, ws.testKey)).toMatchObject({ status: "paused", failStreak: 3 });
    expect(await payoutState(ws, ws.liveKey)).toEqual({
      status: "active",
      failStreak: 0,
      pausedAt: null,
      reason: null,
    });
    // Live is not configured here: a live payout is refused for that reason, not by the breaker.
    const live = await payout(ws.liveKey, {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: randomAddress(),
    });
    expect(live.statusCode, live.body).toBe(503);
    expect(live.json()).toEqual({ error: MSG.liveNotConfigured });

    const resumeLive = await post(ws.liveKey, `/api/v1/workspaces/${ws.id}/resume`);
    expect(resumeLive.statusCode, resumeLive.body).toBe(200);
    expect(resumeLive.json()).toMatchObject({ resumed: false, previousStreak: 0 });
    expect(await payoutState(ws, ws.testKey)).toMatchObject({ status: "paused", failStreak: 3 });
  });

  it("without SMTP_URL the breaker e-mail is written as an .eml file under DATA_DIR/mail", async () => {
    const dataDir = tempDir();
    const local = await startTestApp({ DATA_DIR: dataDir, RATE_LIMIT_SANDBOX: "100000" });
    extraApps.push(local);
    const ws = await newWorkspace(local);
    await faucet(ws, "USDC", "100", local);
    await tripBreaker(ws, local);
    const folder = join(dataDir, "mail");
    const files = readdirSync(folder).filter((f) => f.endsWith(".eml"));
    expect(files).toHaveLength(1);
    const raw = readFileSync(join(folder, files[0] as string), "utf8");
    expect(headerOf(raw, "To")).toContain(ws.adminEmail);
    expect(headerOf(raw, "Subject")).toMatch(/paused/i);
    // Nothing went to the SMTP listener of the other app.
    expect(mail.to(ws.adminEmail)).toEqual([]);
  });
});

describe("sandbox payout events (part 6)", () => {
  it("payout.completed carries the payout; payout.failed adds error and failStreak", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    const destination = randomAddress();
    const ok = await payout(ws.testKey, {
      tokenSymbol: "USDC",
      amount: "12.5",
      destinationAddress: destination,
      description: "Weekly payout",
      metadata: { batch: "7" },
    });
    expect(ok.statusCode, ok.body).toBe(200);
    const completed = await outbox(ws, "payout.completed");
    expect(completed).toHaveLength(1);
    expect(completed[0]?.environment).toBe("sandbox");
    expect(completed[0]?.payload).toEqual({
      txHash: ok.json().payout.txHash,
      amount: "12.50",
      tokenSymbol: "USDC",
      destinationAddress: destination,
      fromAddress: ws.eoaAddress,
      environment: "sandbox",
      status: "completed",
      description: "Weekly payout",
      metadata: { batch: "7" },
    });

    const bad = await payout(ws.testKey, { ...failing("2"), description: "Doomed" });
    expect(bad.statusCode, bad.body).toBe(500);
    const failed = await outbox(ws, "payout.failed");
    expect(failed).toHaveLength(1);
    expect(failed[0]?.environment).toBe("sandbox");
    expect(failed[0]?.payload).toMatchObject({
      amount: "2.00",
      tokenSymbol: "USDC",
      destinationAddress: FAILURE_ADDRESS,
      fromAddress: ws.eoaAddress,
      environment: "sandbox",
      status: "failed",
      description: "Doomed",
      metadata: {},
      error: expect.any(String),
      failStreak: 1,
    });
    expect(failed[0]?.payload).toHaveProperty("txHash");
    // Exactly one completed event: the failure emitted none.
    expect(await outbox(ws, "payout.completed")).toHaveLength(1);
  });

  it("payouts of several workspaces sent together each get their own row, answer and event", async () => {
    // Recorded and completed by shared statements: nothing of one may land on another.
    const workspaces = await Promise.all([1, 2, 3, 4].map(() => newWorkspace()));
    await Promise.all(workspaces.map((ws) => faucet(ws, "USDC", "100")));
    const sent = workspaces.flatMap((ws, w) =>
      [1, 2, 3].map((n) => ({
        ws,
        body: {
          tokenSymbol: "USDC",
          amount: `${w + 1}.${n}`,
          destinationAddress: randomAddress(),
          description: `ws ${w} payout ${n}`,
          idempotencyKey: `together-${w}-${n}`,
        },
      })),
    );
    const answers = await Promise.all(sent.map(({ ws, body }) => payout(ws.testKey, body)));
    for (const [i, answer] of answers.entries()) {
      const { ws, body } = sent[i] as (typeof sent)[number];
      expect(answer.statusCode, answer.body).toBe(200);
      expect(answer.json().payout).toMatchObject({
        amount: `${body.amount}0`,
        destinationAddress: body.destinationAddress,
        description: body.description,
        fromAddress: ws.eoaAddress,
        status: "completed",
      });
    }
    for (const ws of workspaces) {
      const mine = sent.filter((item) => item.ws === ws);
      const rows = await payoutRows(ws);
      expect(rows).toHaveLength(3);
      expect(rows.every((row) => row.status === "completed")).toBe(true);
      const events = await outbox(ws, "payout.completed");
      expect(events.map((e) => (e.payload as Json).description).sort()).toEqual(
        mine.map((item) => item.body.description).sort(),
      );
      for (const event of events) {
        const payload = event.payload as Json;
        const answer = answers[sent.findIndex((item) => item.body.description === payload.description)];
        expect(payload.txHash).toBe(answer?.json().payout.txHash);
        expect(payload.destinationAddress).toBe(
          mine.find((item) => item.body.description === payload.description)?.body.destinationAddress,
        );
      }
      // Amounts are "<w>.<n>" USDC: w whole USDC and n tenths, in 6-decimal units.
      const paid = mine.reduce((sum, item) => {
        const [whole, tenths] = item.body.amount.split(".");
        return sum + BigInt(whole ?? "0") * 1_000_000n + BigInt(tenths ?? "0") * 100_000n;
      }, 0n);
      expect(await ledgerBalance(ws.eoaAddress, "USDC")).toBe(100_000_000n - paid);
    }
  });
});

describe("payout history and wallet stats", () => {
  it("GET /api/v1/payouts lists completed payouts only, with paging", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    await faucet(ws, "ETH", "1");
    const destination = randomAddress();
    const sent: string[] = [];
    for (const body of [
      { tokenSymbol: "USDC", amount: "1", destinationAddress: destination, description: "first" },
      { tokenSymbol: "ETH", amount: "0.25", destinationAddress: destination },
      { tokenSymbol: "USDC", amount: "3.5", destinationAddress: destination, description: "third" },
    ]) {
      const res = await payout(ws.testKey, body);
      expect(res.statusCode, res.body).toBe(200);
      sent.push(res.json().payout.txHash);
    }
    expect((await payout(ws.testKey, failing())).statusCode).toBe(500);

    const res = await get(ws.testKey, "/api/v1/payouts");
    expect(res.statusCode, res.body).toBe(200);
    const page = res.json();
    expect(page).toMatchObject({ total: 3, limit: 50, offset: 0 });
    expect(page.payouts).toHaveLength(3);
    const byHash = new Map<string, Json>(page.payouts.map((p: Json) => [p.txHash as string, p]));
    expect([...byHash.keys()].sort()).toEqual([...sent].sort());
    expect(byHash.get(sent[0] as string)).toEqual({
      txHash: sent[0],
      type: "ERC20",
      details: { amount: "1.00", tokenSymbol: "USDC", destinationAddress: destination, description: "first" },
      createdAt: expect.stringMatching(ISO),
    });
    expect(byHash.get(sent[1] as string)).toMatchObject({
      txHash: sent[1],
      type: "ETH",
      details: { amount: "0.25", tokenSymbol: "ETH", destinationAddress: destination },
      createdAt: expect.stringMatching(ISO),
    });
    expect(byHash.get(sent[2] as string)).toMatchObject({
      type: "ERC20",
      details: { amount: "3.50", tokenSymbol: "USDC", description: "third" },
    });

    const first = await get(ws.testKey, "/api/v1/payouts?limit=2");
    expect(first.json()).toMatchObject({ total: 3, limit: 2, offset: 0 });
    expect(first.json().payouts).toHaveLength(2);
    const second = await get(ws.testKey, "/api/v1/payouts?limit=2&offset=2");
    expect(second.json()).toMatchObject({ total: 3, limit: 2, offset: 2 });
    expect(second.json().payouts).toHaveLength(1);
    const paged = [...first.json().payouts, ...second.json().payouts].map((p: Json) => p.txHash);
    expect(new Set(paged).size).toBe(3);
    expect([...paged].sort()).toEqual([...sent].sort());
    const beyond = await get(ws.testKey, "/api/v1/payouts?offset=10");
    expect(beyond.json()).toMatchObject({ payouts: [], total: 3, offset: 10 });

    for (const query of ["limit=0", "limit=101", "offset=-1", "limit=abc"]) {
      const bad = await get(ws.testKey, `/api/v1/payouts?${query}`);
      expect(bad.statusCode, `${query}: ${bad.body}`).toBe(400);
      expect(typeof bad.json().error).toBe("string");
    }

    // Another workspace and the live environment see none of them.
    const other = await newWorkspace();
    expect((await get(other.testKey, "/api/v1/payouts")).json()).toMatchObject({ payouts: [], total: 0 });
    expect((await get(ws.liveKey, "/api/v1/payouts")).json()).toMatchObject({ payouts: [], total: 0 });
  });

  it("GET /api/v1/wallet/stats aggregates the workspace's payouts and payments", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    for (const amount of ["5", "10"]) {
      const res = await payout(ws.testKey, {
        tokenSymbol: "USDC",
        amount,
        destinationAddress: randomAddress(),
      });
      expect(res.statusCode, res.body).toBe(200);
    }
    expect((await payout(ws.testKey, failing("2"))).statusCode).toBe(500);
    const payment = await post(ws.testKey, "/api/v1/payments", {
      tokenSymbol: "USDC",
      amount: "40",
      merchantWallet: randomAddress(),
    });
    expect(payment.statusCode, payment.body).toBe(201);

    const res = await get(ws.testKey, "/api/v1/wallet/stats");
    expect(res.statusCode, res.body).toBe(200);
    const stats = res.json();
    expect(stats.environment).toBe("sandbox");
    expect(stats.payouts).toEqual(
      expect.arrayContaining([
        { status: "completed", tokenSymbol: "USDC", count: 2, volume: "15.00" },
        { status: "failed", tokenSymbol: "USDC", count: 1, volume: "2.00" },
      ]),
    );
    expect(stats.payments).toEqual([{ status: "forwarded", tokenSymbol: "USDC", count: 1, volume: "40.00" }]);

    const other = await newWorkspace();
    const empty = await get(other.testKey, "/api/v1/wallet/stats");
    expect(empty.json()).toMatchObject({ environment: "sandbox", payouts: [], payments: [] });
  });
});
