import type { Environment } from "../../../config.ts";
import { PAYMENT_STATUSES } from "../../../domain/payment-state.ts";
import { PAYMENT_METHODS, PAYMENT_TOKENS } from "../../payments/browse.ts";
import type { SettlementAnswer } from "../../payments/settlement/settlements-service.ts";
import type { PaymentView } from "../../payments/view.ts";
import type { SubjectEvent } from "../../webhooks/service.ts";
import { amount, copyButton, empty, facts, hex, status, time } from "./format.ts";
import { type HtmlSafeString, html, nothing } from "./html.ts";
import { base } from "./layout.ts";
import { type RefundsSection, refundsCard } from "./refunds.ts";
import { paymentSettlementCard } from "./splits.ts";

// The payments list (filters, search, keyset pages, CSV of the same filter) and a payment's
// detail (its facts, on-chain transactions, refunds, status history with each event's deliveries,
// cancel).

/** The list form's fields, as typed (dates as YYYY-MM-DD, `to` inclusive). */
export type FilterValues = Partial<
  Record<"status" | "tokenSymbol" | "paymentMethod" | "network" | "from" | "to" | "search", string>
>;

export function paymentRows(environment: Environment, payments: PaymentView[]): HtmlSafeString {
  const root = base(environment);
  // The amount links to the payment; the method and the id give way on a narrow screen.
  return html`<div class="table-wrap"><table class="list" id="payments-table">
<thead><tr><th scope="col" class="num">Amount</th><th scope="col">Status</th><th scope="col">Description</th><th scope="col">Created</th><th scope="col" class="wide-only">Method</th><th scope="col" class="wide-only">Network</th><th scope="col" class="wide-only">Id</th></tr></thead>
<tbody>${payments.map(
    (p) => html`<tr data-payment-id="${p.id}">
<td class="num"><a href="${root}/payments/${p.id}" aria-label="Payment of ${p.grossAmount} ${p.tokenSymbol}, ${p.status}">${amount(p.grossAmount, p.tokenSymbol)}</a></td><td>${status(p.status)}</td>
<td class="description">${p.description ?? ""}</td><td class="nowrap">${time(p.createdAt)}</td>
<td class="wide-only">${p.paymentMethod}</td><td class="wide-only">${p.network ?? "—"}</td><td class="wide-only mono">${p.id.slice(0, 8)}</td></tr>`,
  )}</tbody></table></div>`;
}

function select(
  name: string,
  label: string,
  options: readonly string[],
  value: string | undefined,
): HtmlSafeString {
  return html`<div class="field"><label for="f-${name}">${label}</label><select id="f-${name}" name="${name}"><option value="">Any</option>${options.map(
    (o) => html`<option value="${o}" ${o === value ? html`selected` : nothing}>${o}</option>`,
  )}</select></div>`;
}

export function paymentsListBody(options: {
  environment: Environment;
  payments: PaymentView[];
  /** The environment's network ids (D22), for the network filter. */
  networks: readonly string[];
  filter: FilterValues;
  /** The query string of the filter (for the next page and the CSV link). */
  query: string;
  next: string | null;
  error?: { field: string; message: string } | undefined;
}): HtmlSafeString {
  const root = base(options.environment);
  const f = options.filter;
  const err = options.error;
  const fieldError = (field: string) =>
    err && err.field === field ? html`<p class="field-error" id="err-${field}">${err.message}</p>` : nothing;
  const joiner = options.query ? "&" : "";
  return html`<form method="get" action="${root}/payments" class="filters" role="search" aria-label="Filter payments">
${select("status", "Status", PAYMENT_STATUSES, f.status)}
${select("tokenSymbol", "Token", PAYMENT_TOKENS, f.tokenSymbol)}
${select("paymentMethod", "Method", PAYMENT_METHODS, f.paymentMethod)}
${select("network", "Network", options.networks, f.network)}
<div class="field"><label for="f-from">From (UTC)</label><input id="f-from" name="from" type="date" value="${f.from ?? ""}" ${err?.field === "from" ? html`aria-invalid="true" aria-describedby="err-from"` : nothing}>${fieldError("from")}</div>
<div class="field"><label for="f-to">To (UTC, inclusive)</label><input id="f-to" name="to" type="date" value="${f.to ?? ""}" ${err?.field === "to" ? html`aria-invalid="true" aria-describedby="err-to"` : nothing}>${fieldError("to")}</div>
<div class="field grow"><label for="f-search">Search</label><input id="f-search" name="search" type="search" placeholder="Payment id or description" value="${f.search ?? ""}" ${err?.field === "search" ? html`aria-invalid="true" aria-describedby="err-search"` : nothing}>${fieldError("search")}</div>
<div class="actions"><button type="submit" class="primary">Apply</button> <a href="${root}/payments">Clear</a></div>
</form>
${err && !["from", "to", "search"].includes(err.field) ? html`<p class="error" role="alert">${err.message}</p>` : nothing}
<p class="toolbar"><a class="button" id="export-csv" href="${root}/payments/export.csv${options.query ? `?${options.query}` : ""}" download>Export CSV</a></p>
${
  options.payments.length === 0
    ? empty(options.query ? "No payments match these filters." : "No payments in this environment yet.")
    : paymentRows(options.environment, options.payments)
}
<nav class="pager" aria-label="Pages">${
    options.next
      ? html`<a id="next-page" href="${root}/payments?${options.query}${joiner}after=${encodeURIComponent(options.next)}">Older payments →</a>`
      : nothing
  }</nav>`;
}

function txLink(hash: string | null, explorer: string | null): HtmlSafeString {
  return hex(hash, { copy: true, ...(hash && explorer ? { href: `${explorer}/tx/${hash}` } : {}) });
}

export function paymentDetailBody(options: {
  environment: Environment;
  payment: PaymentView;
  history: SubjectEvent[];
  explorer: string | null;
  csrfToken: string;
  /** Its settlement (D15) once recorded: the legs, with a link to the splits page. */
  settlement?: SettlementAnswer | null | undefined;
  /** Its refunds and the refund form (D19), for a payment that may have some. */
  refunds?: Omit<RefundsSection, "environment" | "payment" | "explorer" | "csrfToken"> | undefined;
}): HtmlSafeString {
  const p = options.payment;
  const root = base(options.environment);
  // What an attached unmatched transfer paid, when it is not the gross (D19).
  const received: Array<[string, HtmlSafeString]> = p.amountReceived
    ? [["Amount received", amount(p.amountReceived, p.tokenSymbol)]]
    : [];
  const cancel =
    p.status === "pending"
      ? html`<form method="post" action="${root}/payments/${p.id}/cancel" class="inline" data-confirm="Cancel this payment? The payer will no longer be able to pay it.">
<input type="hidden" name="_csrf" value="${options.csrfToken}">
<button type="submit" class="danger" id="cancel-payment">Cancel payment</button></form>`
      : nothing;
  return html`<p><a href="${root}/payments">← Payments</a></p>
<section class="card" aria-labelledby="summary-title"><h2 id="summary-title">${amount(p.grossAmount, p.tokenSymbol)} ${status(p.status)}</h2>
${facts([
  ["Id", html`<span class="mono">${p.id}</span> ${copyButton(p.id)}`],
  ["Description", p.description],
  ["Method", `${p.paymentMethod} (${p.paymentProvider})`],
  ["Network", p.network ?? "—"],
  ["Fee", amount(p.feeAmount, p.tokenSymbol)],
  ["Net", amount(p.netAmount, p.tokenSymbol)],
  ...received,
  ["Refunded", amount(p.refundedAmount, p.tokenSymbol)],
  ["Wallet", p.walletType],
  ["Receiving address", p.receivingAddress ? hex(p.receivingAddress, { copy: true }) : null],
  ["Merchant wallet", p.merchantWallet ? hex(p.merchantWallet, { copy: true }) : null],
  ["Created", time(p.createdAt)],
  ["Expires", time(p.expiresAt)],
  ["Failure", p.failureReason],
  ["Hosted page", html`<a href="/pay/${p.id}">/pay/${p.id}</a>`],
])}
${Object.keys(p.metadata).length > 0 ? html`<h3>Metadata</h3>${facts(Object.entries(p.metadata).map(([k, v]) => [k, v]))}` : nothing}
${cancel}
</section>
<section class="card" aria-labelledby="chain-title"><h2 id="chain-title">On-chain transactions</h2>
${
  p.paymentMethod === "card"
    ? html`<p class="muted">Card payments settle at the card provider${p.cardCheckoutSessionId ? html` (checkout <span class="mono">${p.cardCheckoutSessionId}</span>)` : nothing}.</p>`
    : facts([
        ["Payer's transfer", p.txHash ? txLink(p.txHash, options.explorer) : null],
        ["Payer", p.payerAddress ? hex(p.payerAddress, { copy: true }) : null],
        [
          "Settlement to merchant",
          p.settlementTxHashes?.net ? txLink(p.settlementTxHashes.net, options.explorer) : null,
        ],
        [
          "Fee to treasury",
          p.settlementTxHashes?.fee ? txLink(p.settlementTxHashes.fee, options.explorer) : null,
        ],
      ])
}
</section>
${
  options.refunds
    ? refundsCard({
        ...options.refunds,
        environment: options.environment,
        payment: p,
        explorer: options.explorer,
        csrfToken: options.csrfToken,
      })
    : nothing
}
${options.settlement ? paymentSettlementCard(options.environment, options.settlement, options.explorer) : nothing}
<section class="card" aria-labelledby="history-title"><h2 id="history-title">Status history and webhook deliveries</h2>
${
  options.history.length === 0
    ? empty("No events recorded for this payment.")
    : html`<ol class="timeline" id="history">${options.history.map(
        (
          e,
        ) => html`<li><strong>${e.event}</strong> ${e.status ? status(e.status) : nothing} ${time(e.createdAt)}
${
  e.deliveries.length === 0
    ? html`<p class="muted">No webhook subscribed to this event.</p>`
    : html`<ul class="deliveries">${e.deliveries.map(
        (d) =>
          html`<li>${status(d.status)} to <span class="mono">${d.url}</span> · ${d.attempts} attempt${d.attempts === 1 ? "" : "s"}${d.lastResponseCode ? html` · HTTP ${d.lastResponseCode}` : nothing}${d.lastError ? html` · ${d.lastError}` : nothing}</li>`,
      )}</ul>`
}</li>`,
      )}</ol>`
}
</section>`;
}
