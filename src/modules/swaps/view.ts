import { formatAmount, TOKEN_DECIMALS, type TokenSymbol } from "../../domain/money.ts";
import type { TransferRow } from "../transfers/repo.ts";
import type { NewSwap, SwapRow } from "./repo.ts";

// The swap object of D16: the body of POST …/swap and GET …/swaps, and the `data` of swap.*
// events. A swap's status is its transfer's (payout-state.ts's table; `processing` is shown as
// `pending`); its tokens and amounts are its own (the swaps row, or the transfer's metadata, which
// carries them for the events the payout operation writes).

export const SWAP_STATUSES = ["pending", "completed", "failed"] as const;
export type SwapStatus = (typeof SWAP_STATUSES)[number];

export interface SwapView {
  swapId: string;
  status: SwapStatus;
  /** The network it trades on (D22): its transfer's. */
  network: string;
  quoteId: string | null;
  side: string;
  sellToken: string;
  buyToken: string;
  /** What it sold and bought once completed (read from the chain); until then, the quote's. */
  sellAmount: string;
  buyAmount: string;
  minBuyAmount: string;
  maxSellAmount: string;
  slippageBps: number;
  walletType: string;
  fromAddress: string;
  txHash: string | null;
  userOpHash?: string;
  error?: string;
  createdAt: string;
  completedAt: string | null;
}

/** The facts a swap's transfer carries in its metadata (strings: the view's own values). */
export type SwapFacts = Pick<
  SwapView,
  | "quoteId"
  | "side"
  | "sellToken"
  | "buyToken"
  | "sellAmount"
  | "buyAmount"
  | "minBuyAmount"
  | "maxSellAmount"
> & { slippageBps: string };

const amountOf = (units: bigint | string, token: string) =>
  formatAmount(BigInt(units), TOKEN_DECIMALS[token as TokenSymbol]);

export function factsOf(swap: SwapRow): SwapFacts {
  return {
    quoteId: swap.quote_id,
    side: swap.side,
    sellToken: swap.sell_token,
    buyToken: swap.buy_token,
    sellAmount: amountOf(swap.sold_amount ?? swap.quoted_sell_amount, swap.sell_token),
    buyAmount: amountOf(swap.bought_amount ?? swap.quoted_buy_amount, swap.buy_token),
    minBuyAmount: amountOf(swap.min_buy_amount, swap.buy_token),
    maxSellAmount: amountOf(swap.max_sell_amount, swap.sell_token),
    slippageBps: String(swap.slippage_bps),
  };
}

/** The metadata a swap's transfer is recorded with (its events are built from the transfer alone). */
export function metadataOf(facts: SwapFacts): Record<string, string> {
  const { quoteId, ...rest } = facts;
  return { ...rest, ...(quoteId ? { quoteId } : {}) };
}

export function swapView(transfer: TransferRow, facts: SwapFacts): SwapView {
  return {
    swapId: transfer.id,
    status:
      transfer.status === "completed" ? "completed" : transfer.status === "failed" ? "failed" : "pending",
    network: transfer.network,
    quoteId: facts.quoteId,
    side: facts.side,
    sellToken: facts.sellToken,
    buyToken: facts.buyToken,
    sellAmount: facts.sellAmount,
    buyAmount: facts.buyAmount,
    minBuyAmount: facts.minBuyAmount,
    maxSellAmount: facts.maxSellAmount,
    slippageBps: Number(facts.slippageBps),
    walletType: transfer.wallet_type,
    fromAddress: transfer.from_address,
    txHash: transfer.tx_hash,
    ...(transfer.user_op_hash ? { userOpHash: transfer.user_op_hash } : {}),
    ...(transfer.status === "failed" && transfer.error ? { error: transfer.error } : {}),
    createdAt: transfer.created_at.toISOString(),
    completedAt: transfer.completed_at?.toISOString() ?? null,
  };
}

/** A swap's view from its transfer alone (the events'): its facts are the transfer's metadata. */
export function swapViewOfTransfer(transfer: TransferRow): SwapView {
  const m = transfer.metadata;
  const facts: SwapFacts = {
    quoteId: m.quoteId ?? null,
    side: m.side ?? "",
    sellToken: m.sellToken ?? transfer.token_symbol,
    buyToken: m.buyToken ?? "",
    sellAmount: m.sellAmount ?? "",
    buyAmount: m.buyAmount ?? "",
    minBuyAmount: m.minBuyAmount ?? "",
    maxSellAmount: m.maxSellAmount ?? "",
    slippageBps: m.slippageBps ?? "0",
  };
  return swapView(transfer, facts);
}

export { amountOf };

/** A swap's facts as its transfer's metadata carries them (service.ts records both at once). */
export function factsOfRecord(record: NewSwap): SwapFacts {
  return {
    quoteId: record.quoteId,
    side: record.side,
    sellToken: record.sellToken,
    buyToken: record.buyToken,
    sellAmount: amountOf(record.sold ?? record.quotedSellAmount, record.sellToken),
    buyAmount: amountOf(record.bought ?? record.quotedBuyAmount, record.buyToken),
    minBuyAmount: amountOf(record.minBuyAmount, record.buyToken),
    maxSellAmount: amountOf(record.maxSellAmount, record.sellToken),
    slippageBps: String(record.slippageBps),
  };
}
