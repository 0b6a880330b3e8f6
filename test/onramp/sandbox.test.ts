import { parseUnits } from "viem";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  ADMIN_SECRET,
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";

// Sandbox on-ramp sessions (D17, issue 27) through the HTTP API: a session completes at once at
// the sandbox's documented rates (1 USDC per US dollar, 1 ETH per 3,000 US dollars, 100 US
// dollars' worth when no amount is asked), credits the chosen wallet on the simulated ledger,
// announces itself with onramp.session.updated then onramp.completed, and reads back by id and in
// a paginated list, per workspace and environment. Refusals (400, live 503) write nothing.

type Json = Record<string, unknown>;
type Currency = "USDC" | "ETH";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const TX = /^0x[0-9a-f]{64}$/;
const DECIMALS = { USDC: 6, ETH: 18 } as const;
const CREATE = "/api/v1/onramp/session";

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" });
});
afterEach(() => t.setNow(undefined));
afterAll(async () => t?.close());

async function call(method: "GET" | "POST" | "PATCH", key: string, url: string, payload?: object) {
  return t.request({ method, url, headers: bearer(key), ...(payload ? { payload } : {}) });
}

async function created(ws: CreatedWorkspace, body: object, url = CREATE): Promise<Json> {
  const res = await call("POST", ws.testKey, url, body);
  expect(res.statusCode, res.body).toBe(201);
  expect(res.headers["content-type"]).toMatch(/^application\/json/);
  return res.json();
}

/** The API's decimal text of `units` of `decimals`: at least 2 decimals, trailing zeros trimmed. */
function text(units: bigint, decimals: number): string {
  const scale = 10n ** BigInt(decimals);
  const fraction = (units % scale).toString().padStart(decimals, "0").replace(/0+$/, "").padEnd(2, "0");
  return `${units / scale}.${fraction}`;
}

/**
 * What the sandbox delivers, by its documented rates, recomputed here: dollars → crypto rounds
 * down (never more than was paid for), crypto → dollars rounds up to the cent.
 */
function expected(currency: Currency, ask: { sourceAmount?: string; destinationAmount?: string }) {
  // Smallest units per cent, as a fraction: 10^6 / 100 for USDC, 10^18 / (3,000 × 100) for ETH.
  const [num, den] = currency === "USDC" ? [10n ** 6n, 100n] : [10n ** 18n, 300_000n];
  if (ask.destinationAmount !== undefined) {
    const units = parseUnits(ask.destinationAmount, DECIMALS[currency]);
    const cents = (units * den + num - 1n) / num;
    return { units, sourceAmount: text(cents, 2), destinationAmount: text(units, DECIMALS[currency]) };
  }
  const cents = parseUnits(ask.sourceAmount ?? "100", 2);
  const units = (cents * num) / den;
  return { units, sourceAmount: text(cents, 2), destinationAmount: text(units, DECIMALS[currency]) };
}

type Wallet = "eoa" | "smartWallet";
type Balances = Record<Wallet, { address: string; balances: Record<string, string> } | null>;

async function balances(ws: CreatedWorkspace): Promise<Balances> {
  const res = await call("GET", ws.testKey, "/api/v1/wallet/balance");
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

async function balance(ws: CreatedWorkspace, wallet: Wallet, currency: Currency): Promise<bigint> {
  const amount = (await balances(ws))[wallet]?.balances[currency];
  if (amount === undefined) throw new Error(`no ${wallet} ${currency} balance`);
  return parseUnits(amount, DECIMALS[currency]);
}

/** The workspace's onramp.* outbox events, oldest first. */
async function events(ws: CreatedWorkspace) {
  const rows = await t.database.db
    .selectFrom("outbox_events")
    .select(["event_type", "environment", "payload"])
    .where("workspace_id", "=", ws.id)
    .where("event_type", "like", "onramp.%")
    .orderBy("id")
    .execute();
  return rows.map((r) => ({ type: r.event_type, environment: r.environment, data: r.payload }));
}

async function sessionRows(ws: CreatedWorkspace) {
  return t.database.db.selectFrom("onramp_sessions").selectAll().where("workspace_id", "=", ws.id).execute();
}

async function smartWalletOf(ws: CreatedWorkspace): Promise<string> {
  const res = await call("POST", ws.testKey, `/api/v1/workspaces/${ws.id}/smart-wallet`, {});
  expect(res.statusCode, res.body).toBe(201);
  return res.json().smartWallet.address;
}

const withoutSecret = ({ clientSecret: _, ...rest }: Json) => rest;

/** Creates a session, and checks it, the balance it credited, its ledger transaction and its events. */
async function completes(
  ws: CreatedWorkspace,
  currency: Currency,
  ask: { sourceAmount?: string; destinationAmount?: string },
  wallet: { type: "eoa" | "smart_wallet"; address: string; walletType?: "eoa" | "smart_wallet" },
  url = CREATE,
): Promise<Json> {
  const label = `${currency} ${JSON.stringify(ask)} ${wallet.type}`;
  const want = expected(currency, ask);
  const field: Wallet = wallet.type === "eoa" ? "eoa" : "smartWallet";
  const other: Wallet = field === "eoa" ? "smartWallet" : "eoa";
  const before = await balances(ws);
  const eventsBefore = (await events(ws)).length;
  const at = new Date(Date.UTC(2030, 0, 1, 0, 0, eventsBefore));
  t.setNow(at);
  const body = {
    destinationCurrency: currency,
    ...ask,
    ...(wallet.walletType ? { walletType: wallet.walletType } : {}),
  };
  const session = await created(ws, body, url);
  expect(session, label).toEqual({
    id: expect.stringMatching(UUID),
    provider: "sandbox",
    network: "sandbox-a",
    status: "fulfillment_complete",
    clientSecret: expect.stringMatching(/^\S{16,}$/),
    redirectUrl: null,
    walletAddress: wallet.address,
    walletType: wallet.type,
    destinationCurrency: currency,
    destinationNetwork: "ethereum",
    sourceAmount: want.sourceAmount,
    destinationAmount: want.destinationAmount,
    transactionId: expect.stringMatching(TX),
    creditedAmount: want.destinationAmount,
    completedAt: at.toISOString(),
    createdAt: at.toISOString(),
    updatedAt: at.toISOString(),
  });
  // The chosen wallet gained exactly the crypto bought; nothing else moved.
  const after = await balances(ws);
  const credited = before[field];
  if (!credited) throw new Error(`${label}: no ${field} before`);
  const grown = parseUnits(credited.balances[currency] ?? "0", DECIMALS[currency]) + want.units;
  expect(after[field], label).toEqual({
    address: wallet.address,
    balances: { ...credited.balances, [currency]: text(grown, DECIMALS[currency]) },
  });
  expect(after[other], label).toEqual(before[other]);
  const ledger = await t.database.db
    .selectFrom("ledger_transactions")
    .select(["from_address", "to_address", "token_symbol", "amount", "status"])
    .where("tx_hash", "=", String(session.transactionId))
    .execute();
  expect(ledger, label).toEqual([
    {
      from_address: null,
      to_address: wallet.address.toLowerCase(),
      token_symbol: currency,
      amount: want.units.toString(),
      status: "success",
    },
  ]);
  // Its two events, in order, each the session as GET shows it, without the client secret.
  const read = await call("GET", ws.testKey, `/api/v1/onramp/sessions/${session.id}`);
  expect(read.statusCode, read.body).toBe(200);
  expect(read.json(), label).toEqual(session);
  const data = withoutSecret(session);
  expect((await events(ws)).slice(eventsBefore), label).toEqual([
    { type: "onramp.session.updated", environment: "sandbox", data },
    { type: "onramp.completed", environment: "sandbox", data },
  ]);
  return session;
}

describe("sandbox on-ramp sessions complete at once at the documented rates", () => {
  it("USDC: 1 per US dollar, from sourceAmount, destinationAmount, or 100 US dollars' worth", async () => {
    const ws = await createWorkspace(t);
    const eoa = { type: "eoa" as const, address: ws.eoaAddress };
    await completes(ws, "USDC", { sourceAmount: "25" }, eoa);
    await completes(ws, "USDC", { sourceAmount: "0.01" }, eoa);
    await completes(ws, "USDC", { sourceAmount: "1234.56" }, eoa);
    await completes(ws, "USDC", { destinationAmount: "42.5" }, eoa);
    // A part of a cent costs the whole cent.
    await completes(ws, "USDC", { destinationAmount: "0.000001" }, eoa);
    await completes(ws, "USDC", { destinationAmount: "10.123456" }, eoa);
    const byDefault = await completes(ws, "USDC", {}, eoa);
    expect(byDefault).toMatchObject({
      sourceAmount: "100.00",
      destinationAmount: "100.00",
      creditedAmount: "100.00",
    });
  });

  it("ETH: 1 per 3,000 US dollars; dollars round down to the wei, ether up to the cent", async () => {
    const ws = await createWorkspace(t);
    const eoa = { type: "eoa" as const, address: ws.eoaAddress, walletType: "eoa" as const };
    const from300 = await completes(ws, "ETH", { sourceAmount: "300" }, eoa);
    expect(from300).toMatchObject({
      sourceAmount: "300.00",
      destinationAmount: "0.10",
      creditedAmount: "0.10",
    });
    const oneDollar = await completes(ws, "ETH", { sourceAmount: "1" }, eoa);
    expect(oneDollar.destinationAmount).toBe("0.000333333333333333");
    const thirds = await completes(ws, "ETH", { destinationAmount: "0.033333333333333333" }, eoa);
    expect(thirds).toMatchObject({ sourceAmount: "100.00", creditedAmount: "0.033333333333333333" });
    const tiny = await completes(ws, "ETH", { destinationAmount: "0.000000000000000001" }, eoa);
    expect(tiny.sourceAmount).toBe("0.01");
    expect((await completes(ws, "ETH", { destinationAmount: "0.0333" }, eoa)).sourceAmount).toBe("99.90");
    expect((await completes(ws, "ETH", { destinationAmount: "2" }, eoa)).sourceAmount).toBe("6000.00");
    const byDefault = await completes(ws, "ETH", {}, eoa);
    expect(byDefault).toMatchObject({ sourceAmount: "100.00", destinationAmount: "0.033333333333333333" });
  });

  it("credits the smart wallet when asked, or when it is the workspace's default", async () => {
    const ws = await createWorkspace(t);
    const refused = await call("POST", ws.testKey, CREATE, {
      destinationCurrency: "USDC",
      walletType: "smart_wallet",
    });
    expect(refused.statusCode, refused.body).toBe(400);
    expect(refused.json().error).toBe(
      "No smart wallet for this workspace: create one with POST /api/v1/workspaces/{id}/smart-wallet",
    );
    expect(await sessionRows(ws)).toEqual([]);
    const address = await smartWalletOf(ws);
    const smart = { type: "smart_wallet" as const, address };
    await completes(ws, "USDC", { sourceAmount: "50" }, { ...smart, walletType: "smart_wallet" });
    await completes(ws, "ETH", { destinationAmount: "0.5" }, { ...smart, walletType: "smart_wallet" });
    // The sandbox's own default wallet type (D21), set here by the admin secret.
    const patched = await call(
      "PATCH",
      ADMIN_SECRET,
      `/api/v1/workspaces/${ws.id}/smart-wallet?environment=sandbox`,
      {
        defaultWalletType: "smart_wallet",
      },
    );
    expect(patched.statusCode, patched.body).toBe(200);
    await completes(ws, "USDC", { sourceAmount: "7.5" }, smart);
    // An explicit eoa still credits the EOA.
    await completes(
      ws,
      "ETH",
      { sourceAmount: "30" },
      { type: "eoa", address: ws.eoaAddress, walletType: "eoa" },
    );
  });

  it("answers the interface's literal /onramp/session path the same way", async () => {
    const ws = await createWorkspace(t);
    const session = await completes(
      ws,
      "ETH",
      { sourceAmount: "150" },
      { type: "eoa", address: ws.eoaAddress },
      "/onramp/session",
    );
    expect(session.destinationAmount).toBe("0.05");
    expect(await sessionRows(ws)).toHaveLength(1);
  });
});

describe("reading sessions: by id and listed, per workspace and environment", () => {
  it("lists newest first, paginated, without the client secret; another workspace or environment sees nothing", async () => {
    const ws = await createWorkspace(t);
    const sessions: Json[] = [];
    for (const [i, sourceAmount] of ["10", "20", "30", "40", "50"].entries()) {
      t.setNow(new Date(Date.UTC(2031, 5, 1, 12, i)));
      sessions.push(await created(ws, { destinationCurrency: i % 2 ? "ETH" : "USDC", sourceAmount }));
    }
    const newestFirst = [...sessions].reverse().map(withoutSecret);
    const list = async (key: string, query = "") => {
      const res = await call("GET", key, `/api/v1/onramp/sessions${query}`);
      expect(res.statusCode, res.body).toBe(200);
      return res.json();
    };
    expect(await list(ws.testKey)).toEqual({ sessions: newestFirst, total: 5, limit: 50, offset: 0 });
    expect(await list(ws.testKey, "?limit=2")).toEqual({
      sessions: newestFirst.slice(0, 2),
      total: 5,
      limit: 2,
      offset: 0,
    });
    expect(await list(ws.testKey, "?limit=2&offset=2")).toEqual({
      sessions: newestFirst.slice(2, 4),
      total: 5,
      limit: 2,
      offset: 2,
    });
    expect(await list(ws.testKey, "?limit=2&offset=4")).toMatchObject({
      sessions: newestFirst.slice(4),
      total: 5,
    });
    expect(await list(ws.testKey, "?offset=5")).toMatchObject({ sessions: [], total: 5 });
    for (const item of (await list(ws.testKey)).sessions) expect(item).not.toHaveProperty("clientSecret");
    for (const query of ["?limit=0", "?limit=101", "?offset=-1", "?limit=x"]) {
      const res = await call("GET", ws.testKey, `/api/v1/onramp/sessions${query}`);
      expect(res.statusCode, `${query}: ${res.body}`).toBe(400);
    }

    const stranger = await createWorkspace(t);
    expect(await list(stranger.testKey)).toEqual({ sessions: [], total: 0, limit: 50, offset: 0 });
    expect(await list(ws.liveKey)).toEqual({ sessions: [], total: 0, limit: 50, offset: 0 });
    for (const session of sessions) {
      const own = await call("GET", ws.testKey, `/api/v1/onramp/sessions/${session.id}`);
      expect(own.json()).toEqual(session);
      for (const key of [stranger.testKey, stranger.liveKey, ws.liveKey]) {
        const res = await call("GET", key, `/api/v1/onramp/sessions/${session.id}`);
        expect(res.statusCode, res.body).toBe(404);
        expect(res.json()).toEqual({ error: "On-ramp session not found" });
      }
    }
    for (const id of ["not-a-uuid", "6f1c5a9e-0b7d-4d38-9a53-2a4c1f0e9b11", "1"]) {
      const res = await call("GET", ws.testKey, `/api/v1/onramp/sessions/${id}`);
      expect(res.statusCode, res.body).toBe(404);
      expect(res.json()).toEqual({ error: "On-ramp session not found" });
    }
    const anonymous = await t.request({ method: "GET", url: `/api/v1/onramp/sessions/${sessions[0]?.id}` });
    expect(anonymous.statusCode).toBe(401);
  });
});

describe("refusals write nothing", () => {
  const usdc =
    "destinationAmount must be a positive amount of USDC, at most 1000000, with at most 6 decimals";
  const eth = "destinationAmount must be a positive amount of ETH, at most 1000, with at most 18 decimals";
  const dollars =
    "sourceAmount must be a positive amount of US dollars, at most 1000000.00, with at most 2 decimals";
  const CASES: Array<[unknown, string]> = [
    [[], "Request body must be a JSON object"],
    [{}, "destinationCurrency is required: USDC or ETH"],
    [{ destinationCurrency: "DAI", sourceAmount: "10" }, "destinationCurrency is required: USDC or ETH"],
    [{ destinationCurrency: "usdc" }, "destinationCurrency is required: USDC or ETH"],
    [
      { destinationCurrency: "USDC", sourceAmount: "10", destinationAmount: "10" },
      "Give at most one of sourceAmount and destinationAmount",
    ],
    [{ destinationCurrency: "USDC", sourceAmount: "10.001" }, dollars],
    [{ destinationCurrency: "ETH", sourceAmount: "0" }, dollars],
    [{ destinationCurrency: "ETH", sourceAmount: "-5" }, dollars],
    [{ destinationCurrency: "ETH", sourceAmount: 10 }, dollars],
    [{ destinationCurrency: "USDC", destinationAmount: "1.0000001" }, usdc],
    [{ destinationCurrency: "USDC", destinationAmount: "0" }, usdc],
    [{ destinationCurrency: "ETH", destinationAmount: "0.0000000000000000001" }, eth],
    [{ destinationCurrency: "ETH", destinationAmount: "-0.1" }, eth],
    [{ destinationCurrency: "ETH", walletType: "workspace" }, "Invalid walletType: use eoa or smart_wallet"],
  ];

  it("answers 400 with every validation message, on both paths", async () => {
    const ws = await createWorkspace(t);
    const before = { eoa: await balance(ws, "eoa", "USDC"), eth: await balance(ws, "eoa", "ETH") };
    for (const [body, error] of CASES) {
      for (const url of [CREATE, "/onramp/session"]) {
        const res = await t.request({
          method: "POST",
          url,
          headers: { ...bearer(ws.testKey), "content-type": "application/json" },
          payload: JSON.stringify(body),
        });
        expect(res.statusCode, `${url} ${JSON.stringify(body)}: ${res.body}`).toBe(400);
        expect(res.json().error, JSON.stringify(body)).toBe(error);
      }
    }
    expect(await sessionRows(ws)).toEqual([]);
    expect(await events(ws)).toEqual([]);
    expect({ eoa: await balance(ws, "eoa", "USDC"), eth: await balance(ws, "eoa", "ETH") }).toEqual(before);
    const anonymous = await t.request({
      method: "POST",
      url: CREATE,
      payload: { destinationCurrency: "USDC" },
    });
    expect(anonymous.statusCode).toBe(401);
  });

  it("a live key without a card provider or network → 503 naming what to configure", async () => {
    const ws = await createWorkspace(t);
    for (const url of [CREATE, "/onramp/session"]) {
      for (const body of [
        { destinationCurrency: "USDC", sourceAmount: "100" },
        { destinationCurrency: "ETH" },
      ]) {
        const res = await call("POST", ws.liveKey, url, body);
        expect(res.statusCode, res.body).toBe(503);
        expect(res.headers["content-type"]).toMatch(/^application\/json/);
        expect(res.json()).toEqual({
          error: "The card on-ramp is not configured for live: set CARD_SECRET_KEY_LIVE",
        });
      }
    }
    // Validation still comes first.
    const invalid = await call("POST", ws.liveKey, CREATE, { destinationCurrency: "BTC" });
    expect(invalid.statusCode).toBe(400);
    expect(await sessionRows(ws)).toEqual([]);
    expect(await events(ws)).toEqual([]);
  });
});
