import { CHAIN_TOKENS, type ChainToken, TOKEN_DECIMALS } from "./money.ts";
import { isOneOf } from "./one-of.ts";
import type { Validated, WalletType } from "./payment-request.ts";
import { isPlainObject, isUuid, parseAmountField } from "./validation.ts";

// Validation of the swap endpoints (D16): GET …/swap/quote reads the query string, POST …/swap a
// JSON body carrying a quoteId or the same parameters. The first failing check answers (D13), and
// every message names its field.

export const DEFAULT_SLIPPAGE_BPS = 50;
export const MAX_SLIPPAGE_BPS = 1000;

export const SWAP_MESSAGES = {
  missing: (fields: readonly string[]) => `Missing required fields: ${fields.join(", ")}`,
  repeated: (field: string) => `${field} must be given once`,
  invalidToken: (field: string) => `Invalid ${field}: use ETH, USDC, ADAO or DAI`,
  sameToken: "sellToken and buyToken must differ",
  oneAmount: "Give exactly one of sellAmount and buyAmount",
  invalidAmount: (field: string, token: ChainToken) =>
    `${field} must be a positive number with at most ${TOKEN_DECIMALS[token]} decimals for ${token}`,
  invalidSlippage: "slippageBps must be an integer from 0 to 1000",
  invalidWalletType: "Invalid walletType: use eoa or smart_wallet",
  notAnObject: "Request body must be a JSON object",
  invalidQuoteId: "Invalid quoteId",
  quoteIdAndParams: "Give either quoteId or the quote's parameters, not both",
  missingQuote: "Give quoteId or the quote's parameters: sellToken, buyToken and sellAmount or buyAmount",
  invalidIdempotencyKey: "idempotencyKey must be a string of 1 to 255 characters",
} as const;

export type SwapSide = "exact_in" | "exact_out";

export interface QuoteRequest {
  sellToken: ChainToken;
  buyToken: ChainToken;
  side: SwapSide;
  /** Smallest units of sellToken for exact_in, of buyToken for exact_out. */
  amount: bigint;
  walletType: WalletType | null;
  slippageBps: number;
}

export type SwapRequest = ({ quoteId: string } | { quote: QuoteRequest }) & { idempotencyKey: string | null };

/** The parameters of a quote, in the order they are checked; any one of them conflicts with quoteId. */
const QUOTE_FIELDS = [
  "sellToken",
  "buyToken",
  "sellAmount",
  "buyAmount",
  "slippageBps",
  "walletType",
] as const;

const fail = (message: string): Validated<never> => ({ ok: false, message });
const given = (value: unknown) => value !== undefined && value !== null;

function isChainToken(value: unknown): value is ChainToken {
  return isOneOf(CHAIN_TOKENS, value);
}

/** A whole number 0–1000, as a JSON number or a digit string (what a query string carries). */
function parseSlippage(value: unknown): number | null {
  let bps: number;
  if (typeof value === "number") bps = value;
  else if (typeof value === "string" && /^[0-9]{1,4}$/.test(value)) bps = Number(value);
  else return null;
  return Number.isInteger(bps) && bps >= 0 && bps <= MAX_SLIPPAGE_BPS ? bps : null;
}

/** The shared rules of a quote's parameters, whether from a query string or a body. */
function checkQuote(fields: Record<string, unknown>): Validated<QuoteRequest> {
  // An empty token is missing; an empty amount is malformed, not missing (D13).
  const missing = (["sellToken", "buyToken"] as const).filter((f) => !given(fields[f]) || fields[f] === "");
  if (missing.length > 0) return fail(SWAP_MESSAGES.missing(missing));
  const { sellToken, buyToken } = fields;
  if (!isChainToken(sellToken)) return fail(SWAP_MESSAGES.invalidToken("sellToken"));
  if (!isChainToken(buyToken)) return fail(SWAP_MESSAGES.invalidToken("buyToken"));
  if (sellToken === buyToken) return fail(SWAP_MESSAGES.sameToken);

  if (given(fields.sellAmount) === given(fields.buyAmount)) return fail(SWAP_MESSAGES.oneAmount);
  const side: SwapSide = given(fields.sellAmount) ? "exact_in" : "exact_out";
  const [field, token] =
    side === "exact_in" ? (["sellAmount", sellToken] as const) : (["buyAmount", buyToken] as const);
  const amount = parseAmountField(fields[field], TOKEN_DECIMALS[token]);
  if (amount === null) return fail(SWAP_MESSAGES.invalidAmount(field, token));

  let slippageBps = DEFAULT_SLIPPAGE_BPS;
  if (given(fields.slippageBps)) {
    const parsed = parseSlippage(fields.slippageBps);
    if (parsed === null) return fail(SWAP_MESSAGES.invalidSlippage);
    slippageBps = parsed;
  }
  let walletType: WalletType | null = null;
  if (given(fields.walletType)) {
    if (fields.walletType !== "eoa" && fields.walletType !== "smart_wallet") {
      return fail(SWAP_MESSAGES.invalidWalletType);
    }
    walletType = fields.walletType;
  }
  return { ok: true, value: { sellToken, buyToken, side, amount, walletType, slippageBps } };
}

/**
 * GET …/swap/quote. Values arrive as strings; a repeated parameter arrives as an array and is
 * refused rather than guessed at. Parameters the endpoint does not know are ignored.
 */
export function validateQuoteRequest(query: Record<string, unknown>): Validated<QuoteRequest> {
  const repeated = QUOTE_FIELDS.find((field) => Array.isArray(query[field]));
  if (repeated) return fail(SWAP_MESSAGES.repeated(repeated));
  return checkQuote(query);
}

/**
 * POST …/swap: either {quoteId} or the quote's parameters (then re-quoted at execution), plus an
 * optional idempotencyKey (the Idempotency-Key header is the route's to read).
 */
export function validateSwapRequest(body: unknown): Validated<SwapRequest> {
  if (!isPlainObject(body)) return fail(SWAP_MESSAGES.notAnObject);
  const hasQuoteId = given(body.quoteId);
  const hasParams = QUOTE_FIELDS.some((field) => given(body[field]));
  if (hasQuoteId && hasParams) return fail(SWAP_MESSAGES.quoteIdAndParams);
  if (!hasQuoteId && !hasParams) return fail(SWAP_MESSAGES.missingQuote);

  let target: { quoteId: string } | { quote: QuoteRequest };
  if (hasQuoteId) {
    if (!isUuid(body.quoteId)) return fail(SWAP_MESSAGES.invalidQuoteId);
    target = { quoteId: body.quoteId };
  } else {
    const quote = checkQuote(body);
    if (!quote.ok) return quote;
    target = { quote: quote.value };
  }

  let idempotencyKey: string | null = null;
  if (given(body.idempotencyKey)) {
    const key = body.idempotencyKey;
    if (typeof key !== "string" || key.length === 0 || key.length > 255) {
      return fail(SWAP_MESSAGES.invalidIdempotencyKey);
    }
    idempotencyKey = key;
  }
  return { ok: true, value: { ...target, idempotencyKey } };
}
