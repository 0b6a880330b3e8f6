import type { LightMyRequestResponse } from "fastify";
import { describe, expect, it } from "vitest";
import { bearer, type CreatedWorkspace, createWorkspace, type TestApp } from "../support/app.ts";
import { type Instances, useInstances } from "../support/instances.ts";

// Sandbox swaps (D16) under concurrency: a wallet never sells more than it holds, a pool's
// reserves move by exactly the swaps that completed (each priced on the reserves the one before
// it left), one Idempotency-Key makes one swap and a quote executes once, however many requests
// race. Each scenario runs on one app instance, then on two instances sharing one database: on
// PostgreSQL (DATABASE_URL) each instance has its own connection pool, as two service processes
// behind a load balancer have; on PGlite they share the in-memory database.

type Json = Record<string, unknown>;

const RACERS = 20;
const ENV = { RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" };
const E6 = 10n ** 6n;
const E18 = 10n ** 18n;
/** docs/swaps.md: the USDC/ETH pool at a workspace's first swap. */
const USDC_RESERVE = 1_500_000n * E6;
const ETH_RESERVE = 500n * E18;
/** Uniswap v2's getAmountOut, fee 0.3 %. */
const getAmountOut = (amountIn: bigint, rIn: bigint, rOut: bigint) =>
  (amountIn * 997n * rOut) / (rIn * 1000n + amountIn * 997n);

const setups = useInstances(ENV);

function post(app: TestApp, key: string, url: string, payload: Json, headers: Record<string, string> = {}) {
  return app.request({ method: "POST", url, headers: { ...bearer(key), ...headers }, payload });
}

async function getOk(app: TestApp, key: string, url: string): Promise<Json> {
  const res = await app.request({ method: "GET", url, headers: bearer(key) });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

async function faucet(app: TestApp, ws: CreatedWorkspace, amount: string) {
  const res = await post(app, ws.testKey, "/api/v1/sandbox/faucet", { tokenSymbol: "USDC", amount });
  expect(res.statusCode, res.body).toBe(200);
}

async function quote(app: TestApp, ws: CreatedWorkspace, sellAmount: string): Promise<Json> {
  return getOk(app, ws.testKey, `/api/v1/swap/quote?sellToken=USDC&buyToken=ETH&sellAmount=${sellAmount}`);
}

async function ledger(app: TestApp, addr: string, token: "USDC" | "ETH"): Promise<bigint> {
  const rows = await app.database.db
    .selectFrom("ledger_entries")
    .select("amount")
    .where("address", "=", addr.toLowerCase())
    .where("token_symbol", "=", token)
    .execute();
  return rows.reduce((sum, row) => sum + BigInt(row.amount), 0n);
}

async function pool(app: TestApp, ws: CreatedWorkspace): Promise<[bigint, bigint] | undefined> {
  const row = await app.database.db
    .selectFrom("sandbox_swap_pools")
    .select(["base_reserve", "quote_reserve"])
    .where("workspace_id", "=", ws.id)
    .where("pair", "=", "USDC/ETH")
    .executeTakeFirst();
  return row && [BigInt(row.base_reserve), BigInt(row.quote_reserve)];
}

async function outbox(app: TestApp, ws: CreatedWorkspace, type: string): Promise<unknown[]> {
  const rows = await app.database.db
    .selectFrom("outbox_events")
    .select("payload")
    .where("workspace_id", "=", ws.id)
    .where("event_type", "=", type)
    .execute();
  return rows.map((r) => r.payload);
}

/** `RACERS` requests at once, alternating between the two instances. */
function race(
  { a, b }: Instances,
  send: (app: TestApp, i: number) => Promise<LightMyRequestResponse>,
): Promise<LightMyRequestResponse[]> {
  return Promise.all(Array.from({ length: RACERS }, (_, i) => send(i % 2 === 0 ? a : b, i)));
}

/** What `n` successive swaps of 10 USDC buy from the initial pool, and the ETH reserve they leave. */
function tenUsdcSwaps(n: number): { expected: bigint[]; eth: bigint } {
  let [usdc, eth] = [USDC_RESERVE, ETH_RESERVE];
  const expected: bigint[] = [];
  for (let k = 0; k < n; k++) {
    const out = getAmountOut(10n * E6, usdc, eth);
    expect((usdc + 10n * E6) * (eth - out), "k never decreases").toBeGreaterThanOrEqual(usdc * eth);
    [usdc, eth] = [usdc + 10n * E6, eth - out];
    expected.push(out);
  }
  return { expected, eth };
}

const ethUnits = (amount: string) => {
  const [whole = "0", fraction = ""] = amount.split(".");
  return BigInt(whole) * E18 + BigInt(fraction.padEnd(18, "0"));
};
const ethText = (units: bigint) =>
  `${units / E18}.${(units % E18).toString().padStart(18, "0").replace(/0+$/, "").padEnd(2, "0")}`;
const statuses = (answers: LightMyRequestResponse[]) => answers.map((res) => res.statusCode).join(",");

describe.each([
  { index: 0, label: "one app instance" },
  { index: 1, label: "two app instances on one database" },
])("$label", ({ index }) => {
  const setup = () => setups[index] as Instances;

  it(`${RACERS} concurrent swaps of 10 USDC → ETH from 150 USDC: exactly 15 complete, 5 are refused, the pool moves by exactly those 15`, async () => {
    const s = setup();
    const ws = await createWorkspace(s.a);
    await faucet(s.a, ws, "150");
    // Half execute a quote made beforehand, half the quote's parameters (quoted at execution).
    const quotes = await Promise.all(Array.from({ length: RACERS / 2 }, () => quote(s.b, ws, "10")));
    const answers = await race(s, (app, i) =>
      post(
        app,
        ws.testKey,
        "/api/v1/swap",
        i % 2 === 0
          ? { quoteId: quotes[i / 2]?.quoteId }
          : { sellToken: "USDC", buyToken: "ETH", sellAmount: "10" },
      ),
    );
    const won = answers.filter((res) => res.statusCode === 200);
    const lost = answers.filter((res) => res.statusCode !== 200);
    expect(won, `${s.name}: ${statuses(answers)} ${lost[0]?.body}`).toHaveLength(15);
    for (const res of lost) {
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toEqual({
        error: "Insufficient balance",
        available: "0.00",
        requested: "10.00",
        tokenSymbol: "USDC",
        network: "sandbox-a",
      });
    }
    const swaps = won.map((res) => res.json() as Json);
    for (const swap of swaps) expect(swap).toMatchObject({ status: "completed", sellAmount: "10.00" });

    // Whatever order they ran in, the k-th swap got what 10 USDC buy from the reserves the k − 1
    // before it left: the amounts bought are exactly that sequence, and the pool ends there.
    const { expected, eth } = tenUsdcSwaps(15);
    const bought = swaps.map((swap) => ethUnits(swap.buyAmount as string)).sort((x, y) => (x > y ? -1 : 1));
    expect(bought, s.name).toEqual(expected);
    expect(await pool(s.a, ws)).toEqual([USDC_RESERVE + 150n * E6, eth]);
    expect(await ledger(s.a, ws.eoaAddress, "USDC")).toBe(0n);
    const total = bought.reduce((sum, x) => sum + x, 0n);
    expect(await ledger(s.a, ws.eoaAddress, "ETH")).toBe(total);
    const poolAddress = String((quotes[0]?.route as Json[] | undefined)?.[0]?.pool);
    expect(await ledger(s.a, poolAddress, "USDC")).toBe(150n * E6);
    const list = await getOk(s.b, ws.testKey, "/api/v1/swaps?limit=100");
    expect(list.total).toBe(15);
    expect(new Set((list.swaps as Json[]).map((x) => x.swapId))).toEqual(new Set(swaps.map((x) => x.swapId)));
    expect(await outbox(s.a, ws, "swap.completed")).toHaveLength(15);
    const stats = await getOk(s.a, ws.testKey, "/api/v1/wallet/stats");
    expect(stats.swaps).toEqual([
      { sellToken: "USDC", buyToken: "ETH", count: 15, sold: "150.00", bought: ethText(total) },
    ]);
  });

  it(`${RACERS} concurrent swaps of 10 USDC → ETH with enough for all: all ${RACERS} complete (a price well within the slippage is never "moved")`, async () => {
    const s = setup();
    const ws = await createWorkspace(s.a);
    await faucet(s.a, ws, "1000");
    const answers = await race(s, (app) =>
      post(app, ws.testKey, "/api/v1/swap", { sellToken: "USDC", buyToken: "ETH", sellAmount: "10" }),
    );
    const refusedOnes = answers
      .filter((res) => res.statusCode !== 200)
      .map((res) => `${res.statusCode} ${res.body}`);
    expect(refusedOnes, s.name).toEqual([]);
    const { expected, eth } = tenUsdcSwaps(RACERS);
    const bought = answers.map((res) => ethUnits(res.json().buyAmount)).sort((x, y) => (x > y ? -1 : 1));
    expect(bought).toEqual(expected);
    expect(await ledger(s.a, ws.eoaAddress, "USDC")).toBe(800n * E6);
    expect(await ledger(s.a, ws.eoaAddress, "ETH")).toBe(ETH_RESERVE - eth);
    expect(await pool(s.a, ws)).toEqual([USDC_RESERVE + 200n * E6, eth]);
  });

  it(`${RACERS} concurrent POSTs of one quote with one Idempotency-Key: one swap, every answer names it`, async () => {
    const s = setup();
    const ws = await createWorkspace(s.a);
    await faucet(s.a, ws, "100");
    const q = await quote(s.a, ws, "10");
    const answers = await race(s, (app) =>
      post(
        app,
        ws.testKey,
        "/api/v1/swap",
        { quoteId: q.quoteId },
        { "idempotency-key": `race-${q.quoteId}` },
      ),
    );
    for (const res of answers) expect(res.statusCode, `${s.name}: ${res.body}`).toBe(200);
    const first = answers[0]?.json() as Json;
    expect(first).toMatchObject({
      status: "completed",
      quoteId: q.quoteId,
      sellAmount: "10.00",
      buyAmount: q.buyAmount,
    });
    for (const res of answers) expect(res.json()).toEqual(first);
    expect(answers.filter((res) => res.headers["idempotent-replayed"] === undefined)).toHaveLength(1);
    expect(answers.filter((res) => res.headers["idempotent-replayed"] === "true")).toHaveLength(RACERS - 1);
    expect(await ledger(s.a, ws.eoaAddress, "USDC")).toBe(90n * E6);
    expect(await ledger(s.a, ws.eoaAddress, "ETH")).toBe(ethUnits(q.buyAmount as string));
    expect(await getOk(s.b, ws.testKey, "/api/v1/swaps")).toMatchObject({ total: 1, swaps: [first] });
    expect(await outbox(s.a, ws, "swap.completed")).toEqual([first]);
  });

  it(`${RACERS} concurrent POSTs of one quote without a key: exactly one 200, the others 409 Quote already executed`, async () => {
    const s = setup();
    const ws = await createWorkspace(s.a);
    await faucet(s.a, ws, "100");
    const q = await quote(s.a, ws, "10");
    const answers = await race(s, (app) => post(app, ws.testKey, "/api/v1/swap", { quoteId: q.quoteId }));
    const won = answers.filter((res) => res.statusCode === 200);
    expect(won, `${s.name}: ${statuses(answers)}`).toHaveLength(1);
    for (const res of answers.filter((x) => x.statusCode !== 200)) {
      expect(res.statusCode, res.body).toBe(409);
      expect(res.json()).toEqual({ error: "Quote already executed", quoteId: q.quoteId });
    }
    expect(won[0]?.json()).toMatchObject({ status: "completed", buyAmount: q.buyAmount });
    expect(await ledger(s.a, ws.eoaAddress, "USDC")).toBe(90n * E6);
    expect(await ledger(s.a, ws.eoaAddress, "ETH")).toBe(ethUnits(q.buyAmount as string));
    const out = ethUnits(q.buyAmount as string);
    expect(await pool(s.b, ws)).toEqual([USDC_RESERVE + 10n * E6, ETH_RESERVE - out]);
    expect((await getOk(s.b, ws.testKey, "/api/v1/swaps")).total).toBe(1);
    expect(await outbox(s.a, ws, "swap.completed")).toHaveLength(1);
  });
});
