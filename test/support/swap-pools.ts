import type { InjectOptions, LightMyRequestResponse } from "fastify";
import { expect } from "vitest";
import { bearer, type CreatedWorkspace, type TestApp } from "./app.ts";

// What the tests of sandbox swaps (D16; test/swaps/sandbox.test.ts and
// test/swaps/sandbox-execution.test.ts) share: the documented constant-product pools
// (docs/swaps.md) recomputed here with Uniswap v2's own formulas, the amounts' units and text, the
// app's clock, and the HTTP requests and database reads against the app the tests run.

export type Json = Record<string, unknown>;
export type Token = "USDC" | "ETH" | "DAI" | "ADAO";
export type Side = "exact_in" | "exact_out";

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const TX = /^0x[0-9a-f]{64}$/;
export const TOKENS = ["USDC", "ETH", "DAI", "ADAO"] as const;
export const DECIMALS: Record<Token, number> = { USDC: 6, ETH: 18, DAI: 18, ADAO: 18 };
export const E6 = 10n ** 6n;
export const E18 = 10n ** 18n;
/** docs/swaps.md: a pool's reserves at its workspace's first swap, [USDC, the other token]. */
export const INITIAL: Record<string, [bigint, bigint]> = {
  ETH: [1_500_000n * E6, 500n * E18],
  DAI: [2_000_000n * E6, 2_000_000n * E18],
  ADAO: [1_000_000n * E6, 2_000_000n * E18],
};

// ---- the arithmetic, independently: Uniswap v2's getAmountOut / getAmountIn (fee 997/1000) ----

export const getAmountOut = (amountIn: bigint, rIn: bigint, rOut: bigint) =>
  (amountIn * 997n * rOut) / (rIn * 1000n + amountIn * 997n);
export const getAmountIn = (amountOut: bigint, rIn: bigint, rOut: bigint) =>
  (rIn * amountOut * 1000n) / ((rOut - amountOut) * 997n) + 1n;

export function units(amount: string, token: Token): bigint {
  const [whole = "0", fraction = ""] = amount.split(".");
  return BigInt(whole) * 10n ** BigInt(DECIMALS[token]) + BigInt(fraction.padEnd(DECIMALS[token], "0"));
}

/** A decimal string of `value` smallest units, trailing zeros dropped, at least `min` decimals. */
export function text(value: bigint, token: Token, min = 2): string {
  const scale = 10n ** BigInt(DECIMALS[token]);
  const fraction = (value % scale).toString().padStart(DECIMALS[token], "0").replace(/0+$/, "");
  const shown = fraction.padEnd(min, "0");
  return shown ? `${value / scale}.${shown}` : `${value / scale}`;
}

/** One workspace's pools as the test expects them, moved by each swap it makes. */
export class Pools {
  readonly reserves = new Map(Object.entries(INITIAL).map(([k, [a, b]]) => [k, [a, b] as [bigint, bigint]]));

  oriented(sell: Token, buy: Token): [bigint, bigint] {
    const [usdc, other] = this.reserves.get(sell === "USDC" ? buy : sell) ?? [0n, 0n];
    return sell === "USDC" ? [usdc, other] : [other, usdc];
  }

  /** The quote's amounts, limits, price and price impact, as the API should answer them. */
  expect(sell: Token, buy: Token, side: Side, amount: bigint, bps = 50) {
    const [rIn, rOut] = this.oriented(sell, buy);
    const sold = side === "exact_in" ? amount : getAmountIn(amount, rIn, rOut);
    const bought = side === "exact_in" ? getAmountOut(amount, rIn, rOut) : amount;
    const b = BigInt(bps);
    const minBuy = side === "exact_in" ? (bought * (10_000n - b)) / 10_000n : bought;
    const maxSell = side === "exact_out" ? (sold * (10_000n + b) + 9_999n) / 10_000n : sold;
    // The spot price rOut/rIn moves to (rOut − bought)/(rIn + sold): |1 − after/before|, half up.
    const [aIn, aOut] = [rIn + sold, rOut - bought];
    const impact = Number(((rOut * aIn - aOut * rIn) * 20_000n + aIn * rOut) / (2n * aIn * rOut));
    const price = text((bought * 10n ** BigInt(DECIMALS[sell])) / sold, buy, 0);
    return { sold, bought, minBuy, maxSell, impact: Math.min(impact, 10_000), price };
  }

  apply(sell: Token, buy: Token, sold: bigint, bought: bigint) {
    const other = sell === "USDC" ? buy : sell;
    const [usdc, reserve] = this.reserves.get(other) ?? [0n, 0n];
    const next: [bigint, bigint] =
      sell === "USDC" ? [usdc + sold, reserve - bought] : [usdc - bought, reserve + sold];
    expect(next[0] * next[1], "k never decreases").toBeGreaterThanOrEqual(usdc * reserve);
    this.reserves.set(other, next);
  }
}

export interface Trade {
  sell: Token;
  buy: Token;
  side: Side;
  amount: string;
  bps?: number;
  /** The smart wallet's address, to quote from it. */
  smartWallet?: string;
}
export const USDC_ETH = { sell: "USDC", buy: "ETH", side: "exact_in" } as const;

/** The app's clock, a minute further at each call: createdAt and expiresAt become exact. */
let clock = Date.UTC(2030, 0, 1);
export function tick(): Date {
  clock += 60_000;
  return new Date(clock);
}

export const key = (k: string) => ({ "idempotency-key": k });

export function ok(res: LightMyRequestResponse, status = 200): Json {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers["content-type"]).toMatch(/^application\/json/);
  return res.json();
}
export const refused = (res: LightMyRequestResponse, status: number, body: Json) =>
  expect(ok(res, status)).toEqual(body);

export const quoteUrl = (query: Json, path = "/api/v1/swap/quote") =>
  `${path}?${new URLSearchParams(Object.entries(query).map(([k, v]) => [k, String(v)]))}`;

// ---- the app, its requests and its reads --------------------------------------------------------

/** The requests and reads of the sandbox swap tests, against the app `app()` answers (set in beforeAll). */
export function sandboxSwaps(app: () => TestApp) {
  const db = () => app().database.db;

  function call(method: "GET" | "POST", apiKey: string, url: string, payload?: unknown, headers = {}) {
    const options: InjectOptions = { method, url, headers: { ...bearer(apiKey), ...headers } };
    if (payload !== undefined) options.payload = payload as InjectOptions["payload"];
    return app().request(options);
  }
  const swapOf = (ws: CreatedWorkspace, body: unknown, headers = {}, path = "/api/v1/swap") =>
    call("POST", ws.testKey, path, body, headers);

  async function fund(ws: CreatedWorkspace, tokenSymbol: Token, amount: string, walletType = "eoa") {
    ok(await call("POST", ws.testKey, "/api/v1/sandbox/faucet", { tokenSymbol, amount, walletType }));
  }

  async function ledger(address: string, token: Token): Promise<bigint> {
    const rows = await db()
      .selectFrom("ledger_entries")
      .select("amount")
      .where("address", "=", address.toLowerCase())
      .where("token_symbol", "=", token)
      .execute();
    return rows.reduce((sum, row) => sum + BigInt(row.amount), 0n);
  }

  async function reservesOf(ws: CreatedWorkspace): Promise<Record<string, [bigint, bigint]>> {
    const rows = await db()
      .selectFrom("sandbox_swap_pools")
      .selectAll()
      .where("workspace_id", "=", ws.id)
      .execute();
    return Object.fromEntries(rows.map((r) => [r.pair, [BigInt(r.base_reserve), BigInt(r.quote_reserve)]]));
  }

  async function events(ws: CreatedWorkspace, type: string): Promise<unknown[]> {
    const rows = await db()
      .selectFrom("outbox_events")
      .select("payload")
      .where("workspace_id", "=", ws.id)
      .where("event_type", "=", type)
      .orderBy("id")
      .execute();
    return rows.map((r) => r.payload);
  }

  /** Everything a refused swap must leave as it was. */
  async function snapshot(ws: CreatedWorkspace) {
    const count = async (table: "swaps" | "outbox_events" | "payouts") =>
      (await db().selectFrom(table).select("id").where("workspace_id", "=", ws.id).execute()).length;
    const balances = await Promise.all(TOKENS.map((k) => ledger(ws.eoaAddress, k)));
    const [swaps, outbox, payouts] = [
      await count("swaps"),
      await count("outbox_events"),
      await count("payouts"),
    ];
    return { balances, reserves: await reservesOf(ws), swaps, outbox, payouts };
  }

  /** Quotes `trade` at `now` and checks the answer field by field against `pools`. */
  async function quoteChecked(ws: CreatedWorkspace, pools: Pools, trade: Trade, now = tick(), path?: string) {
    app().setNow(now);
    const field = trade.side === "exact_in" ? "sellAmount" : "buyAmount";
    const query: Json = { sellToken: trade.sell, buyToken: trade.buy, [field]: trade.amount };
    if (trade.bps !== undefined) query.slippageBps = trade.bps;
    if (trade.smartWallet) query.walletType = "smart_wallet";
    const quote = ok(await call("GET", ws.testKey, quoteUrl(query, path)));
    const amount = units(trade.amount, trade.side === "exact_in" ? trade.sell : trade.buy);
    const e = pools.expect(trade.sell, trade.buy, trade.side, amount, trade.bps);
    expect(quote).toEqual({
      quoteId: expect.stringMatching(UUID),
      network: "sandbox-a",
      side: trade.side,
      sellToken: trade.sell,
      buyToken: trade.buy,
      sellAmount: text(e.sold, trade.sell),
      buyAmount: text(e.bought, trade.buy),
      minBuyAmount: text(e.minBuy, trade.buy),
      maxSellAmount: text(e.maxSell, trade.sell),
      price: e.price,
      priceImpactBps: e.impact,
      slippageBps: trade.bps ?? 50,
      route: [
        { protocol: "sandbox-constant-product", pool: expect.stringMatching(/^0x[0-9a-f]{40}$/), fee: 3000 },
      ],
      walletType: trade.smartWallet ? "smart_wallet" : "eoa",
      fromAddress: trade.smartWallet ?? ws.eoaAddress,
      gasEstimate: "0",
      expiresAt: new Date(now.getTime() + 30_000).toISOString(),
    });
    return { quote, e, now, pool: (quote.route as Json[])[0]?.pool as string };
  }

  return { db, call, swapOf, fund, ledger, reservesOf, events, snapshot, quoteChecked };
}
