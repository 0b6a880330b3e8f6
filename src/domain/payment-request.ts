import { CARD_CURRENCY, isCryptoToken, splitFee, TOKEN_DECIMALS, type TokenSymbol } from "./money.ts";
import { ownWalletProblem } from "./own-wallets.ts";
import {
  descriptionProblem,
  httpUrlProblem,
  isAddress,
  isPlainObject,
  metadataProblem,
  parseAmountField,
} from "./validation.ts";

// Validation of POST /api/v1/payments. The order of checks follows the part 7 table of the
// interface (D13: with several invalid fields the first failing check answers), and the
// messages are the interface's, word for word.

export const MESSAGES = {
  required: "tokenSymbol, amount, and merchantWallet are required",
  invalidToken: "Invalid token symbol",
  invalidAmount: "Amount must be a positive number",
  invalidMerchantWallet: "Invalid merchant wallet address",
  noSettlementAddress: "No merchantWallet provided and no settlement address configured",
  cardMinimum: "Amount must be at least 0.50 USD for card payments",
  cardMaximum: "Amount must be at most 999999.99 USD for card payments",
  invalidPaymentMethod: "Invalid paymentMethod: use crypto or card",
  invalidWalletType: "Invalid walletType: use eoa or smart_wallet",
  invalidExpiry: "expiresInMinutes must be a whole number from 1 to 10080 (7 days)",
  notAnObject: "Request body must be a JSON object",
} as const;

export const CARD_MINIMUM_CENTS = 50n;
/** The card provider's largest charge (Stripe: 99,999,999 cents): refused here, not by a 502 there. */
export const CARD_MAXIMUM_CENTS = 99_999_999n;
export const DEFAULT_EXPIRY_MINUTES = 60;
export const MAX_EXPIRY_MINUTES = 7 * 24 * 60;
const RETURN_URL_ALIASES = ["returnUrl", "successUrl", "merchantReturnUrl"] as const;

export type PaymentMethod = "crypto" | "card";
export type WalletType = "eoa" | "smart_wallet";

export interface PaymentRequest {
  paymentMethod: PaymentMethod;
  tokenSymbol: TokenSymbol;
  gross: bigint;
  fee: bigint;
  net: bigint;
  /** null only for card payments with no wallet anywhere (D13). */
  merchantWallet: string | null;
  walletType: WalletType | null;
  expiresInMinutes: number;
  returnUrl: string | null;
  cancelUrl: string | null;
  description: string | null;
  metadata: Record<string, string>;
}

export interface SettlementFallback {
  workspaceSettlementAddress: string | null;
  accountSettlementAddress: string | null;
  /** The workspace's receiving wallets: never where a crypto payment settles (own-wallets.ts). */
  ownWallets?: ReadonlyArray<string | null>;
}

export type Validated<T> = { ok: true; value: T } | { ok: false; message: string };

const absent = (value: unknown) => value === undefined || value === null;
const fail = (message: string): Validated<never> => ({ ok: false, message });

export function validatePaymentRequest(
  body: unknown,
  fallback: SettlementFallback,
): Validated<PaymentRequest> {
  if (!isPlainObject(body)) return fail(MESSAGES.notAnObject);

  const method = body.paymentMethod ?? "crypto";
  if (method !== "crypto" && method !== "card") return fail(MESSAGES.invalidPaymentMethod);

  if (absent(body.tokenSymbol) || absent(body.amount) || body.tokenSymbol === "") {
    return fail(MESSAGES.required);
  }

  const symbol = body.tokenSymbol;
  const symbolOk = method === "card" ? symbol === CARD_CURRENCY : isCryptoToken(symbol);
  if (!symbolOk) return fail(MESSAGES.invalidToken);
  const tokenSymbol = symbol as TokenSymbol;

  const gross = parseAmountField(body.amount, TOKEN_DECIMALS[tokenSymbol]);
  if (gross === null) return fail(MESSAGES.invalidAmount);

  if (!absent(body.merchantWallet) && !isAddress(body.merchantWallet))
    return fail(MESSAGES.invalidMerchantWallet);

  if (method === "card" && gross < CARD_MINIMUM_CENTS) return fail(MESSAGES.cardMinimum);
  if (method === "card" && gross > CARD_MAXIMUM_CENTS) return fail(MESSAGES.cardMaximum);

  let walletType: WalletType | null = null;
  if (!absent(body.walletType)) {
    if (body.walletType !== "eoa" && body.walletType !== "smart_wallet")
      return fail(MESSAGES.invalidWalletType);
    walletType = body.walletType;
  }

  let expiresInMinutes = DEFAULT_EXPIRY_MINUTES;
  if (!absent(body.expiresInMinutes)) {
    const value = body.expiresInMinutes;
    if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > MAX_EXPIRY_MINUTES) {
      return fail(MESSAGES.invalidExpiry);
    }
    expiresInMinutes = value;
  }

  let description: string | null = null;
  if (!absent(body.description)) {
    const problem = descriptionProblem(body.description);
    if (problem) return fail(problem);
    description = body.description as string;
  }

  let metadata: Record<string, string> = {};
  if (!absent(body.metadata)) {
    const problem = metadataProblem(body.metadata);
    if (problem) return fail(problem);
    metadata = body.metadata as Record<string, string>;
  }

  // returnUrl and its aliases, top level first, then the same keys inside metadata.
  let returnUrl: string | null = null;
  for (const [source, name] of [
    ...RETURN_URL_ALIASES.map((n) => [body, n] as const),
    ...RETURN_URL_ALIASES.map((n) => [metadata, n] as const),
  ]) {
    const value = (source as Record<string, unknown>)[name];
    if (absent(value)) continue;
    const problem = httpUrlProblem(source === body ? name : `metadata.${name}`, value);
    if (problem) return fail(problem);
    returnUrl ??= value as string;
  }

  let cancelUrl: string | null = null;
  if (!absent(body.cancelUrl)) {
    const problem = httpUrlProblem("cancelUrl", body.cancelUrl);
    if (problem) return fail(problem);
    cancelUrl = body.cancelUrl as string;
  }

  const merchantWallet =
    (body.merchantWallet as string | undefined | null) ??
    fallback.workspaceSettlementAddress ??
    fallback.accountSettlementAddress ??
    null;
  if (merchantWallet === null && method === "crypto") return fail(MESSAGES.noSettlementAddress);
  if (merchantWallet !== null && method === "crypto") {
    const field = absent(body.merchantWallet) ? "The settlement address (merchantWallet)" : "merchantWallet";
    const problem = ownWalletProblem(field, merchantWallet, fallback.ownWallets ?? []);
    if (problem) return fail(problem);
  }

  const { fee, net } = splitFee(gross);
  return {
    ok: true,
    value: {
      paymentMethod: method,
      tokenSymbol,
      gross,
      fee,
      net,
      merchantWallet,
      walletType,
      expiresInMinutes,
      returnUrl,
      cancelUrl,
      description,
      metadata,
    },
  };
}
