import { InvalidRequest } from "./errors.ts";
import {
  formatAmount,
  isWalletCurrency,
  parseAmount,
  TOKEN_DECIMALS,
  WALLET_CURRENCIES,
  type WalletCurrency,
} from "./money.ts";
import { isAddress, isPlainObject, isZeroAddress, MAX_AMOUNT_UNITS, MAX_URL } from "./validation.ts";

// An agent wallet's spending policy (D23, issue 40): what an x402 payment from it may be, and when
// a person must approve it first. Every field is optional: absent (or null) means no limit. Amounts
// are per currency, as decimal strings in the API (`{"USDC": "5.00"}`) and bigints of the currency's
// smallest unit here; a currency a map does not name has no limit there.
//
// Caps count what the wallet's authorizations reserved or spent (agent-payment-state.ts
// RESERVING_STATUSES) on the UTC day, and in the UTC month, in which each was requested.

/** The rules a payment may be refused by, in the order they are checked. */
export const POLICY_RULES = ["maxPerPayment", "allowedPayees", "allowedOrigins", "daily", "monthly"] as const;
export type PolicyRule = (typeof POLICY_RULES)[number];

export type CurrencyAmounts = Partial<Record<WalletCurrency, bigint>>;

export interface SpendingPolicy {
  maxPerPayment: CurrencyAmounts | null;
  daily: CurrencyAmounts | null;
  monthly: CurrencyAmounts | null;
  /** Addresses a payment may go to (lowercase); an empty list allows none. */
  allowedPayees: string[] | null;
  /** Origins (`https://api.example.com`) of the resources a payment may pay for. */
  allowedOrigins: string[] | null;
  /** Above this amount a payment waits for a person's approval. */
  approvalAbove: CurrencyAmounts | null;
}

export const NO_POLICY: SpendingPolicy = {
  maxPerPayment: null,
  daily: null,
  monthly: null,
  allowedPayees: null,
  allowedOrigins: null,
  approvalAbove: null,
};

const AMOUNT_FIELDS = ["maxPerPayment", "daily", "monthly", "approvalAbove"] as const;
const LIST_FIELDS = ["allowedPayees", "allowedOrigins"] as const;
const FIELDS: readonly string[] = [...AMOUNT_FIELDS, ...LIST_FIELDS];
/** Entries of an allow-list: more than any real policy names, few enough to check in a loop. */
export const MAX_LIST_ENTRIES = 100;
/** How much of an unknown field's name a 400 repeats. */
const MAX_FIELD_NAME_ECHO = 100;
/** Longer text is no amount of any token (uint256 has 78 digits), and is not read further. */
const MAX_AMOUNT_TEXT = 100;

const currencyList = WALLET_CURRENCIES.join(", ");

/** A PUT body as a policy; 400 naming the field for anything else. */
export function parsePolicy(body: unknown): SpendingPolicy {
  if (!isPlainObject(body)) throw new InvalidRequest("Request body must be a JSON object");
  const unknown = Object.keys(body).find((key) => !FIELDS.includes(key));
  // Named whole up to a length no real field name reaches, so a caller can tell which one it was.
  if (unknown !== undefined)
    throw new InvalidRequest(`Unknown field in policy: ${unknown.slice(0, MAX_FIELD_NAME_ECHO)}`);
  return {
    maxPerPayment: amounts("maxPerPayment", body.maxPerPayment),
    daily: amounts("daily", body.daily),
    monthly: amounts("monthly", body.monthly),
    allowedPayees: list("allowedPayees", body.allowedPayees, payee),
    allowedOrigins: list("allowedOrigins", body.allowedOrigins, origin),
    approvalAbove: amounts("approvalAbove", body.approvalAbove),
  };
}

function amounts(field: string, value: unknown): CurrencyAmounts | null {
  if (value === undefined || value === null) return null;
  const shape = `${field} must be an object of currency → decimal string, e.g. {"USDC": "5.00"}`;
  if (!isPlainObject(value)) throw new InvalidRequest(shape);
  const out: CurrencyAmounts = {};
  for (const [currency, text] of Object.entries(value)) {
    if (!isWalletCurrency(currency))
      throw new InvalidRequest(
        `${field} names an unknown currency ${currency.slice(0, 40)}: use ${currencyList}`,
      );
    const units =
      typeof text === "string" && text.length <= MAX_AMOUNT_TEXT
        ? parseAmount(text, TOKEN_DECIMALS[currency])
        : null;
    if (units === null || units > MAX_AMOUNT_UNITS)
      throw new InvalidRequest(
        `${field}.${currency} must be a decimal string of at most ${TOKEN_DECIMALS[currency]} decimals, e.g. "5.00"`,
      );
    out[currency] = units;
  }
  return out;
}

function list(
  field: string,
  value: unknown,
  entry: (field: string, item: unknown) => string,
): string[] | null {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value) || value.length > MAX_LIST_ENTRIES)
    throw new InvalidRequest(`${field} must be a list of at most ${MAX_LIST_ENTRIES} entries`);
  return [...new Set(value.map((item) => entry(field, item)))];
}

function payee(field: string, item: unknown): string {
  if (!isAddress(item) || isZeroAddress(item))
    throw new InvalidRequest(`${field} must list addresses (0x and 40 hex digits, not the zero address)`);
  return item.toLowerCase();
}

function origin(field: string, item: unknown): string {
  const message = `${field} must list origins such as "https://api.example.com" (scheme, host and port only)`;
  const url = typeof item === "string" && item.length <= MAX_URL ? httpUrl(item) : null;
  // An origin has no path, query, fragment or credentials: `https://a.example/x` is refused, not cut.
  if (url === null || url.pathname !== "/" || url.search || url.hash || url.username || url.password)
    throw new InvalidRequest(message);
  return url.origin;
}

function httpUrl(text: string): URL | null {
  try {
    const url = new URL(text);
    return url.protocol === "http:" || url.protocol === "https:" ? url : null;
  } catch {
    return null;
  }
}

/** The origin of an http(s) URL (`https://api.example.com`: lowercase host, default port left out), else null. */
export function originOf(text: string): string | null {
  return httpUrl(text)?.origin ?? null;
}

/** The policy as the API shows it: decimal strings, lists as stored, absent fields left out. */
export function policyView(policy: SpendingPolicy): Record<string, unknown> {
  const view: Record<string, unknown> = {};
  for (const field of POLICY_FIELD_ORDER) {
    const value = policy[field];
    if (value === null) continue;
    view[field] = Array.isArray(value) ? value : decimals(value);
  }
  return view;
}

const POLICY_FIELD_ORDER = [
  "maxPerPayment",
  "daily",
  "monthly",
  "allowedPayees",
  "allowedOrigins",
  "approvalAbove",
] as const satisfies readonly (keyof SpendingPolicy)[];

function decimals(amounts: CurrencyAmounts): Record<string, string> {
  const out: Record<string, string> = {};
  for (const currency of WALLET_CURRENCIES) {
    const units = amounts[currency];
    if (units !== undefined) out[currency] = formatAmount(units, TOKEN_DECIMALS[currency]);
  }
  return out;
}

/** Amounts as stored (smallest units as strings: JSON has no bigint). */
export function storedAmounts(amounts: CurrencyAmounts | null): Record<string, string> | null {
  if (amounts === null) return null;
  return Object.fromEntries(Object.entries(amounts).map(([currency, units]) => [currency, units.toString()]));
}

/** Stored amounts back as bigints; what is not a known currency's integer is left out. */
export function amountsFromStored(stored: Record<string, string> | null): CurrencyAmounts | null {
  if (stored === null) return null;
  const out: CurrencyAmounts = {};
  for (const [currency, units] of Object.entries(stored)) {
    if (isWalletCurrency(currency) && /^[0-9]+$/.test(units)) out[currency] = BigInt(units);
  }
  return out;
}

/** A payment as the policy judges it. */
export interface AskedPayment {
  currency: WalletCurrency;
  amount: bigint;
  /** The requirement's payTo. */
  payTo: string;
  /** The origin of the resource paid for (originOf). */
  origin: string;
}

/** What the wallet's authorizations of the payment's currency reserved or spent so far. */
export interface ReservedSoFar {
  /** Since the start of the UTC day. */
  today: bigint;
  /** Since the start of the UTC month. */
  thisMonth: bigint;
}

export type PolicyDecision =
  | { outcome: "refused"; rule: PolicyRule; message: string }
  | { outcome: "approval_required" }
  | { outcome: "authorized" };

/**
 * The policy's answer to a payment: the first rule that refuses it (in POLICY_RULES order: the
 * amount, the allow-lists, then the caps, which hold for payments that wait for approval too),
 * else whether it waits for a person (amount strictly above approvalAbove) or may be signed now.
 */
export function decide(policy: SpendingPolicy, asked: AskedPayment, reserved: ReservedSoFar): PolicyDecision {
  const { currency, amount } = asked;
  const shown = (units: bigint) => `${formatAmount(units, TOKEN_DECIMALS[currency])} ${currency}`;
  const refused = (rule: PolicyRule, message: string): PolicyDecision => ({
    outcome: "refused",
    rule,
    message,
  });
  const max = policy.maxPerPayment?.[currency];
  if (max !== undefined && amount > max)
    return refused("maxPerPayment", `Payment of ${shown(amount)} is above maxPerPayment (${shown(max)})`);
  if (policy.allowedPayees !== null && !policy.allowedPayees.includes(asked.payTo.toLowerCase()))
    return refused("allowedPayees", `Payee ${asked.payTo} is not in allowedPayees`);
  if (policy.allowedOrigins !== null && !policy.allowedOrigins.includes(asked.origin))
    return refused("allowedOrigins", `Origin ${asked.origin} is not in allowedOrigins`);
  const daily = policy.daily?.[currency];
  if (daily !== undefined && reserved.today + amount > daily)
    return refused(
      "daily",
      `Payment of ${shown(amount)} would exceed the daily cap (${shown(daily)}; ${shown(reserved.today)} reserved today, UTC)`,
    );
  const monthly = policy.monthly?.[currency];
  if (monthly !== undefined && reserved.thisMonth + amount > monthly)
    return refused(
      "monthly",
      `Payment of ${shown(amount)} would exceed the monthly cap (${shown(monthly)}; ${shown(reserved.thisMonth)} reserved this month, UTC)`,
    );
  const threshold = policy.approvalAbove?.[currency];
  if (threshold !== undefined && amount > threshold) return { outcome: "approval_required" };
  return { outcome: "authorized" };
}

/** The starts of the UTC day and the UTC month of `now`: the caps' windows. */
export function capWindows(now: Date): { dayStart: Date; monthStart: Date } {
  const year = now.getUTCFullYear();
  const month = now.getUTCMonth();
  return {
    dayStart: new Date(Date.UTC(year, month, now.getUTCDate())),
    monthStart: new Date(Date.UTC(year, month, 1)),
  };
}
