import { type CompiledQuery, type Selectable, sql } from "kysely";
import { columnsOf } from "../../platform/db/columns.ts";
import type { Db } from "../../platform/db/database.ts";
import type { Fence } from "../../platform/db/fences.ts";
import { newestFirst } from "../../platform/db/page.ts";
import type { RouteHop, SwapQuotesTable, SwapsTable } from "../../platform/db/schema-exchange.ts";
import { idInScope } from "../../platform/db/scope.ts";
import type { Scope } from "./venue.ts";

// The SQL of swaps (D16, migration 023): stored quotes, and each swap's own facts beside its
// transfer (the payouts row of the same id, read through the transfers service).

export type QuoteRow = Selectable<SwapQuotesTable>;
export type SwapRow = Selectable<SwapsTable>;

/** A quote's and a swap's whole rows, named column by column (platform/db/columns.ts). */
export const QUOTE_COLUMNS = columnsOf<SwapQuotesTable>({
  id: true,
  workspace_id: true,
  environment: true,
  sell_token: true,
  buy_token: true,
  side: true,
  sell_amount: true,
  buy_amount: true,
  min_buy_amount: true,
  max_sell_amount: true,
  slippage_bps: true,
  price_impact_bps: true,
  wallet_type: true,
  from_address: true,
  route: true,
  gas_estimate: true,
  expires_at: true,
  created_at: true,
  network: true,
});

export const SWAP_COLUMNS = columnsOf<SwapsTable>({
  id: true,
  workspace_id: true,
  environment: true,
  quote_id: true,
  sell_token: true,
  buy_token: true,
  side: true,
  quoted_sell_amount: true,
  quoted_buy_amount: true,
  min_buy_amount: true,
  max_sell_amount: true,
  slippage_bps: true,
  route: true,
  sold_amount: true,
  bought_amount: true,
  created_at: true,
  network: true,
});

export interface NewQuote {
  id: string;
  scope: Scope;
  /** Its venue's network (D22). */
  network: string;
  sellToken: string;
  buyToken: string;
  side: string;
  sellAmount: bigint;
  buyAmount: bigint;
  minBuyAmount: bigint;
  maxSellAmount: bigint;
  slippageBps: number;
  priceImpactBps: number;
  walletType: string;
  fromAddress: string;
  route: RouteHop[];
  gasEstimate: bigint;
  expiresAt: Date;
  createdAt: Date;
}

export async function insertQuote(db: Db, quote: NewQuote): Promise<QuoteRow> {
  return db
    .insertInto("swap_quotes")
    .values({
      id: quote.id,
      workspace_id: quote.scope.workspaceId,
      environment: quote.scope.environment,
      network: quote.network,
      sell_token: quote.sellToken,
      buy_token: quote.buyToken,
      side: quote.side,
      sell_amount: quote.sellAmount,
      buy_amount: quote.buyAmount,
      min_buy_amount: quote.minBuyAmount,
      max_sell_amount: quote.maxSellAmount,
      slippage_bps: quote.slippageBps,
      price_impact_bps: quote.priceImpactBps,
      wallet_type: quote.walletType,
      from_address: quote.fromAddress,
      route: JSON.stringify(quote.route),
      gas_estimate: quote.gasEstimate,
      expires_at: quote.expiresAt,
      created_at: quote.createdAt,
    })
    .returning(QUOTE_COLUMNS)
    .executeTakeFirstOrThrow();
}

/** A quote of the scope; undefined for anyone else's. */
export async function findQuote(db: Db, scope: Scope, id: string): Promise<QuoteRow | undefined> {
  return db.selectFrom("swap_quotes").select(QUOTE_COLUMNS).where(idInScope(scope, id)).executeTakeFirst();
}

export interface NewSwap {
  id: string;
  scope: Scope;
  /** Its quote's network (D22). */
  network: string;
  quoteId: string | null;
  sellToken: string;
  buyToken: string;
  side: string;
  quotedSellAmount: bigint;
  quotedBuyAmount: bigint;
  minBuyAmount: bigint;
  maxSellAmount: bigint;
  slippageBps: number;
  route: RouteHop[];
  /** Known at once on the sandbox's ledger; read from the chain once mined elsewhere. */
  sold: bigint | null;
  bought: bigint | null;
  createdAt: Date;
}

/** Records the swap's facts in the transaction that records its transfer (after it, by id). */
/** The name of a swap's record among its fences (one swap per quote). */
export const QUOTE_FENCE = "quote";

/**
 * The swap's record as a fence of its transfer's: refused (fence `quote`) when its quote was
 * executed already (one swap per quote, a partial unique index).
 */
export function insertSwapFence(db: Db, swap: NewSwap): Fence {
  const statement = db
    .insertInto("swaps")
    .values({
      id: swap.id,
      workspace_id: swap.scope.workspaceId,
      environment: swap.scope.environment,
      network: swap.network,
      quote_id: swap.quoteId,
      sell_token: swap.sellToken,
      buy_token: swap.buyToken,
      side: swap.side,
      quoted_sell_amount: swap.quotedSellAmount,
      quoted_buy_amount: swap.quotedBuyAmount,
      min_buy_amount: swap.minBuyAmount,
      max_sell_amount: swap.maxSellAmount,
      slippage_bps: swap.slippageBps,
      route: JSON.stringify(swap.route),
      sold_amount: swap.sold,
      bought_amount: swap.bought,
      created_at: swap.createdAt,
    })
    .onConflict((oc) => oc.column("quote_id").where("quote_id", "is not", null).doNothing())
    .returning("id")
    .compile();
  return { name: QUOTE_FENCE, statement, required: true };
}

export async function findSwap(db: Db, scope: Scope, id: string): Promise<SwapRow | undefined> {
  return db.selectFrom("swaps").select(SWAP_COLUMNS).where(idInScope(scope, id)).executeTakeFirst();
}

export async function findById(db: Db, id: string): Promise<SwapRow | undefined> {
  return db.selectFrom("swaps").select(SWAP_COLUMNS).where("id", "=", id).executeTakeFirst();
}

/** What the chain says it sold and bought; a second reading (the reconciler's) changes nothing. */
export function recordAmountsStatement(
  db: Db,
  id: string,
  amounts: { sold: bigint; bought: bigint },
): CompiledQuery {
  return db
    .updateTable("swaps")
    .set({ sold_amount: amounts.sold, bought_amount: amounts.bought })
    .where("id", "=", id)
    .where("sold_amount", "is", null)
    .compile();
}

/** A page of the scope's swaps, newest first, with the total. */
export async function listSwaps(
  db: Db,
  scope: Scope,
  page: { limit: number; offset: number },
): Promise<{ rows: SwapRow[]; total: number }> {
  const base = db
    .selectFrom("swaps")
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment);
  return newestFirst(
    base.select(SWAP_COLUMNS),
    base.select((eb) => eb.fn.countAll<string>().as("total")),
    page,
  );
}

/**
 * Count, sold and bought (smallest units, as text) of the scope's swaps per pair whose amounts the
 * chain told: the completed ones (a failed swap never has them).
 */
export async function completedTotals(db: Db, scope: Scope) {
  return db
    .selectFrom("swaps")
    .select((eb) => [
      "sell_token",
      "buy_token",
      eb.fn.countAll<string>().as("count"),
      sql<string>`sum(sold_amount)::text`.as("sold"),
      sql<string>`sum(bought_amount)::text`.as("bought"),
    ])
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment)
    .where("bought_amount", "is not", null)
    .groupBy(["sell_token", "buy_token"])
    .orderBy("sell_token")
    .orderBy("buy_token")
    .execute();
}

/** Deletes quotes that expired before `before` and no swap executed, a batch at a time; how many. */
export async function deleteUnusedQuotes(db: Db, before: Date): Promise<number> {
  const result = await sql<{ id: string }>`
    DELETE FROM swap_quotes WHERE id IN (
      SELECT q.id FROM swap_quotes q
      WHERE q.expires_at < ${before}
        AND NOT EXISTS (SELECT 1 FROM swaps s WHERE s.quote_id = q.id)
      LIMIT 10000)
    RETURNING id`.execute(db);
  return result.rows.length;
}
