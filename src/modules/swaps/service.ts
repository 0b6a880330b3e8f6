import { randomUUID } from "node:crypto";
import type { ChainToken, Hex, IncomingTransfer, OnNetwork } from "../../chain/network.ts";
import type { AppContext } from "../../context.ts";
import { badRequest, ConcurrentChange, conflict, InternalError, notFound } from "../../domain/errors.ts";
import { idempotencyKeyProblem } from "../../domain/refund-request.ts";
import { maximumIn, minimumOut } from "../../domain/swap-math.ts";
import { type QuoteRequest, validateQuoteRequest, validateSwapRequest } from "../../domain/swap-request.ts";
import { isPlainObject, isUuid } from "../../domain/validation.ts";
import { DEFAULT_NETWORK_ID } from "../../network-config.ts";
import { KeyedQueue } from "../../platform/concurrency/keyed-queue.ts";
import { KEY_FENCE, KeyTaken, ResourceKeys } from "../../platform/db/resource-keys.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import { recordedTransfer } from "../transfers/order.ts";
import type { TransfersService } from "../transfers/service.ts";
import { POOL_FENCE } from "./pools-repo.ts";
import { priceMoved, type QuoteView, quoteView } from "./quote-view.ts";
import * as repo from "./repo.ts";
import { PoolMoved, type Scope, type SwapAsk, type SwapVenue, type VenueQuote } from "./venue.ts";
import { type SwapVenues, venueOf } from "./venues.ts";
import { amountOf, factsOf, factsOfRecord, metadataOf, type SwapView, swapView } from "./view.ts";

// Swaps (D16) as operations: quote (the venue's best fill, stored 30 s with its slippage limits)
// → execute (re-quoted: a price past the limits is a 409 and nothing is sent; then the swap is a
// transfer of the payout operation from the quote's wallet — its breaker, balance checks, record
// before broadcast and reconciler — whose guard claims the Idempotency-Key and records the swap's
// own facts in the same transaction). On a chain the quote's limits and expiry also go into the
// router call, so a price that moves after it was sent reverts rather than costs the wallet.

const QUOTE_TTL_MS = 30_000;
/** A quote executes only with this much of its life left: its expiry is the swap's deadline on chain. */
const MIN_TIME_LEFT_MS = 5_000;
/** An expired quote is kept this long (a late POST of it answers "Quote expired", not 404). */
const QUOTE_RETENTION_MS = 3_600_000;
/**
 * A sandbox pool traded (by another instance, or the workspace's other wallet) between a swap's
 * plan and its record: planned again on the new reserves. Each time this happens another swap got
 * through, so a few rounds settle any burst; the bound keeps a pathological one from spinning.
 */
const MAX_PLANS = 20;
const KEYS = new ResourceKeys("swaps");

export type SwapAnswer = { replayed: boolean; swap: SwapView };

export class SwapsService {
  readonly #ctx: AppContext;
  readonly #transfers: TransfersService;
  readonly #venues: SwapVenues;
  readonly #wallets = new KeyedQueue();

  constructor(ctx: AppContext, parts: { transfers: TransfersService; venues: SwapVenues }) {
    this.#ctx = ctx;
    this.#transfers = parts.transfers;
    this.#venues = parts.venues;
  }

  /**
   * Which of a scan's incoming transfers (their transactions, lower-case) are what the service's
   * own swaps bought (the chain watcher's question): a swap's proceeds reach its wallet from the
   * public router, as anyone's swap paying a workspace would, so they are told apart by the
   * transaction the service recorded (an EOA's) or the user operation it carried (a smart
   * wallet's, recorded before it was sent), never by the router as a sender.
   */
  async ownSwapTransactions(on: OnNetwork, transfers: readonly IncomingTransfer[]): Promise<Set<string>> {
    const chain = this.#ctx.chains.of(on.environment, on.id);
    const router = chain?.config.swap?.routerAddress.toLowerCase();
    if (!router || !chain) return new Set();
    const { network } = chain;
    const txHashes = [
      ...new Set(transfers.filter((t) => t.from.toLowerCase() === router).map((t) => t.txHash.toLowerCase())),
    ];
    if (txHashes.length === 0) return new Set();
    const operations = await Promise.all(txHashes.map((h) => network.userOperationsIn(h as Hex)));
    const recorded = await this.#transfers.recordedOfKind(network, "swap", {
      txHashes,
      userOpHashes: operations.flat().map((h) => h.toLowerCase()),
    });
    return new Set(
      txHashes.filter(
        (h, i) => recorded.has(h) || (operations[i] ?? []).some((op) => recorded.has(op.toLowerCase())),
      ),
    );
  }

  async quote(tenant: Tenant, query: Record<string, unknown>): Promise<QuoteView> {
    const validated = validateQuoteRequest(query);
    if (!validated.ok) throw badRequest(validated.message);
    const network = this.#network(tenant, query);
    return quoteView(await this.#quote(scopeOf(tenant), network, validated.value));
  }

  async #quote(scope: Scope, network: string, request: QuoteRequest): Promise<repo.QuoteRow> {
    const venue = venueOf(this.#venues, scope.environment, network);
    const wallet = await this.#transfers.walletFor(scope, network, request.walletType);
    const ask: SwapAsk = {
      sell: request.sellToken,
      buy: request.buyToken,
      side: request.side,
      amount: request.amount,
    };
    const fill = await venue.quote(scope, ask);
    if (!fill) throw badRequest("No liquidity for this pair");
    const now = this.#ctx.now();
    const exactIn = request.side === "exact_in";
    const minBuy = exactIn ? minimumOut(fill.buyAmount, request.slippageBps) : fill.buyAmount;
    if (minBuy <= 0n) {
      throw badRequest("Amount too small: the least this swap could buy within its slippage is 0", {
        buyAmount: amountOf(fill.buyAmount, request.buyToken),
      });
    }
    return repo.insertQuote(this.#ctx.db, {
      id: randomUUID(),
      scope,
      network: venue.network,
      sellToken: request.sellToken,
      buyToken: request.buyToken,
      side: request.side,
      sellAmount: fill.sellAmount,
      buyAmount: fill.buyAmount,
      minBuyAmount: minBuy,
      maxSellAmount: exactIn ? fill.sellAmount : maximumIn(fill.sellAmount, request.slippageBps),
      slippageBps: request.slippageBps,
      priceImpactBps: fill.priceImpactBps,
      walletType: wallet.walletType,
      fromAddress: wallet.from,
      route: fill.route,
      gasEstimate: fill.gasEstimate,
      expiresAt: new Date(now.getTime() + QUOTE_TTL_MS),
      createdAt: now,
    });
  }

  /** POST /swap: the swap as it ended (or is still pending), or a repeat's. */
  async execute(tenant: Tenant, body: unknown, headerKey: string | undefined): Promise<SwapAnswer> {
    const keyProblem = idempotencyKeyProblem(headerKey);
    if (keyProblem) throw badRequest(keyProblem);
    const validated = validateSwapRequest(body);
    if (!validated.ok) throw badRequest(validated.message);
    const { idempotencyKey, ...request } = validated.value;
    const named = isPlainObject(body) && body.network !== undefined;
    const network = this.#network(tenant, body);
    const key = headerKey ?? idempotencyKey ?? undefined;
    const scope = scopeOf(tenant);
    venueOf(this.#venues, scope.environment, network);
    const fingerprint = KEYS.fingerprint("swap", request);
    const repeat = key ? await KEYS.under(this.#ctx.db, scope, key, fingerprint) : null;
    if (repeat) return this.#repeat(scope, repeat);

    const quote =
      "quoteId" in request
        ? await this.#stored(scope, request.quoteId)
        : await this.#quote(scope, network, request.quote);
    // A swap executes on its quote's network; naming another is refused, never moved.
    if (named && quote.network !== network) {
      throw badRequest(`The quote is on network ${quote.network}: a swap executes on its quote's network`, {
        network,
        quoteNetwork: quote.network,
      });
    }
    try {
      // One swap of a wallet at a time in this process: a swap's approval is planned from the
      // router's allowance, which a swap still on its way would spend (another instance's can: its
      // router call then reverts, nothing swapped).
      const swap = await this.#wallets.run(`${scope.environment}:${quote.from_address.toLowerCase()}`, () =>
        this.#execute(scope, quote, key ? { key, fingerprint } : undefined),
      );
      return { replayed: false, swap };
    } catch (err) {
      // A concurrent request with the same key recorded its swap first.
      if (err instanceof KeyTaken) return this.#repeat(scope, err);
      throw err;
    }
  }

  async #stored(scope: Scope, quoteId: string): Promise<repo.QuoteRow> {
    const quote = await repo.findQuote(this.#ctx.db, scope, quoteId);
    if (!quote) throw notFound("Quote not found");
    this.#assertFresh(quote);
    return quote;
  }

  /**
   * 400 once the quote expired, or has too little time left for its deadline (the expiry) to
   * reach the chain: a swap sent then would revert, its gas spent and counted by the breaker.
   */
  #assertFresh(quote: repo.QuoteRow): void {
    if (quote.expires_at.getTime() - this.#ctx.now().getTime() < MIN_TIME_LEFT_MS)
      throw badRequest("Quote expired", { quoteId: quote.id });
  }

  async #execute(
    scope: Scope,
    quote: repo.QuoteRow,
    claim?: { key: string; fingerprint: string },
  ): Promise<SwapView> {
    const venue = venueOf(this.#venues, scope.environment, quote.network);
    // Again in the wallet's turn: it may have waited behind another swap's receipts.
    this.#assertFresh(quote);
    const ask: SwapAsk = {
      sell: quote.sell_token as ChainToken,
      buy: quote.buy_token as ChainToken,
      side: quote.side === "exact_out" ? "exact_out" : "exact_in",
      amount: BigInt(quote.side === "exact_out" ? quote.buy_amount : quote.sell_amount),
    };
    const minBuy = BigInt(quote.min_buy_amount);
    const maxSell = BigInt(quote.max_sell_amount);
    for (let attempt = 1; ; attempt++) {
      const fresh = await venue.quote(scope, ask);
      if (!fresh || fresh.buyAmount < minBuy || fresh.sellAmount > maxSell) {
        throw priceMoved(quote, fresh);
      }
      try {
        return await this.#attempt(scope, venue, { quote, ask, fresh, minBuy, maxSell }, claim);
      } catch (err) {
        if (!(err instanceof PoolMoved)) throw err;
        if (attempt < MAX_PLANS) continue;
        throw new ConcurrentChange("Other swaps kept trading against this pool meanwhile; try again", {
          quoteId: quote.id,
        });
      }
    }
  }

  /**
   * Plans the swap on `fresh` and sends it as a transfer of the payout operation, its facts and
   * idempotency claim recorded by the guard in the transaction that records the transfer.
   * PoolMoved: the venue's pool moved since `fresh` (nothing recorded).
   */
  async #attempt(
    scope: Scope,
    venue: SwapVenue,
    swap: { quote: repo.QuoteRow; ask: SwapAsk; fresh: VenueQuote; minBuy: bigint; maxSell: bigint },
    claim?: { key: string; fingerprint: string },
  ): Promise<SwapView> {
    const { quote, ask, fresh, minBuy, maxSell } = swap;
    const id = randomUUID();
    const wallet = {
      from: quote.from_address as Hex,
      walletType: quote.wallet_type === "smart_wallet" ? ("smart_wallet" as const) : ("eoa" as const),
    };
    const plan = await venue.plan({
      id,
      scope,
      ask,
      quote: fresh,
      minBuy,
      maxSell,
      wallet,
      expiresAt: quote.expires_at,
    });
    const at = this.#ctx.now();
    const record: repo.NewSwap = {
      id,
      scope,
      network: quote.network,
      quoteId: quote.id,
      sellToken: quote.sell_token,
      buyToken: quote.buy_token,
      side: ask.side,
      quotedSellAmount: fresh.sellAmount,
      quotedBuyAmount: fresh.buyAmount,
      minBuyAmount: minBuy,
      maxSellAmount: maxSell,
      slippageBps: quote.slippage_bps,
      route: fresh.route,
      sold: plan.known?.sold ?? null,
      bought: plan.known?.bought ?? null,
      createdAt: at,
    };
    const pool = fresh.route[0]?.pool;
    const fences = [
      ...(claim
        ? [KEYS.fence(this.#ctx.db, scope, claim.key, { id, fingerprint: claim.fingerprint, at })]
        : []),
      repo.insertSwapFence(this.#ctx.db, record),
      ...(plan.fences ?? []),
    ];
    const outcome = await this.#transfers.run({
      id,
      kind: "swap",
      scope,
      tokenSymbol: quote.sell_token,
      amount: plan.amount,
      destinationAddress: plan.destination,
      walletType: wallet.walletType,
      network: quote.network,
      paymentId: null,
      unmatchedTransferId: null,
      reason: null,
      fences,
      // The route's first pool: where the engine's reading of the completed swap finds its amounts.
      metadata: { ...metadataOf(factsOfRecord(record)), ...(pool ? { pool } : {}) },
      ...(plan.legs ? { legs: { from: wallet.from, legs: plan.legs } } : {}),
    });
    if (outcome.status === "fenced") throw await this.#fenced(scope, outcome.fence, quote.id, claim);
    // A swap that failed answers as its transfer; only one never recorded is refused.
    const transfer = recordedTransfer(outcome);
    const found = await repo.findById(this.#ctx.db, id);
    if (!found) throw new InternalError("A swap answered without its record");
    return swapView(transfer, factsOf(found));
  }

  /**
   * Why a fence of the swap's record took nothing, read once nothing was recorded: the key's claim
   * (KeyTaken, answered as a repeat), the quote executed meanwhile, or the pool traded (PoolMoved).
   */
  async #fenced(
    scope: Scope,
    fence: string,
    quoteId: string,
    claim?: { key: string; fingerprint: string },
  ): Promise<Error> {
    if (fence === KEY_FENCE && claim) {
      const taken = await KEYS.under(this.#ctx.db, scope, claim.key, claim.fingerprint);
      if (taken) return taken;
    }
    if (fence === repo.QUOTE_FENCE) return conflict("Quote already executed", { quoteId });
    if (fence === POOL_FENCE) return new PoolMoved("the pool traded meanwhile");
    return new Error(`the swap's fence "${fence}" refused it`);
  }

  /** A repeated Idempotency-Key: the swap it made, as it stands; another request under it is a conflict. */
  async #repeat(scope: Scope, taken: KeyTaken): Promise<SwapAnswer> {
    const swap = taken.resourceId ? await this.#find(scope, taken.resourceId) : undefined;
    if (!taken.sameRequest) throw conflict("Idempotency key already used", { swap: swap ?? null });
    if (!swap) throw new InternalError("The swap recorded under this Idempotency-Key was not found");
    return { replayed: true, swap };
  }

  async get(tenant: Tenant, id: string): Promise<SwapView> {
    const found = isUuid(id) ? await this.#find(scopeOf(tenant), id) : undefined;
    if (!found) throw notFound("Swap not found");
    return found;
  }

  async list(tenant: Tenant, page: { limit: number; offset: number }) {
    const scope = scopeOf(tenant);
    const { rows, total } = await repo.listSwaps(this.#ctx.db, scope, page);
    const transfers = new Map(
      (
        await this.#transfers.transfersIn(
          scope,
          rows.map((r) => r.id),
        )
      ).map((t) => [t.id, t]),
    );
    const swaps = rows.flatMap((row) => {
      const transfer = transfers.get(row.id);
      return transfer ? [swapView(transfer, factsOf(row))] : [];
    });
    return { swaps, total, limit: page.limit, offset: page.offset };
  }

  /** Deletes quotes that expired over an hour ago and were never executed; how many. */
  forgetExpiredQuotes(): Promise<number> {
    return repo.deleteUnusedQuotes(this.#ctx.db, new Date(this.#ctx.now().getTime() - QUOTE_RETENTION_MS));
  }

  /** Completed swaps per pair: how many, what they sold and what they bought (the wallet's stats). */
  async totals(tenant: Tenant) {
    const rows = await repo.completedTotals(this.#ctx.db, scopeOf(tenant));
    return rows.map((row) => ({
      sellToken: row.sell_token,
      buyToken: row.buy_token,
      count: Number(row.count),
      sold: amountOf(row.sold, row.sell_token),
      bought: amountOf(row.bought, row.buy_token),
    }));
  }

  async #find(scope: Scope, id: string): Promise<SwapView | undefined> {
    const [swap, transfer] = await Promise.all([
      repo.findSwap(this.#ctx.db, scope, id),
      this.#transfers.findTransfer(scope, id),
    ]);
    return swap && transfer ? swapView(transfer, factsOf(swap)) : undefined;
  }

  /** The network a quote or swap request names, else the environment's default (none: `default`, no venue: 503). */
  #network(tenant: Tenant, body: unknown): string {
    return this.#ctx.directory.resolveIn(tenant.environment, body) ?? DEFAULT_NETWORK_ID;
  }
}

function scopeOf(tenant: Tenant): Scope {
  return { workspaceId: tenant.workspaceId, environment: tenant.environment };
}
