import { TOKEN_DECIMALS } from "./money.ts";
import type { Validated, WalletType } from "./payment-request.ts";
import { isPlainObject, parseAmountField } from "./validation.ts";

// Validation of POST /api/v1/onramp/session (D17): what the customer buys, and at most one amount
// (in US dollars, or of the crypto); neither lets the customer choose in the provider's widget.

export const ONRAMP_CURRENCIES = ["USDC", "ETH"] as const;
export type OnrampCurrency = (typeof ONRAMP_CURRENCIES)[number];

export const ONRAMP_MESSAGES = {
  notAnObject: "Request body must be a JSON object",
  currency: "destinationCurrency is required: USDC or ETH",
  bothAmounts: "Give at most one of sourceAmount and destinationAmount",
  sourceAmount:
    "sourceAmount must be a positive amount of US dollars, at most 1000000.00, with at most 2 decimals",
  destinationAmount: (currency: OnrampCurrency) =>
    `destinationAmount must be a positive amount of ${currency}, at most ${currency === "USDC" ? "1000000" : "1000"}, with at most ${TOKEN_DECIMALS[currency]} decimals`,
  walletType: "Invalid walletType: use eoa or smart_wallet",
} as const;

/** A card purchase of crypto is a retail amount: far below what would overflow any token's units. */
export const MAX_SOURCE_CENTS = 100_000_000n;
/** The same retail bound in the crypto: 1,000,000 USDC, 1,000 ETH. */
export const MAX_DESTINATION: Record<OnrampCurrency, bigint> = {
  USDC: 1_000_000n * 10n ** 6n,
  ETH: 1_000n * 10n ** 18n,
};

export interface OnrampRequest {
  destinationCurrency: OnrampCurrency;
  /** Cents of US dollars the customer pays, when given. */
  sourceAmountCents: bigint | null;
  /** Smallest units of the crypto the customer buys, when given. */
  destinationAmount: bigint | null;
  walletType: WalletType | null;
}

const given = (value: unknown) => value !== undefined && value !== null;

export function validateOnrampRequest(body: unknown): Validated<OnrampRequest> {
  const fail = (message: string) => ({ ok: false as const, message });
  if (!isPlainObject(body)) return fail(ONRAMP_MESSAGES.notAnObject);
  const currency = body.destinationCurrency;
  if (currency !== "USDC" && currency !== "ETH") return fail(ONRAMP_MESSAGES.currency);
  if (given(body.sourceAmount) && given(body.destinationAmount)) return fail(ONRAMP_MESSAGES.bothAmounts);
  let sourceAmountCents: bigint | null = null;
  if (given(body.sourceAmount)) {
    sourceAmountCents = parseAmountField(body.sourceAmount, 2);
    if (sourceAmountCents === null || sourceAmountCents <= 0n || sourceAmountCents > MAX_SOURCE_CENTS)
      return fail(ONRAMP_MESSAGES.sourceAmount);
  }
  let destinationAmount: bigint | null = null;
  if (given(body.destinationAmount)) {
    destinationAmount = parseAmountField(body.destinationAmount, TOKEN_DECIMALS[currency]);
    if (
      destinationAmount === null ||
      destinationAmount <= 0n ||
      destinationAmount > MAX_DESTINATION[currency]
    )
      return fail(ONRAMP_MESSAGES.destinationAmount(currency));
  }
  let walletType: WalletType | null = null;
  if (given(body.walletType)) {
    if (body.walletType !== "eoa" && body.walletType !== "smart_wallet")
      return fail(ONRAMP_MESSAGES.walletType);
    walletType = body.walletType;
  }
  return {
    ok: true,
    value: { destinationCurrency: currency, sourceAmountCents, destinationAmount, walletType },
  };
}
