import { type HtmlSafeString, html, nothing } from "./html.ts";

// How the dashboard shows times, amounts, statuses and addresses. Times are written in UTC and
// the page's script rewrites each <time> into the viewer's time zone (without the script, UTC).

export function time(iso: string | null | undefined): HtmlSafeString {
  if (!iso) return html`<span class="muted">—</span>`;
  const shown = `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC`;
  return html`<time datetime="${iso}">${shown}</time>`;
}

/** D4 amounts are already decimal strings in the token's format: shown as they are. */
export function amount(value: string, tokenSymbol: string): HtmlSafeString {
  return html`<span class="amount">${value}&nbsp;${tokenSymbol}</span>`;
}

export function status(value: string): HtmlSafeString {
  return html`<span class="status status-${value}">${value}</span>`;
}

/** A long hex value, shortened on screen, whole in the copy button and the title. */
export function hex(
  value: string | null | undefined,
  options: { copy?: boolean; href?: string } = {},
): HtmlSafeString {
  if (!value) return html`<span class="muted">—</span>`;
  const short = value.length > 18 ? `${value.slice(0, 10)}…${value.slice(-6)}` : value;
  const text = options.href
    ? html`<a class="mono" href="${options.href}" rel="noopener noreferrer" title="${value}">${short}</a>`
    : html`<span class="mono" title="${value}">${short}</span>`;
  return options.copy ? html`${text} ${copyButton(value)}` : text;
}

export function copyButton(value: string, label = "Copy"): HtmlSafeString {
  return html`<button type="button" class="copy" data-copy="${value}">${label}</button>`;
}

/** A definition list of label → value rows. */
export function facts(rows: Array<[string, HtmlSafeString | string | null]>): HtmlSafeString {
  return html`<dl class="facts">${rows.map(
    ([label, value]) =>
      html`<div><dt>${label}</dt><dd>${value === null ? html`<span class="muted">—</span>` : value}</dd></div>`,
  )}</dl>`;
}

/** An empty state: what is missing and what to do about it. */
export function empty(message: string, hint: HtmlSafeString = nothing): HtmlSafeString {
  return html`<div class="empty"><p>${message}</p>${hint}</div>`;
}
