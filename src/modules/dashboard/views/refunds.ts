import type { Environment } from "../../../config.ts";
import type { PaymentView } from "../../payments/view.ts";
import type { RefundView } from "../../refunds/view.ts";
import { isPositive, type RefundField, type RefundFormValues, refundableOf } from "../refund-form.ts";
import { amount, empty, hex, status, time } from "./format.ts";
import { type HtmlSafeString, html, nothing } from "./html.ts";
import { base } from "./layout.ts";

// A payment's refunds (D19) on its page: what was refunded, each refund, and the refund form of a
// forwarded payment with something left to refund. The form's one-time token makes a form sent
// twice one refund; a refusal comes back next to the field it is about, the values as typed.

export interface RefundsSection {
  environment: Environment;
  payment: PaymentView;
  refunds: RefundView[];
  total: number;
  explorer: string | null;
  csrfToken: string;
  /** The form as typed (after a refusal) or blank; null when the payment takes no refund. */
  form: RefundFormValues | null;
  /** The refund the page was redirected to after the form (`?refund=<id>`), if it is listed. */
  made: string | undefined;
}

function refundRow(r: RefundView, explorer: string | null, made: boolean): HtmlSafeString {
  const tx = r.txHash
    ? hex(r.txHash, {
        copy: true,
        ...(explorer && r.destinationAddress ? { href: `${explorer}/tx/${r.txHash}` } : {}),
      })
    : html`<span class="muted">—</span>`;
  return html`<tr data-refund-id="${r.id}" ${made ? html`aria-current="true"` : nothing}><td class="num">${amount(r.amount, r.tokenSymbol)}</td><td>${status(r.status)}</td>
<td>${r.destinationAddress ? hex(r.destinationAddress, { copy: true }) : "card"}</td><td>${tx}</td>
<td class="description">${r.reason ?? ""}</td><td class="nowrap">${time(r.createdAt)}</td></tr>`;
}

function refundList(s: RefundsSection): HtmlSafeString {
  if (s.refunds.length === 0) return empty("No refunds for this payment.");
  const more = s.total > s.refunds.length;
  return html`<div class="table-wrap"><table class="list compact" id="refunds-table"><thead><tr><th scope="col" class="num">Amount</th><th scope="col">Status</th><th scope="col">To</th><th scope="col">Transaction</th><th scope="col">Reason</th><th scope="col">Created</th></tr></thead>
<tbody>${s.refunds.map((r) => refundRow(r, s.explorer, r.id === s.made))}</tbody></table></div>
${more ? html`<p class="muted">The first ${s.refunds.length} of ${s.total} refunds, oldest first.</p>` : nothing}`;
}

function madeNotice(s: RefundsSection): HtmlSafeString {
  const made = s.refunds.find((r) => r.id === s.made);
  if (!made) return nothing;
  const what =
    made.status === "completed"
      ? "is complete"
      : made.status === "failed"
        ? "failed: nothing was sent, and the amount can be refunded again"
        : "is on its way";
  return html`<p class="notice" id="refund-made" role="status">The refund of ${amount(made.amount, made.tokenSymbol)} ${what}.</p>`;
}

function refundForm(s: RefundsSection, form: RefundFormValues, refundable: string): HtmlSafeString {
  const p = s.payment;
  const err = form.error;
  const errorId = (f: RefundField) => `refund-${f}-error`;
  const invalid = (f: RefundField) =>
    err?.field === f ? html`aria-invalid="true" aria-describedby="${errorId(f)}" autofocus` : nothing;
  const fieldError = (f: RefundField) =>
    err?.field === f
      ? html`<p class="field-error" id="${errorId(f)}" role="alert">${err.message}</p>`
      : nothing;
  const crypto = p.paymentMethod === "crypto";
  const wallet = (value: string, label: string) =>
    html`<option value="${value}" ${form.walletType === value ? html`selected` : nothing}>${label}</option>`;
  return html`<form method="post" action="${base(s.environment)}/payments/${p.id}/refunds" class="stack" id="refund-form" novalidate data-confirm="Send this refund? Money leaves your wallet and cannot be taken back.">
<h3>Refund</h3>
<input type="hidden" name="_csrf" value="${s.csrfToken}">
<input type="hidden" name="formToken" value="${form.formToken}">
${err && !err.field ? html`<p class="error" id="refund-error" role="alert">${err.message}</p>` : nothing}
<label for="refund-amount">Amount (${p.tokenSymbol}) <span class="muted">— up to <span id="refundable">${refundable}</span>; empty refunds all of it</span></label>
<input id="refund-amount" name="amount" inputmode="decimal" autocomplete="off" placeholder="${refundable}" value="${form.amount}" ${invalid("amount")}>
${fieldError("amount")}
${
  crypto
    ? html`<label for="refund-destination">Destination address${p.payerAddress ? html` <span class="muted">— empty: the payer</span>` : html` <span class="muted">— required: the payer's address is not known</span>`}</label>
<input id="refund-destination" name="destinationAddress" class="mono" maxlength="42" autocomplete="off" spellcheck="false" placeholder="${p.payerAddress ?? "0x…"}" value="${form.destinationAddress}" ${invalid("destinationAddress")}>
${fieldError("destinationAddress")}
<label for="refund-wallet">Send from</label>
<select id="refund-wallet" name="walletType" ${invalid("walletType")}>${wallet("", "The workspace's default wallet")}${wallet("eoa", "Workspace wallet (EOA)")}${wallet("smart_wallet", "Smart wallet")}</select>
${fieldError("walletType")}`
    : html`<p class="muted">The refund goes back to the card at the card provider.</p>`
}
<label for="refund-reason">Reason <span class="muted">(optional, up to 500 characters)</span></label>
<input id="refund-reason" name="reason" maxlength="500" autocomplete="off" value="${form.reason}" ${invalid("reason")}>
${fieldError("reason")}
<button type="submit" class="danger" id="refund-submit">Refund</button>
</form>`;
}

export function refundsCard(s: RefundsSection): HtmlSafeString {
  const p = s.payment;
  const refundable = refundableOf(p);
  let action: HtmlSafeString = nothing;
  if (s.form && isPositive(refundable)) action = refundForm(s, s.form, refundable ?? "");
  else if (p.status === "forwarded" && !isPositive(refundable))
    action = html`<p id="fully-refunded">Fully refunded: nothing is left to refund.</p>`;
  return html`<section class="card" aria-labelledby="refunds-title" id="refunds"><h2 id="refunds-title">Refunds</h2>
<p>Refunded <strong id="refunded-amount">${amount(p.refundedAmount, p.tokenSymbol)}</strong> of ${amount(p.amountReceived ?? p.grossAmount, p.tokenSymbol)}${p.amountReceived ? " received" : nothing}.</p>
${madeNotice(s)}
${refundList(s)}
${action}
</section>`;
}
