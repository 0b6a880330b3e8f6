import escapeHtml from "escape-html";
import { LANGS, type Lang, MESSAGES } from "./i18n.ts";
import type { Merchant } from "./public-payment.ts";

// The document around every hosted page (payment, receipt, not found): the merchant's header, the
// language switch, and the brand colour as a CSS custom property in a nonce'd <style> element.

const HEX = /^#[0-9a-f]{6}$/i;

/** WCAG relative luminance of a `#rrggbb` colour. */
export function relativeLuminance(hex: string): number {
  const channel = (offset: number): number => {
    const c = Number.parseInt(hex.slice(offset, offset + 2), 16) / 255;
    return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5);
}

export function contrastRatio(a: string, b: string): number {
  const [hi, lo] = [relativeLuminance(a), relativeLuminance(b)].sort((x, y) => y - x);
  return ((hi ?? 0) + 0.05) / ((lo ?? 0) + 0.05);
}

/** Black or white text on the brand colour, whichever contrasts more (≥ 4.5:1 for any colour but a few mid-greys, where it is the best there is). */
export function textOn(brand: string): "#000000" | "#ffffff" {
  return contrastRatio(brand, "#000000") >= contrastRatio(brand, "#ffffff") ? "#000000" : "#ffffff";
}

/** `/pay/<id>?…` with `name` set and the other query parameters kept. */
export function hrefWith(path: string, query: URLSearchParams, name: string, value: string): string {
  const next = new URLSearchParams(query);
  next.set(name, value);
  return `${path}?${next.toString()}`;
}

/** The language switch's link: the network (and any other parameter) kept. */
export const langHref = (path: string, query: URLSearchParams, lang: Lang): string =>
  hrefWith(path, query, "lang", lang);

export interface Shell {
  lang: Lang;
  title: string;
  nonce: string;
  merchant: Merchant;
  /** The page's path and query, for the language links. */
  path: string;
  query: URLSearchParams;
  main: string;
  /** Data for the script (its messages), as JSON: data, never executable. */
  scriptData?: unknown;
}

export function renderShell(s: Shell): string {
  const e = escapeHtml;
  const t = MESSAGES[s.lang];
  const brand = s.merchant.brandColor && HEX.test(s.merchant.brandColor) ? s.merchant.brandColor : null;
  const style = brand
    ? `<style nonce="${e(s.nonce)}">:root{--brand:${brand};--on-brand:${textOn(brand)}}</style>`
    : "";
  const logo = s.merchant.logoUrl
    ? `<img class="logo" src="${e(s.merchant.logoUrl)}" alt="${e(s.merchant.name)}" width="48" height="48">`
    : "";
  const links = LANGS.map((lang) => {
    const current = lang === s.lang ? ` aria-current="true"` : "";
    return `<li><a id="lang-${lang}" href="${e(langHref(s.path, s.query, lang))}" hreflang="${lang}" lang="${lang}"${current}>${e(MESSAGES[lang].languageName)}</a></li>`;
  }).join("");
  // JSON inside <script type="application/json">: "<" escaped so no "</script>" can close it.
  const data =
    s.scriptData === undefined
      ? ""
      : `<script type="application/json" id="page-messages">${JSON.stringify(s.scriptData).replace(/</g, "\\u003c")}</script>\n`;
  return `<!doctype html>
<html lang="${s.lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<link rel="icon" href="data:,">
<title>${e(s.title)}</title>
<link rel="stylesheet" href="/pay/assets/page.css">
${style}
</head>
<body>
<header class="merchant" id="merchant">${logo}<p class="merchant-name">${e(t.pay(s.merchant.name))}</p>
<p id="announce" class="visually-hidden" role="status" aria-live="polite"></p></header>
<nav class="languages" id="languages" aria-label="${e(t.languageNav)}"><ul>${links}</ul></nav>
${s.main}
${data}<script nonce="${e(s.nonce)}" src="/pay/assets/page.js" defer></script>
</body>
</html>`;
}
