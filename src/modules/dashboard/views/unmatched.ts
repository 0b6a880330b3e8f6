import type { Environment } from "../../../config.ts";
import { amount, empty, hex, time } from "./format.ts";
import { type HtmlSafeString, html, nothing } from "./html.ts";
import { base } from "./layout.ts";

// The unmatched inbox (D13): transfers to a workspace wallet that matched no pending payment.
// Attaching one to its payment and returning it to its sender come with refunds (D19).

export interface UnmatchedRow {
  amount: string;
  token: string;
  from: string;
  to: string;
  txHash: string;
  blockNumber: number;
  reason: string;
  createdAt: string;
}

export function unmatchedBody(options: {
  environment: Environment;
  transfers: UnmatchedRow[];
  total: number;
  offset: number;
  limit: number;
  explorer: string | null;
}): HtmlSafeString {
  const root = base(options.environment);
  if (options.transfers.length === 0)
    return empty(
      "No unmatched transfers.",
      html`<p>A transfer to one of your wallets that matches no pending payment (a wrong amount, a late payment) is listed here, never lost.</p>`,
    );
  const next = options.offset + options.limit < options.total ? options.offset + options.limit : null;
  return html`<p class="muted">${options.total} transfer${options.total === 1 ? "" : "s"} matched no payment.</p>
<div class="table-wrap"><table class="list" id="unmatched-table"><thead><tr><th scope="col">Seen</th><th scope="col" class="num">Amount</th><th scope="col">From</th><th scope="col">To</th><th scope="col">Transaction</th><th scope="col">Why</th></tr></thead>
<tbody>${options.transfers.map(
    (
      t,
    ) => html`<tr><td>${time(t.createdAt)}</td><td class="num">${amount(t.amount, t.token)}</td><td>${hex(t.from, { copy: true })}</td><td>${hex(t.to)}</td>
<td>${hex(t.txHash, { copy: true, ...(options.explorer ? { href: `${options.explorer}/tx/${t.txHash}` } : {}) })} <span class="muted">block ${t.blockNumber}</span></td><td>${t.reason}</td></tr>`,
  )}</tbody></table></div>
<nav class="pager" aria-label="Pages">${options.offset > 0 ? html`<a href="${root}/unmatched?offset=${Math.max(0, options.offset - options.limit)}">← Newer</a> ` : nothing}${next !== null ? html`<a href="${root}/unmatched?offset=${next}">Older →</a>` : nothing}</nav>`;
}
