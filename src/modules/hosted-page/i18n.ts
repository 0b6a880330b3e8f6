import { isOneOf } from "../../domain/one-of.ts";
import { LANGS, type Lang } from "./messages.ts";

// Language negotiation and locale formatting for the hosted page. Amounts are decimal strings and
// are formatted as such (Intl formats a decimal string exactly; never through a float).

export { LANGS, type Lang, MESSAGES, type Messages } from "./messages.ts";

const isLang = (value: string): value is Lang => isOneOf(LANGS, value);

/** `?lang=` wins when it names a language we speak; else the best of Accept-Language; else English. */
export function negotiateLang(acceptLanguage: string | undefined, query: unknown): Lang {
  if (typeof query === "string" && isLang(query.toLowerCase())) return query.toLowerCase() as Lang;
  if (!acceptLanguage) return "en";
  const ranked = acceptLanguage
    .split(",")
    .map((part, index) => {
      const [tag = "", ...params] = part.trim().split(";");
      const q = params.map((p) => p.trim()).find((p) => p.startsWith("q="));
      const weight = q === undefined ? 1 : Number(q.slice(2));
      return { tag: tag.trim().toLowerCase(), weight: Number.isFinite(weight) ? weight : 0, index };
    })
    .filter((entry) => entry.tag !== "" && entry.weight > 0)
    // Highest q first; equal q keeps the header's order.
    .sort((a, b) => b.weight - a.weight || a.index - b.index);
  for (const { tag } of ranked) {
    // Region fallback: fr-CA → fr.
    const primary = tag.split("-")[0] ?? "";
    if (isLang(primary)) return primary;
  }
  return "en";
}

const DECIMAL = /^\d+(\.\d+)?$/;

/**
 * A decimal string in the language's notation, every digit kept (18-decimal ETH included): the
 * integer part is formatted as a BigInt and the fraction's digits are appended after the locale's
 * decimal separator, so nothing passes through a float.
 */
export function formatDecimal(lang: Lang, amount: string): string {
  if (!DECIMAL.test(amount)) return amount;
  const [whole = "0", fraction] = amount.split(".");
  const { integer, separator } = formatsOf(lang);
  const formatted = integer.format(BigInt(whole));
  return fraction ? `${formatted}${separator}${fraction}` : formatted;
}

export function formatDateTime(lang: Lang, iso: string): string {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return formatsOf(lang).dateTime.format(date);
}

interface Formats {
  integer: Intl.NumberFormat;
  /** The language's decimal separator. */
  separator: string;
  dateTime: Intl.DateTimeFormat;
}

// Building an Intl formatter costs tens of µs, several times a page (every amount, every time);
// they never change, so each language's are built once (a page viewed again took 2.2× ac1ce8d's
// time, issue 43).
const FORMATS = new Map<Lang, Formats>();

function formatsOf(lang: Lang): Formats {
  let formats = FORMATS.get(lang);
  if (!formats) {
    const decimal = new Intl.NumberFormat(lang, { maximumFractionDigits: 1, minimumFractionDigits: 1 });
    formats = {
      integer: new Intl.NumberFormat(lang),
      separator: decimal.formatToParts(0.5).find((part) => part.type === "decimal")?.value ?? ".",
      dateTime: new Intl.DateTimeFormat(lang, { dateStyle: "long", timeStyle: "medium", timeZone: "UTC" }),
    };
    FORMATS.set(lang, formats);
  }
  return formats;
}
