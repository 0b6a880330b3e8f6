import { isOneOf } from "./one-of.ts";

// Money is always an integer count of a token's smallest unit (bigint). Strings cross the API;
// floats never appear. Rules: decisions D4.

// The token catalogue: every token the service knows and where each may be used. Route schemas,
// validation and balance reads take their lists from here instead of spelling tokens out.

/** Every token's smallest unit, as a power of ten. */
export const TOKEN_DECIMALS = {
  USDC: 6,
  ETH: 18,
  ADAO: 18,
  DAI: 18,
  USD: 2,
} as const;

export type TokenSymbol = keyof typeof TOKEN_DECIMALS;

/** Tokens a crypto payment or payout may use. */
export const CRYPTO_TOKENS = ["USDC", "ETH", "ADAO"] as const satisfies readonly TokenSymbol[];
export type CryptoToken = (typeof CRYPTO_TOKENS)[number];

/** The card method's one currency. */
export const CARD_CURRENCY = "USD" satisfies TokenSymbol;

/** Tokens that move on a chain: its native coin and the ERC-20s a network configures. */
export const CHAIN_TOKENS = ["USDC", "ETH", "ADAO", "DAI"] as const satisfies readonly TokenSymbol[];
export type ChainToken = (typeof CHAIN_TOKENS)[number];

/** The chain's native coin: sent as value, and what pays for gas. */
export const NATIVE_TOKEN = "ETH" satisfies ChainToken;

/** Currencies an agent or user wallet may hold (part 4.17), in the order the API names them. */
export const WALLET_CURRENCIES = ["ETH", "USDC", "DAI"] as const satisfies readonly ChainToken[];
export type WalletCurrency = (typeof WALLET_CURRENCIES)[number];

/** Whose an agent or user wallet is (part 4.17): an agent's, or the caller's own. */
export const WALLET_TYPES = ["agent", "user"] as const;
export type WalletType = (typeof WALLET_TYPES)[number];

/** Free tier: 1.5% = 150 basis points, the same for every token and for USD. */
export const FEE_BPS = 150n;
const BPS_DENOMINATOR = 10_000n;

const AMOUNT_PATTERN = /^([0-9]+)(?:\.([0-9]+))?$/;

export function isCryptoToken(value: unknown): value is CryptoToken {
  return isOneOf(CRYPTO_TOKENS, value);
}

export function isWalletCurrency(value: unknown): value is WalletCurrency {
  return isOneOf(WALLET_CURRENCIES, value);
}

export function isWalletType(value: unknown): value is WalletType {
  return isOneOf(WALLET_TYPES, value);
}

/**
 * Parses a decimal string into smallest units. Returns null for anything that is not a plain
 * decimal (sign, exponent, hex, spaces, empty) or that has more decimals than the token has.
 */
export function parseAmount(input: unknown, decimals: number): bigint | null {
  if (typeof input !== "string") return null;
  const match = AMOUNT_PATTERN.exec(input);
  if (!match) return null;
  const whole = match[1] ?? "0";
  const fraction = match[2] ?? "";
  if (fraction.length > decimals) return null;
  return BigInt(whole) * 10n ** BigInt(decimals) + BigInt(fraction.padEnd(decimals, "0") || "0");
}

/** Parses an amount that must be above zero; null when malformed or not positive. */
export function parsePositiveAmount(input: unknown, decimals: number): bigint | null {
  const units = parseAmount(input, decimals);
  return units !== null && units > 0n ? units : null;
}

/** Formats smallest units: at least 2 decimals, more only when needed, never an exponent. */
export function formatAmount(units: bigint, decimals: number): string {
  const negative = units < 0n;
  const abs = negative ? -units : units;
  const scale = 10n ** BigInt(decimals);
  const whole = abs / scale;
  let fraction = decimals > 0 ? (abs % scale).toString().padStart(decimals, "0") : "";
  fraction = fraction.replace(/0+$/, "");
  if (fraction.length < 2) fraction = fraction.padEnd(2, "0");
  return `${negative ? "-" : ""}${whole}.${fraction}`;
}

/** fee = gross × 150 / 10000, rounded half up, in smallest units. */
export function computeFee(gross: bigint, feeBps: bigint = FEE_BPS): bigint {
  if (gross < 0n) throw new RangeError("gross amount must not be negative");
  return (gross * feeBps + BPS_DENOMINATOR / 2n) / BPS_DENOMINATOR;
}

export interface FeeSplit {
  gross: bigint;
  fee: bigint;
  net: bigint;
}

/** Splits a gross amount into fee and net; net + fee equals gross exactly. */
export function splitFee(gross: bigint, feeBps: bigint = FEE_BPS): FeeSplit {
  const fee = computeFee(gross, feeBps);
  return { gross, fee, net: gross - fee };
}
