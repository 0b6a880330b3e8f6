import type { Environment } from "../../../config.ts";
import { MAX_SPLITS } from "../../../domain/splits.ts";
import type { SettlementAnswer } from "../../payments/settlement/settlements-service.ts";
import { bpsToPercent, type RowField, type SplitRow, type SplitsFormValues } from "../split-form.ts";
import { amount, copyButton, empty, hex, status, time } from "./format.ts";
import { type HtmlSafeString, html, nothing } from "./html.ts";
import { base } from "./layout.ts";
import { stepUpField } from "./step-up.ts";

// The splits page (D15): the environment's configuration as a form (the switch, the configured
// rows and a few blank ones; the service's refusal next to the row it names, the values kept as
// typed), and the recent settlements with their legs: the merchant's part, the fee, each split.

export interface SettlementsPage {
  settlements: SettlementAnswer[];
  total: number;
  offset: number;
  limit: number;
  /** The payment the list is narrowed to (from a payment's page), if any. */
  paymentId: string | undefined;
}

function tx(hash: string | null, explorer: string | null): HtmlSafeString {
  return hex(hash, { copy: true, ...(hash && explorer ? { href: `${explorer}/tx/${hash}` } : {}) });
}

function summary(saved: { enabled: boolean; share: string; count: number }): HtmlSafeString {
  if (!saved.enabled)
    return html`<p id="splits-state">${status("off")} Splits are off: new crypto payments settle their whole net to you.</p>`;
  return html`<p id="splits-state">${status("on")} Splits are on: the enabled splits take <strong>${saved.share}%</strong> of the net of each crypto payment created from now on (${saved.count} split${saved.count === 1 ? "" : "s"} configured).</p>`;
}

function rowFields(i: number, row: SplitRow, form: SplitsFormValues): HtmlSafeString {
  const err = form.error?.row === i ? form.error : undefined;
  const errorId = `split-${i}-error`;
  const invalid = (f: RowField) =>
    err?.field === f ? html`aria-invalid="true" aria-describedby="${errorId}" autofocus` : nothing;
  const filled = row.label !== "" || row.percent !== "" || row.destination !== "";
  return html`<fieldset class="sp-row" data-row="${i}" ${err && !err.field ? html`aria-describedby="${errorId}"` : nothing}>
<legend>Split ${i + 1}${filled ? nothing : html` <span class="muted">(blank: fill it to add a split)</span>`}</legend>
<div class="field sp-label"><label for="split-${i}-label">Label</label>
<input id="split-${i}-label" name="label-${i}" maxlength="100" autocomplete="off" value="${row.label}" ${invalid("label")}></div>
<div class="field sp-percent"><label for="split-${i}-percent">Percent of net</label>
<input id="split-${i}-percent" name="percent-${i}" inputmode="decimal" autocomplete="off" placeholder="12.5" value="${row.percent}" ${invalid("percent")}></div>
<div class="field sp-destination"><label for="split-${i}-destination">Destination address</label>
<input id="split-${i}-destination" name="destination-${i}" class="mono" maxlength="42" autocomplete="off" spellcheck="false" placeholder="0x…" value="${row.destination}" ${invalid("destination")}></div>
<div class="sp-checks"><label class="inline-label"><input type="checkbox" name="enabled-${i}" ${row.enabled ? html`checked` : nothing} ${invalid("enabled")}> Enabled</label>
${filled ? html`<label class="inline-label"><input type="checkbox" name="remove-${i}" ${row.remove ? html`checked` : nothing}> Remove</label>` : nothing}</div>
${err ? html`<p class="field-error sp-error" id="${errorId}" role="alert">${err.message}</p>` : nothing}
</fieldset>`;
}

export function splitsForm(options: {
  environment: Environment;
  csrfToken: string;
  form: SplitsFormValues;
  saved: { enabled: boolean; share: string; count: number };
  /** The step-up's refusal, next to the current password. */
  passwordError?: string | undefined;
}): HtmlSafeString {
  const { form } = options;
  const general = form.error && form.error.row === undefined ? form.error : undefined;
  return html`<section class="card" aria-labelledby="config-title"><h2 id="config-title">Configuration</h2>
${summary(options.saved)}
<p class="muted" id="splits-help">A split sends a share of each crypto payment's <strong>net</strong> (what remains after the 1.5% fee) to its destination; you receive the rest, rounding included. Type each share as a <strong>percent of the net with at most 2 decimals</strong>: 12.5 means 12.5% (1250 basis points). At most ${MAX_SPLITS} splits, labels unique, the enabled ones 100% at most together. Saving replaces the whole configuration; a payment keeps the configuration in force when it was created.</p>
${options.saved.count === 0 && !form.error ? empty("No splits configured yet.", html`<p>Fill a blank row below and save to add one.</p>`) : nothing}
<form method="post" action="${base(options.environment)}/splits" id="splits-form" class="sp-form" novalidate aria-describedby="splits-help">
<input type="hidden" name="_csrf" value="${options.csrfToken}">
<input type="hidden" name="rows" value="${form.rows.length}">
<label class="inline-label sp-switch"><input type="checkbox" name="enabled" id="splits-enabled" ${form.enabled ? html`checked` : nothing}> Splits on for new crypto payments</label>
${general ? html`<p class="error" id="splits-error" role="alert">${general.message}</p>` : nothing}
${form.rows.map((row, i) => rowFields(i, row, form))}
<p class="muted">To add a split, fill a blank row; to take one out, tick Remove (or clear its row). Saving shows more blank rows, up to ${MAX_SPLITS} splits.</p>
${stepUpField("splits-password", options.passwordError)}
<div class="actions"><button type="submit" class="primary" id="save-splits">Save splits</button></div>
</form></section>`;
}

/** A settlement's legs: the merchant's part, the fee, and each split. */
export function settlementLegs(s: SettlementAnswer, explorer: string | null): HtmlSafeString {
  const none = html`<span class="muted">—</span>`;
  return html`<div class="table-wrap"><table class="list compact sp-legs"><thead><tr><th scope="col">Part</th><th scope="col" class="num">Amount</th><th scope="col">To</th><th scope="col">Status</th><th scope="col">Transaction</th></tr></thead>
<tbody><tr class="sp-merchant"><th scope="row">Merchant</th><td class="num">${amount(s.merchantAmount, s.tokenSymbol)}</td><td>${hex(s.merchantWallet, { copy: true })}</td><td>${none}</td><td>${tx(s.txRef, explorer)}</td></tr>
<tr class="sp-fee"><th scope="row">Fee</th><td class="num">${amount(s.feeAmount, s.tokenSymbol)}</td><td>Service treasury</td><td>${none}</td><td>${none}</td></tr>
${s.splits.map(
  (
    split,
  ) => html`<tr class="sp-split" data-split-id="${split.splitId}"><th scope="row">${split.label} <span class="muted">(${bpsToPercent(split.percent_bps)}%)</span></th>
<td class="num">${amount(split.amount, s.tokenSymbol)}</td><td>${hex(split.destination, { copy: true })}</td><td>${status(split.status)}</td><td>${tx(split.txRef, explorer)}</td></tr>`,
)}</tbody></table></div>`;
}

function settlementCard(root: string, s: SettlementAnswer, explorer: string | null): HtmlSafeString {
  const paymentId = s.paymentIds[0] ?? "";
  return html`<article class="card sp-settlement" data-settlement-id="${s.settlementId}" aria-labelledby="st-${s.settlementId}">
<h3 id="st-${s.settlementId}">${amount(s.grossAmount, s.tokenSymbol)} <span class="muted">settled</span> ${time(s.createdAt)}</h3>
<p class="sp-meta">Payment <a href="${root}/payments/${paymentId}" class="mono">${paymentId.slice(0, 8)}<span class="visually-hidden"> (${paymentId})</span></a> · gross ${amount(s.grossAmount, s.tokenSymbol)}, fee ${amount(s.feeAmount, s.tokenSymbol)}, net ${amount(s.netAmount, s.tokenSymbol)} · settlement <span class="mono" title="${s.settlementId}">${s.settlementId.slice(0, 8)}</span> ${copyButton(s.settlementId, "Copy id")}</p>
${settlementLegs(s, explorer)}
</article>`;
}

export function settlementsList(options: {
  environment: Environment;
  page: SettlementsPage;
  explorer: string | null;
}): HtmlSafeString {
  const root = base(options.environment);
  const { settlements, total, offset, limit, paymentId } = options.page;
  const filter = paymentId ? `payment=${encodeURIComponent(paymentId)}&` : "";
  const narrowed = paymentId
    ? html`<p id="settlements-filter">The settlement of payment <a href="${root}/payments/${paymentId}" class="mono">${paymentId}</a> only. <a href="${root}/splits#settlements-title">All settlements</a></p>`
    : nothing;
  let list: HtmlSafeString;
  if (settlements.length === 0) {
    list =
      total > 0
        ? empty("No settlements on this page.", html`<p><a href="${root}/splits">Newest settlements</a></p>`)
        : empty(
            paymentId
              ? "This payment has no settlement (yet)."
              : `No settlements in ${options.environment} yet.`,
            html`<p>A crypto payment's settlement is listed here once it is forwarded or fails.</p>`,
          );
  } else {
    const last = offset + settlements.length;
    list = html`<p class="muted" id="settlement-count">Settlements ${offset + 1}–${last} of ${total}, newest first.</p>
${settlements.map((s) => settlementCard(root, s, options.explorer))}
<nav class="pager" aria-label="Settlement pages">${
      offset > 0
        ? html`<a id="newer-settlements" href="${root}/splits?${filter}offset=${Math.max(0, offset - limit)}#settlements-title">← Newer</a> `
        : nothing
    }${last < total ? html`<a id="older-settlements" href="${root}/splits?${filter}offset=${last}#settlements-title">Older →</a>` : nothing}</nav>`;
  }
  return html`<section aria-labelledby="settlements-title" id="settlements"><h2 id="settlements-title">Recent settlements</h2>
<p class="muted">Each crypto payment's settlement once it ended: your part, the fee and each split's part of the net, in the token's units.</p>
${narrowed}${list}</section>`;
}

/** The card on a payment's page: its settlement's legs, and the way to the splits page. */
export function paymentSettlementCard(
  environment: Environment,
  s: SettlementAnswer,
  explorer: string | null,
): HtmlSafeString {
  const root = base(environment);
  return html`<section class="card" aria-labelledby="settlement-title" id="payment-settlement"><h2 id="settlement-title">Settlement</h2>
${settlementLegs(s, explorer)}
<p><a href="${root}/splits?payment=${encodeURIComponent(s.paymentIds[0] ?? "")}#settlements-title" id="settlement-link">This settlement on the Splits page</a></p>
</section>`;
}
