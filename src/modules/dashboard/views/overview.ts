import type { Environment } from "../../../config.ts";
import type { PaymentView } from "../../payments/view.ts";
import { balancesOf, type NetworkBalances, walletBalances } from "./balances.ts";
import { type DailyPoint, dailyChart } from "./chart.ts";
import { amount, copyButton, empty, hex, status } from "./format.ts";
import { type HtmlSafeString, html } from "./html.ts";
import { base } from "./layout.ts";
import { paymentRows } from "./payments.ts";
import { breakerCard } from "./payouts.ts";

// The overview: both wallets' balances on each network, the totals of /api/v1/wallet/stats, 30 days of payments,
// the payout state with Resume Payouts, and the latest payments.

export interface Overview {
  environment: Environment;
  csrfToken: string;
  balances: {
    eoa: { address: string; balances: Record<string, string> } | null;
    smartWallet: { address: string; balances: Record<string, string> } | null;
    /** The same wallets on each network (D22), the default first. */
    networks: Parameters<typeof balancesOf>[0];
  };
  stats: {
    payments: Array<{ status: string; tokenSymbol: string; count: number; volume: string }>;
    payouts: Array<{ status: string; tokenSymbol: string; count: number; volume: string }>;
  };
  payoutState: { status: string; failStreak: number; pausedAt: string | null; reason: string | null };
  daily: DailyPoint[];
  recent: PaymentView[];
}

function wallet(
  label: string,
  w: Overview["balances"]["eoa"],
  perNetwork: NetworkBalances,
  environment: string,
): HtmlSafeString {
  if (!w) return html`<div class="card"><h3>${label}</h3><p class="muted">Not created yet.</p></div>`;
  return html`<div class="card"><h3>${label}</h3>
<p>${hex(w.address)} ${copyButton(w.address, "Copy address")}</p>
${walletBalances(perNetwork, environment)}</div>`;
}

function totals(title: string, rows: Overview["stats"]["payments"]): HtmlSafeString {
  if (rows.length === 0) return html`<div class="card"><h3>${title}</h3><p class="muted">None yet.</p></div>`;
  return html`<div class="card"><h3>${title}</h3><div class="table-wrap flat"><table class="compact"><thead><tr><th scope="col">Status</th><th scope="col">Token</th><th scope="col" class="num">Count</th><th scope="col" class="num">Volume</th></tr></thead><tbody>${rows.map(
    (r) =>
      html`<tr><td>${status(r.status)}</td><td>${r.tokenSymbol}</td><td class="num">${r.count}</td><td class="num">${amount(r.volume, r.tokenSymbol)}</td></tr>`,
  )}</tbody></table></div></div>`;
}

export function overviewBody(o: Overview): HtmlSafeString {
  const { eoa, smartWallet, networks } = o.balances;
  return html`<section class="grid two" aria-label="Wallets">${wallet("Workspace wallet (EOA)", eoa, balancesOf(networks, "eoa"), o.environment)}${wallet("Smart wallet", smartWallet, balancesOf(networks, "smartWallet"), o.environment)}</section>
<section aria-labelledby="chart-title"><h2 id="chart-title">Payments, last 30 days</h2>${dailyChart(o.daily)}</section>
<section class="grid two" aria-label="Totals">${totals("Payments by status", o.stats.payments)}${totals("Payouts by status", o.stats.payouts)}</section>
${breakerCard(o.environment, o.payoutState, o.csrfToken)}
<section aria-labelledby="recent-title"><h2 id="recent-title">Recent payments</h2>
${
  o.recent.length === 0
    ? empty(
        "No payments yet.",
        html`<p>Create one with <code>POST /api/v1/payments</code> and your ${o.environment} API key.</p>`,
      )
    : paymentRows(o.environment, o.recent)
}
<p><a href="${base(o.environment)}/payments">All payments →</a></p></section>`;
}
