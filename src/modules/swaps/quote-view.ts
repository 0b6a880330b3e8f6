import { conflict } from "../../domain/errors.ts";
import { TOKEN_DECIMALS, type TokenSymbol } from "../../domain/money.ts";
import { executionPrice } from "../../domain/swap-math.ts";
import type { RouteHop } from "../../platform/db/schema-exchange.ts";
import type { QuoteRow } from "./repo.ts";
import type { VenueQuote } from "./venue.ts";
import { amountOf } from "./view.ts";

// The quote object of D16 (GET …/swap/quote): what the venue would fill now, the limits a swap of
// it executes with (minBuyAmount; maxSellAmount for an exact-output quote), until expiresAt.

export interface QuoteView {
  quoteId: string;
  /** The network its venue trades on (D22). */
  network: string;
  side: string;
  sellToken: string;
  buyToken: string;
  sellAmount: string;
  buyAmount: string;
  minBuyAmount: string;
  maxSellAmount: string;
  /** Units of the bought token per unit sold, at this quote. */
  price: string;
  priceImpactBps: number;
  slippageBps: number;
  route: RouteHop[];
  walletType: string;
  fromAddress: string;
  /** Gas units of the swap itself (0 on the sandbox's ledger); a smart wallet's is sponsored. */
  gasEstimate: string;
  expiresAt: string;
}

export function quoteView(row: QuoteRow): QuoteView {
  const decimals = (token: string) => TOKEN_DECIMALS[token as TokenSymbol];
  return {
    quoteId: row.id,
    network: row.network,
    side: row.side,
    sellToken: row.sell_token,
    buyToken: row.buy_token,
    sellAmount: amountOf(row.sell_amount, row.sell_token),
    buyAmount: amountOf(row.buy_amount, row.buy_token),
    minBuyAmount: amountOf(row.min_buy_amount, row.buy_token),
    maxSellAmount: amountOf(row.max_sell_amount, row.sell_token),
    price: executionPrice(
      BigInt(row.sell_amount),
      decimals(row.sell_token),
      BigInt(row.buy_amount),
      decimals(row.buy_token),
    ),
    priceImpactBps: row.price_impact_bps,
    slippageBps: row.slippage_bps,
    route: row.route,
    walletType: row.wallet_type,
    fromAddress: row.from_address,
    gasEstimate: row.gas_estimate,
    expiresAt: row.expires_at.toISOString(),
  };
}

/** 409: the fresh fill (null: none at all) is past the quote's limits; nothing was sent. */
export function priceMoved(quote: QuoteRow, fresh: VenueQuote | null) {
  return conflict("Price moved beyond slippage", {
    minBuyAmount: amountOf(quote.min_buy_amount, quote.buy_token),
    buyAmount: amountOf(fresh?.buyAmount ?? 0n, quote.buy_token),
    ...(quote.side === "exact_out"
      ? {
          maxSellAmount: amountOf(quote.max_sell_amount, quote.sell_token),
          sellAmount: fresh ? amountOf(fresh.sellAmount, quote.sell_token) : null,
        }
      : {}),
  });
}
