import type { Environment } from "../../../config.ts";
import type { AgentPaymentEventData } from "../../../domain/events.ts";
import { copyButton, empty, facts, hex, time } from "./format.ts";
import { type HtmlSafeString, html, nothing } from "./html.ts";
import { base } from "./layout.ts";
import { stepUpField } from "./step-up.ts";

// Agent wallets (D23, issue 40): each agent wallet's spending policy with the form that replaces
// it, and the approval queue (payments above a wallet's approvalAbove) with Approve and Deny. Every
// change asks for the current password again (step-up, D21).

export const AMOUNT_FIELDS = [
  ["maxPerPayment", "Most per payment"],
  ["daily", "Cap per UTC day"],
  ["monthly", "Cap per UTC month"],
  ["approvalAbove", "Approval needed above"],
] as const;
export const LIST_FIELDS = [
  ["allowedPayees", "Allowed payees", "Addresses (0x…), one a line"],
  ["allowedOrigins", "Allowed origins", "Origins such as https://api.example.com, one a line"],
] as const;
export type AmountField = (typeof AMOUNT_FIELDS)[number][0];
export type ListField = (typeof LIST_FIELDS)[number][0];

/** A policy as its form shows it: amounts' text per currency, lists as text (null: no limit). */
export interface PolicyForm {
  amounts: Record<AmountField, Record<string, string>>;
  lists: Record<ListField, string | null>;
  error?: string | undefined;
}

export interface AgentWalletCard {
  walletId: string;
  address: string;
  ownerId: string;
  currencies: string[];
  createdAt: string;
  form: PolicyForm;
}

/** The form of a policy as the service shows it (`policyView`: absent fields are no limit). */
export function policyForm(view: Record<string, unknown>): PolicyForm {
  const amountsOf = (value: unknown): Record<string, string> => {
    if (typeof value !== "object" || value === null) return {};
    return Object.fromEntries(
      Object.entries(value).filter((e): e is [string, string] => typeof e[1] === "string"),
    );
  };
  const listOf = (value: unknown): string | null =>
    Array.isArray(value) ? value.filter((v) => typeof v === "string").join("\n") : null;
  return {
    amounts: {
      maxPerPayment: amountsOf(view.maxPerPayment),
      daily: amountsOf(view.daily),
      monthly: amountsOf(view.monthly),
      approvalAbove: amountsOf(view.approvalAbove),
    },
    lists: { allowedPayees: listOf(view.allowedPayees), allowedOrigins: listOf(view.allowedOrigins) },
  };
}

/** The currencies a wallet's form has a column for: the wallet's, then any its policy names. */
function currenciesOf(card: AgentWalletCard): string[] {
  const named = AMOUNT_FIELDS.flatMap(([f]) =>
    Object.entries(card.form.amounts[f]).flatMap(([c, text]) => (text === "" ? [] : [c])),
  );
  return [...new Set([...card.currencies, ...named])];
}

function amountsText(amounts: Record<string, string>): HtmlSafeString | null {
  const entries = Object.entries(amounts).filter(([, v]) => v !== "");
  return entries.length === 0 ? null : html`${entries.map(([c, v]) => `${v} ${c}`).join(", ")}`;
}

function listText(list: string | null): HtmlSafeString | null {
  if (list === null) return null;
  const items = list.split("\n").filter((v) => v !== "");
  return items.length === 0 ? html`none allowed` : html`<span class="mono">${items.join(", ")}</span>`;
}

function policyFacts(form: PolicyForm): HtmlSafeString {
  return facts([
    ...AMOUNT_FIELDS.map(([f, label]): [string, HtmlSafeString | null] => [
      label,
      amountsText(form.amounts[f]),
    ]),
    ...LIST_FIELDS.map(([f, label]): [string, HtmlSafeString | null] => [label, listText(form.lists[f])]),
  ]);
}

function policyEditor(root: string, csrfToken: string, card: AgentWalletCard): HtmlSafeString {
  const id = `p-${card.walletId}`;
  const form = card.form;
  const currencies = currenciesOf(card);
  return html`<details class="policy-edit" ${form.error ? html`open` : nothing}><summary>Edit the policy</summary>
<form method="post" action="${root}/agents/${card.walletId}/policy" class="policy-form" novalidate>
<input type="hidden" name="_csrf" value="${csrfToken}">
${form.error ? html`<p class="field-error" id="${id}-error" role="alert">${form.error}</p>` : nothing}
<p class="hint">Leave an amount empty for no limit in that currency; amounts are decimals, e.g. 5.00.</p>
${AMOUNT_FIELDS.map(
  ([f, label]) =>
    html`<fieldset class="policy-amounts"><legend>${label}</legend>${currencies.map(
      (c) => html`<div class="field"><label for="${id}-${f}-${c}">${c}</label>
<input id="${id}-${f}-${c}" name="${f}-${c}" inputmode="decimal" maxlength="100" value="${form.amounts[f][c] ?? ""}"></div>`,
    )}</fieldset>`,
)}
${LIST_FIELDS.map(
  ([f, label, hint]) => html`<fieldset class="policy-list"><legend>${label}</legend>
<label class="inline-label"><input type="checkbox" name="${f}-on" ${form.lists[f] !== null ? html`checked` : nothing}> Only these (an empty list allows none)</label>
<div class="field"><label for="${id}-${f}">${hint}</label>
<textarea id="${id}-${f}" name="${f}" rows="3" maxlength="10000">${form.lists[f] ?? ""}</textarea></div></fieldset>`,
)}
${stepUpField(`${id}-password`, undefined)}
<div class="actions"><button type="submit" class="primary">Save policy<span class="visually-hidden"> of wallet ${card.address}</span></button></div>
</form></details>`;
}

export function agentWalletsBody(options: {
  environment: Environment;
  csrfToken: string;
  wallets: AgentWalletCard[];
  total: number;
}): HtmlSafeString {
  const root = base(options.environment);
  if (options.wallets.length === 0)
    return empty(
      `No agent wallets in ${options.environment} yet.`,
      html`<p>Create one with <code>POST /api/wallets/create</code> (<code>type: "agent"</code>).</p>`,
    );
  return html`<p class="muted">A payment an agent's wallet makes over x402 is checked against its policy. <a href="${root}/approvals">Payments waiting for approval</a></p>
${options.total > options.wallets.length ? html`<p class="muted">The newest ${options.wallets.length} of ${options.total} agent wallets.</p>` : nothing}
${options.wallets.map(
  (
    w,
  ) => html`<section class="card agent-wallet" id="wallet-${w.walletId}" data-wallet-id="${w.walletId}" aria-labelledby="wallet-${w.walletId}-title">
<h2 id="wallet-${w.walletId}-title">Agent ${w.ownerId}</h2>
<p>${hex(w.address)} ${copyButton(w.address, "Copy address")} · <span class="muted">${w.currencies.join(", ")} · created ${time(w.createdAt)}</span></p>
<h3>Spending policy</h3>
${policyFacts(w.form)}
${policyEditor(root, options.csrfToken, w)}
</section>`,
)}`;
}

/** A waiting payment and the wallet it is of (its address and agent, when on this page). */
export interface WaitingRow {
  authorization: AgentPaymentEventData;
  wallet: { address: string; ownerId: string } | undefined;
  /** The step-up's refusal, next to this row's buttons. */
  error?: string | undefined;
}

export function approvalsBody(options: {
  environment: Environment;
  csrfToken: string;
  rows: WaitingRow[];
  total: number;
}): HtmlSafeString {
  const root = base(options.environment);
  if (options.rows.length === 0)
    return empty(
      "No payments wait for approval.",
      html`<p>A payment above a wallet's <a href="${root}/agents">approval threshold</a> waits here.</p>`,
    );
  return html`<p class="muted">Approving signs the payment for the agent; denying releases its reservation. Both ask for your current password.</p>
${options.total > options.rows.length ? html`<p class="muted">The newest ${options.rows.length} of ${options.total}.</p>` : nothing}
<div class="table-wrap"><table class="list" id="approvals-table">
<thead><tr><th scope="col">Wallet</th><th scope="col" class="num">Amount</th><th scope="col">Token</th><th scope="col">Payee</th><th scope="col">Resource</th><th scope="col">Network</th><th scope="col">Created</th><th scope="col">Decision</th></tr></thead>
<tbody>${options.rows.map((row) => {
    const a = row.authorization;
    const here = `${root}/approvals/${a.walletId}/${a.authorizationId}`;
    const id = `a-${a.authorizationId}`;
    return html`<tr data-authorization-id="${a.authorizationId}">
<td>${row.wallet ? html`${row.wallet.ownerId}<br>${hex(row.wallet.address)}` : hex(a.walletId)}</td>
<td class="num">${a.amount}</td><td>${a.currency}</td><td>${hex(a.payTo)}</td>
<td class="mono approval-resource">${a.resource}</td><td>${a.network}</td><td>${time(a.createdAt)}</td>
<td><form method="post" action="${here}/approve" class="approval-form">
<input type="hidden" name="_csrf" value="${options.csrfToken}">
${stepUpField(`${id}-password`, row.error)}
<div class="actions"><button type="submit" class="primary">Approve<span class="visually-hidden"> ${a.amount} ${a.currency}</span></button>
<button type="submit" class="danger" formaction="${here}/deny">Deny<span class="visually-hidden"> ${a.amount} ${a.currency}</span></button></div>
</form></td></tr>`;
  })}</tbody></table></div>`;
}

/** The answer to an approval: what was approved, and the signed header for whoever passes it on. */
export function approvedBody(options: {
  environment: Environment;
  authorization: AgentPaymentEventData;
  paymentSignature: string;
  expiresAt: string;
}): HtmlSafeString {
  const root = base(options.environment);
  const a = options.authorization;
  return html`<section class="card" aria-labelledby="approved-title"><h2 id="approved-title">Payment approved</h2>
<p role="status" id="approved-status">The payment of ${a.amount} ${a.currency} to ${a.payTo} is <strong>authorized</strong>. The agent's payment can go through until ${time(options.expiresAt)}.</p>
${facts([
  ["Authorization", html`<span class="mono">${a.authorizationId}</span>`],
  ["Resource", html`<span class="mono">${a.resource}</span>`],
  ["Network", a.network],
])}
<details><summary>The signed PAYMENT-SIGNATURE value (shown once)</summary>
<p class="muted">The service does not keep it: if your agent waits for it from you rather than from the approve call of the API, copy it now.</p>
<p><code class="mono approval-signature">${options.paymentSignature}</code> ${copyButton(options.paymentSignature, "Copy signature")}</p>
</details>
<p><a href="${root}/approvals" id="back-to-approvals">Back to the approval queue</a></p></section>`;
}
