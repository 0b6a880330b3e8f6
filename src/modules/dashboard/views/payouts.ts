import type { Environment } from "../../../config.ts";
import { PAYOUT_STATUSES } from "../../../domain/payout-state.ts";
import type { PayoutRecord } from "../../payouts/browse.ts";
import { amount, copyButton, empty, facts, hex, status, time } from "./format.ts";
import { type HtmlSafeString, html, nothing } from "./html.ts";
import { base } from "./layout.ts";

// Payouts: the circuit breaker's state (with Resume Payouts), the list of every status newest
// first with its CSV, and a payout's page.

export interface BreakerState {
  status: string;
  failStreak: number;
  pausedAt: string | null;
  reason: string | null;
}

export function breakerCard(
  environment: Environment,
  state: BreakerState,
  csrfToken: string,
): HtmlSafeString {
  if (state.status !== "paused")
    return html`<div class="card" id="payout-state"><h3>Payouts</h3><p>${status("active")} Payouts are running${state.failStreak > 0 ? html` (${state.failStreak} failed in a row)` : nothing}.</p></div>`;
  return html`<div class="card alert" id="payout-state"><h3>Payouts are paused</h3>
<p>The circuit breaker stopped payouts ${time(state.pausedAt)} after ${state.failStreak} failures in a row.</p>
${state.reason ? html`<p>Last failure: <q>${state.reason}</q></p>` : nothing}
<form method="post" action="${base(environment)}/payouts/resume">
<input type="hidden" name="_csrf" value="${csrfToken}">
<button type="submit" class="primary" id="resume-payouts">Resume Payouts</button>
</form></div>`;
}

export function payoutsListBody(options: {
  environment: Environment;
  payouts: PayoutRecord[];
  status: string | undefined;
  /** The network filtered on, and the environment's network ids to choose from (D22). */
  network: string | undefined;
  networks: readonly string[];
  next: string | null;
  breaker: BreakerState;
  csrfToken: string;
}): HtmlSafeString {
  const root = base(options.environment);
  const params = new URLSearchParams();
  if (options.status) params.set("status", options.status);
  if (options.network) params.set("network", options.network);
  const filter = params.toString();
  return html`${breakerCard(options.environment, options.breaker, options.csrfToken)}
<form method="get" action="${root}/payouts" class="filters" role="search" aria-label="Filter payouts">
<div class="field"><label for="p-status">Status</label><select id="p-status" name="status"><option value="">Any</option>${PAYOUT_STATUSES.map(
    (s) => html`<option value="${s}" ${s === options.status ? html`selected` : nothing}>${s}</option>`,
  )}</select></div>
<div class="field"><label for="p-network">Network</label><select id="p-network" name="network"><option value="">Any</option>${options.networks.map(
    (n) => html`<option value="${n}" ${n === options.network ? html`selected` : nothing}>${n}</option>`,
  )}</select></div>
<div class="actions"><button type="submit" class="primary">Apply</button></div>
</form>
<p class="toolbar"><a class="button" id="export-payouts-csv" href="${root}/payouts/export.csv${filter ? `?${filter}` : ""}" download>Export CSV</a></p>
${
  options.payouts.length === 0
    ? empty(
        filter ? "No payouts match these filters." : "No payouts in this environment yet.",
        html`<p>Send one with <code>POST /api/v1/payouts</code>.</p>`,
      )
    : html`<div class="table-wrap"><table class="list" id="payouts-table"><thead><tr><th scope="col" class="num">Amount</th><th scope="col">Status</th><th scope="col">To</th><th scope="col">Created</th><th scope="col" class="wide-only">Network</th><th scope="col" class="wide-only">Description</th></tr></thead>
<tbody>${options.payouts.map(
        (
          p,
        ) => html`<tr data-payout-id="${p.id}"><td class="num"><a href="${root}/payouts/${p.id}">${amount(p.amount, p.tokenSymbol)}</a></td><td>${status(p.status)}</td>
<td>${hex(p.destinationAddress)}</td><td class="nowrap">${time(p.createdAt)}</td><td class="wide-only">${p.network}</td><td class="wide-only description">${p.description ?? ""}</td></tr>`,
      )}</tbody></table></div>`
}
<nav class="pager" aria-label="Pages">${
    options.next
      ? html`<a id="next-page" href="${root}/payouts?${filter ? `${filter}&` : ""}after=${encodeURIComponent(options.next)}">Older payouts →</a>`
      : nothing
  }</nav>`;
}

export function payoutDetailBody(
  environment: Environment,
  p: PayoutRecord,
  explorer: string | null,
): HtmlSafeString {
  const tx = (hash: string | null | undefined) =>
    hash ? hex(hash, { copy: true, ...(explorer ? { href: `${explorer}/tx/${hash}` } : {}) }) : null;
  return html`<p><a href="${base(environment)}/payouts">← Payouts</a></p>
<section class="card" aria-labelledby="payout-title"><h2 id="payout-title">${amount(p.amount, p.tokenSymbol)} ${status(p.status)}</h2>
${facts([
  ["Id", html`<span class="mono">${p.id}</span> ${copyButton(p.id)}`],
  ["Description", p.description],
  ["Network", p.network],
  ["From", hex(p.fromAddress, { copy: true })],
  ["To", hex(p.destinationAddress, { copy: true })],
  ["Transaction", tx(p.txHash)],
  ["User operation", p.userOpHash ? hex(p.userOpHash, { copy: true }) : null],
  ["Created", time(p.createdAt)],
  ["Completed", p.completedAt ? time(p.completedAt) : null],
])}
${Object.keys(p.metadata).length > 0 ? html`<h3>Metadata</h3>${facts(Object.entries(p.metadata).map(([k, v]) => [k, v]))}` : nothing}
</section>`;
}
