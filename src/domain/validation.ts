import { parsePositiveAmount } from "./money.ts";

// Field rules shared by every endpoint that takes user text (decisions D10): metadata like
// Stripe's, bounded descriptions and URLs, 0x addresses, amounts.

export const ADDRESS_PATTERN = /^0x[0-9a-fA-F]{40}$/;
const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const MAX_DESCRIPTION = 1000;
export const MAX_URL = 2048;
export const MAX_METADATA_KEYS = 50;
export const MAX_METADATA_KEY = 40;
export const MAX_METADATA_VALUE = 500;

export function isAddress(value: unknown): value is string {
  return typeof value === "string" && ADDRESS_PATTERN.test(value);
}

/**
 * 0x and 40 zeros: well formed, but nobody holds its key, so money sent there is burnt (and an
 * ERC-20 mint's sender). Refused wherever the service is told where to send money.
 */
export function isZeroAddress(value: string): boolean {
  return /^0x0{40}$/.test(value);
}

/** The refusal of the zero address as `field`. */
export const zeroAddressMessage = (field: string) => `${field} must not be the zero address`;

/** Ids in paths and bodies are checked before they reach a uuid column (else the database errors). */
export function isUuid(value: unknown): value is string {
  return typeof value === "string" && UUID_PATTERN.test(value);
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Returns an error message naming the field, or null when the metadata is acceptable. */
export function metadataProblem(value: unknown): string | null {
  if (!isPlainObject(value)) return "metadata must be an object";
  const entries = Object.entries(value);
  if (entries.length > MAX_METADATA_KEYS) return `metadata can have at most ${MAX_METADATA_KEYS} keys`;
  for (const [key, item] of entries) {
    if (key.length === 0 || key.length > MAX_METADATA_KEY) {
      return `metadata keys must be 1 to ${MAX_METADATA_KEY} characters (key "${key.slice(0, MAX_METADATA_KEY)}…")`;
    }
    if (typeof item !== "string" || item.length > MAX_METADATA_VALUE) {
      return `metadata.${key} must be a string of at most ${MAX_METADATA_VALUE} characters`;
    }
  }
  return null;
}

export function descriptionProblem(value: unknown): string | null {
  if (typeof value !== "string" || value.length > MAX_DESCRIPTION) {
    return `description must be a string of at most ${MAX_DESCRIPTION} characters`;
  }
  return null;
}

/** http(s) only: a `javascript:` or `data:` return URL would run in the payer's browser. */
export function httpUrlProblem(field: string, value: unknown): string | null {
  const message = `${field} must be an http(s) URL of at most ${MAX_URL} characters`;
  if (typeof value !== "string" || value.length > MAX_URL) return message;
  try {
    const url = new URL(value);
    return url.protocol === "http:" || url.protocol === "https:" ? null : message;
  } catch {
    return message;
  }
}

/**
 * The largest amount, in a token's smallest unit: what an ERC-20 transfer carries (uint256). The
 * numeric(78, 0) amount columns hold every such value; a larger one would fail there (a 500).
 */
export const MAX_AMOUNT_UNITS = 2n ** 256n - 1n;
/** Digits of MAX_AMOUNT_UNITS, plus one for the decimal point. */
const MAX_AMOUNT_TEXT = MAX_AMOUNT_UNITS.toString().length + 1;

/**
 * The one rule for an amount field (D4): a positive decimal string of at most the token's
 * decimals, whose smallest units fit MAX_AMOUNT_UNITS; null otherwise. Over-long strings are
 * refused before BigInt reads them (200 000 digits cost a second of CPU).
 */
export function parseAmountField(input: unknown, decimals: number): bigint | null {
  if (typeof input !== "string") return null;
  const significant = input.length > MAX_AMOUNT_TEXT ? input.replace(/^0+(?=[0-9])/, "") : input;
  if (significant.length > MAX_AMOUNT_TEXT + decimals) return null;
  const units = parsePositiveAmount(significant, decimals);
  return units !== null && units <= MAX_AMOUNT_UNITS ? units : null;
}

const INSTANT =
  /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?(Z|[+-]\d{2}:\d{2})?)?$/;

const within = (n: number, low: number, high: number) => n >= low && n <= high;

/**
 * A date (midnight UTC) or date-time (UTC unless it names an offset), checked field by field:
 * Date.parse would roll 2025-02-30 over into March, and read a zone-less time as local time.
 */
export function parseInstant(value: string): Date | null {
  const m = INSTANT.exec(value);
  if (!m) return null;
  const field = (i: number) => Number(m[i] ?? 0);
  const [year, month, day, hour, minute, second] = [
    field(1),
    field(2),
    field(3),
    field(4),
    field(5),
    field(6),
  ];
  const millis = Number((m[7] ?? "").padEnd(3, "0").slice(0, 3));
  if (!within(year, 1000, 9999) || !within(month, 1, 12) || !within(hour, 0, 23)) return null;
  if (!within(minute, 0, 59) || !within(second, 0, 59)) return null;
  // Day 31 of a 30-day month would come back as the 1st of the next.
  if (!within(day, 1, 31) || new Date(Date.UTC(year, month - 1, day)).getUTCDate() !== day) return null;
  const zone = m[8] ?? "Z";
  let offsetMinutes = 0;
  if (zone !== "Z") {
    const [hours, minutes] = [Number(zone.slice(1, 3)), Number(zone.slice(4, 6))];
    if (!within(hours, 0, 23) || !within(minutes, 0, 59)) return null;
    offsetMinutes = (zone.startsWith("-") ? -1 : 1) * (hours * 60 + minutes);
  }
  return new Date(Date.UTC(year, month - 1, day, hour, minute, second, millis) - offsetMinutes * 60_000);
}
