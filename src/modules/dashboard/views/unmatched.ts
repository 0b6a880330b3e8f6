import type { Environment } from "../../../config.ts";
import type { UnmatchedStatus } from "../../../domain/unmatched-state.ts";
import type { UnmatchedFormError } from "../refund-form.ts";
import { amount, empty, hex, status, time } from "./format.ts";
import { type HtmlSafeString, html, nothing } from "./html.ts";
import { base } from "./layout.ts";

// The unmatched inbox (D13, D19): transfers to a workspace wallet that matched no pending payment,
// each open one with its three actions: attach it to a payment (which then settles what it carried),
// return it (by default to its sender), or keep it as the wallet's own money (no longer held). A refusal comes back in the row of its transfer, as
// typed; the return form's one-time token makes a form sent twice one return.

export interface UnmatchedRow {
  id: string;
  status: UnmatchedStatus;
  paymentId: string | null;
  amount: string;
  token: string;
  from: string;
  to: string;
  txHash: string;
  blockNumber: number;
  reason: string;
  createdAt: string;
}

/** Fixed messages after an action (`?done=`): never text from the request. */
const DONE = new Map([
  ["attached", "The transfer is attached: its payment settles what it carried."],
  ["returned", "The transfer is being sent back."],
  ["kept", "The transfer is kept as the wallet's own money: it is no longer held."],
]);

interface Actions {
  root: string;
  csrfToken: string;
  /** `?offset=…` of the page, so that the page shown after an action is this one. */
  query: string;
  /** A one-time token per open transfer's return form. */
  tokenOf: (transferId: string) => string;
  error: UnmatchedFormError | undefined;
}

function actionForms(t: UnmatchedRow, a: Actions): HtmlSafeString {
  const err = a.error?.transferId === t.id ? a.error : undefined;
  const errorId = `unmatched-${t.id}-error`;
  const typed = (action: "attach" | "return") => (err?.action === action ? err.typed : "");
  const invalid = (action: "attach" | "return") =>
    err?.action === action ? html`aria-invalid="true" aria-describedby="${errorId}" autofocus` : nothing;
  return html`<form method="post" action="${a.root}/unmatched/${t.id}/attach${a.query}" class="row-form" data-action="attach">
<input type="hidden" name="_csrf" value="${a.csrfToken}">
<div class="field"><label for="attach-${t.id}">Payment id</label>
<input id="attach-${t.id}" name="paymentId" class="mono" maxlength="64" autocomplete="off" spellcheck="false" required placeholder="A pending or expired ${t.token} payment" value="${typed("attach")}" ${invalid("attach")}></div>
<button type="submit" id="attach-${t.id}-submit">Attach</button></form>
<form method="post" action="${a.root}/unmatched/${t.id}/return${a.query}" class="row-form" data-action="return" data-confirm="Send ${t.amount} ${t.token} back? It leaves your wallet.">
<input type="hidden" name="_csrf" value="${a.csrfToken}">
<input type="hidden" name="formToken" value="${a.tokenOf(t.id)}">
<div class="field"><label for="return-${t.id}">Return to <span class="muted">(empty: the sender)</span></label>
<input id="return-${t.id}" name="destinationAddress" class="mono" maxlength="42" autocomplete="off" spellcheck="false" placeholder="${t.from}" value="${typed("return")}" ${invalid("return")}></div>
<button type="submit" class="danger" id="return-${t.id}-submit">Return</button></form>
<form method="post" action="${a.root}/unmatched/${t.id}/keep${a.query}" class="row-form" data-action="keep" data-confirm="Keep ${t.amount} ${t.token} as your own money? It can no longer be returned.">
<input type="hidden" name="_csrf" value="${a.csrfToken}">
<button type="submit" id="keep-${t.id}-submit">Keep</button></form>
${err ? html`<p class="field-error" id="${errorId}" role="alert">${err.message}</p>` : nothing}`;
}

function outcome(t: UnmatchedRow, a: Actions): HtmlSafeString {
  if (t.status === "open") return actionForms(t, a);
  if (t.status === "attached" && t.paymentId)
    return html`Attached to payment <a class="mono" href="${a.root}/payments/${t.paymentId}">${t.paymentId.slice(0, 8)}<span class="visually-hidden"> (${t.paymentId})</span></a>`;
  if (t.status === "onramp") return html`<span class="muted">An on-ramp session's delivery</span>`;
  if (t.status === "kept") return html`<span class="muted">Kept as the wallet's own money</span>`;
  if (t.status === "dropped")
    return html`<span class="muted">Dropped by a chain reorganisation: nothing arrived. Open again if the transaction is mined again.</span>`;
  return html`<span class="muted">Sent back</span>`;
}

export function unmatchedBody(options: {
  environment: Environment;
  transfers: UnmatchedRow[];
  total: number;
  offset: number;
  limit: number;
  explorer: string | null;
  csrfToken: string;
  tokenOf: (transferId: string) => string;
  error?: UnmatchedFormError | undefined;
  /** `?done=` after an action. */
  done?: string | undefined;
}): HtmlSafeString {
  const root = base(options.environment);
  const done = options.done ? DONE.get(options.done) : undefined;
  const err = options.error;
  // A refusal about a transfer not open on this page (returned meanwhile, on another page) goes on top.
  const inRow = err && options.transfers.some((t) => t.id === err.transferId && t.status === "open");
  const notice = html`${done ? html`<p class="notice" id="unmatched-done" role="status">${done}</p>` : nothing}${
    err && !inRow ? html`<p class="error" id="unmatched-error" role="alert">${err.message}</p>` : nothing
  }`;
  if (options.transfers.length === 0)
    return html`${notice}${empty(
      "No unmatched transfers.",
      html`<p>A transfer to one of your wallets that matches no pending payment (a wrong amount, a late payment) is listed here, never lost.</p>`,
    )}`;
  const actions: Actions = {
    root,
    csrfToken: options.csrfToken,
    query: options.offset > 0 ? `?offset=${options.offset}` : "",
    tokenOf: options.tokenOf,
    error: options.error,
  };
  const next = options.offset + options.limit < options.total ? options.offset + options.limit : null;
  return html`${notice}<p class="muted">${options.total} transfer${options.total === 1 ? "" : "s"} matched no payment. Attach an open one to the pending or expired payment it was meant for, or send it back.</p>
<div class="table-wrap"><table class="list" id="unmatched-table"><thead><tr><th scope="col">Seen</th><th scope="col" class="num">Amount</th><th scope="col">From</th><th scope="col">To</th><th scope="col">Transaction</th><th scope="col">Why</th><th scope="col">Status</th><th scope="col">Action</th></tr></thead>
<tbody>${options.transfers.map(
    (
      t,
    ) => html`<tr data-transfer-id="${t.id}" data-status="${t.status}"><td>${time(t.createdAt)}</td><td class="num">${amount(t.amount, t.token)}</td><td>${hex(t.from, { copy: true })}</td><td>${hex(t.to)}</td>
<td>${hex(t.txHash, { copy: true, ...(options.explorer ? { href: `${options.explorer}/tx/${t.txHash}` } : {}) })} <span class="muted">block ${t.blockNumber}</span></td><td>${t.reason}</td>
<td>${status(t.status)}</td><td>${outcome(t, actions)}</td></tr>`,
  )}</tbody></table></div>
<nav class="pager" aria-label="Pages">${options.offset > 0 ? html`<a href="${root}/unmatched?offset=${Math.max(0, options.offset - options.limit)}">← Newer</a> ` : nothing}${next !== null ? html`<a href="${root}/unmatched?offset=${next}">Older →</a>` : nothing}</nav>`;
}
