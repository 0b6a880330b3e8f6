import escapeHtml from "escape-html";
import { NATIVE_TOKEN } from "../../domain/money.ts";
import { FINAL_STATUSES, isFinal, type PaymentStatus } from "../../domain/payment-state.ts";
import { formatDecimal, type Lang, MESSAGES, type Messages } from "./i18n.ts";
import { hrefWith, renderShell } from "./layout.ts";
import type { PublicPayment } from "./public-payment.ts";

// Server-rendered hosted payment page. Every user-supplied string goes through escapeHtml; the
// only script is our own file, allowed by a per-response nonce; no external resources. The payer
// reads payer words ("Paid"), never the internal status, which stays in data-status for the script.

/** Over, and the payer may go back: a failed payment asks them to contact the merchant instead. */
const RETURN_ON: ReadonlySet<PaymentStatus> = new Set(FINAL_STATUSES.filter((status) => status !== "failed"));

export interface PageOptions {
  nonce: string;
  qrSvg: string | null;
  /** English unless given. */
  lang?: Lang;
  /** Whether `/pay/{id}/events` (server-sent status) is served: the script then listens to it. */
  events?: boolean;
  /** The request's query (network, lang): kept by the language and network links. */
  query?: URLSearchParams;
}

/** What the payer is told of a payment's state. */
export function payerTitle(p: Pick<PublicPayment, "status" | "refund">, t: Messages): string {
  switch (p.status) {
    case "pending":
      return t.waiting;
    case "detected":
    case "confirmed":
      return t.confirming;
    case "forwarded":
      return p.refund?.full ? t.refunded : t.paid;
    case "expired":
      return t.expired;
    case "cancelled":
      return t.cancelled;
    case "failed":
      return t.failed;
  }
}

export function renderPaymentPage(p: PublicPayment, options: PageOptions): string {
  const e = escapeHtml;
  const lang = options.lang ?? "en";
  const t = MESSAGES[lang];
  const amount = (value: string) => `${formatDecimal(lang, value)} ${p.tokenSymbol}`;
  const title = payerTitle(p, t);
  const waiting = !isFinal(p.status);
  const id = e(encodeURIComponent(p.id));
  const body: string[] = [];

  body.push(
    `<p class="amount"><span id="amount">${e(formatDecimal(lang, p.amount))}</span> <span>${e(p.tokenSymbol)}</span></p>`,
  );
  if (p.description) body.push(`<p class="description" id="description">${e(p.description)}</p>`);
  if (p.environment === "sandbox") body.push(`<p class="badge">${e(t.sandbox)}</p>`);
  if (p.refund && !p.refund.full)
    body.push(
      `<p class="refund" id="refund">${e(t.partialRefund(amount(p.refund.refunded), amount(p.refund.received)))}</p>`,
    );

  if (waiting && p.paymentMethod === "crypto" && p.receivingAddress) {
    body.push(`<section aria-labelledby="send-heading">
  <h2 id="send-heading">${e(t.sendExactly(amount(p.amount)))}</h2>
  ${p.network ? `<p>${e(t.network)}: <strong id="network">${e(p.network.name)}</strong> (${e(t.chainId(String(p.network.chainId)))})</p>` : ""}
  ${p.network ? `<p class="warning" id="network-warning"><strong>${e(t.sendOnlyOn(p.tokenSymbol, p.network.name))}</strong></p>` : ""}
  ${networkChoice(p, t, options.query ?? new URLSearchParams())}
  ${walletButton(p, t)}
  <label for="address">${e(t.toAddress)}</label>
  <div class="copy-row"><input id="address" readonly value="${e(p.receivingAddress)}" aria-label="${e(t.receivingAddress)}">
  <button type="button" id="copy" data-copy="${e(p.receivingAddress)}">${e(t.copy)}</button></div>
  <p id="copy-status" role="status" aria-live="polite"></p>
  ${options.qrSvg ? `<figure class="qr"><div role="img" aria-label="${e(t.qrLabel)}">${options.qrSvg}</div><figcaption>${e(t.scan)}</figcaption></figure>` : ""}
  ${p.paymentUri ? `<p><a class="button" id="open-in-wallet" href="${e(p.paymentUri)}">${e(t.openInWallet)}</a></p>` : ""}
</section>`);
  }
  if (waiting && p.paymentMethod === "card" && p.checkoutUrl) {
    body.push(
      `<p><a class="button primary" id="pay-with-card" href="${e(p.checkoutUrl)}" rel="noopener">${e(t.payWithCard)}</a></p>`,
    );
  }
  if (p.status === "pending") {
    body.push(
      `<p>${e(t.expiresIn)} <time id="countdown" datetime="${e(p.expiresAt)}">${e(p.expiresAt)}</time></p>`,
    );
  }
  if (p.status === "failed") body.push(`<p id="failed-contact">${e(t.failedContact)}</p>`);
  if (p.receipt) {
    body.push(
      `<p><a class="button" id="receipt-link" href="/pay/${id}/receipt?lang=${lang}">${e(t.viewReceipt)}</a></p>`,
    );
  }
  if (p.returnUrl && RETURN_ON.has(p.status)) {
    body.push(
      `<p><a class="button" id="return" href="${e(p.returnUrl)}" rel="noopener">${e(t.returnToMerchant)}</a></p>`,
    );
  }

  const main = `<main id="payment" data-payment-id="${e(p.id)}" data-status="${e(p.status)}"${options.events ? ` data-events="/pay/${id}/events"` : ""}${p.refund ? ` data-refunded="${e(p.refund.refunded)}"` : ""}>
<h1 id="title">${e(title)}</h1>
${body.join("\n")}
</main>`;
  return renderShell({
    lang,
    title,
    nonce: options.nonce,
    merchant: p.merchant,
    path: `/pay/${encodeURIComponent(p.id)}`,
    query: options.query ?? new URLSearchParams(),
    main,
    scriptData: t.script,
  });
}

/**
 * The one-click button: hidden until the script finds an injected wallet (window.ethereum). Only
 * for a pending crypto payment on a real network; what the script sends is in data attributes.
 */
function walletButton(p: PublicPayment, t: Messages): string {
  if (p.status !== "pending" || !p.network || !p.receivingAddress) return "";
  if (p.tokenSymbol !== NATIVE_TOKEN && !p.tokenAddress) return "";
  const e = escapeHtml;
  const token = p.tokenAddress ? ` data-token-address="${e(p.tokenAddress)}"` : "";
  // What a wallet that does not know the network needs to add it (EIP-3085), when the operator names a public endpoint.
  const add = p.network.walletRpcUrl
    ? ` data-wallet-rpc-url="${e(p.network.walletRpcUrl)}"${p.network.explorerUrl ? ` data-explorer-url="${e(p.network.explorerUrl)}"` : ""}`
    : "";
  return `<div class="wallet"><button type="button" class="primary" id="pay-with-wallet" hidden data-chain-id="${e(String(p.network.chainId))}" data-network-name="${e(p.network.name)}" data-receiving-address="${e(p.receivingAddress)}" data-units="${e(p.units)}"${token}${add}>${e(t.payWithWallet)}</button>
  <p id="wallet-status" role="status" aria-live="polite"></p></div>`;
}

/**
 * A payment payable on several networks (D22): links to the page on each (plain links, so the
 * choice works without the script), the one shown marked current. The first transfer on any of
 * them pays it; a later one on another lands in the merchant's inbox and can be sent back. The
 * links keep the query's other parameters (lang), as the language switch keeps the network.
 */
function networkChoice(p: PublicPayment, t: Messages, query: URLSearchParams): string {
  if (p.choices.length < 2) return "";
  const e = escapeHtml;
  const path = `/pay/${encodeURIComponent(p.id)}`;
  const links = p.choices.map((choice) => {
    const current = choice.id === p.network?.id ? ` aria-current="true"` : "";
    return `<li><a href="${e(hrefWith(path, query, "network", choice.id))}"${current}>${e(choice.name)} (${e(t.chainId(String(choice.chainId)))})</a></li>`;
  });
  return `<nav aria-labelledby="networks-heading" id="networks"><p id="networks-heading">${e(t.otherNetworks)}</p><ul>${links.join("")}</ul><p>${e(t.sendOnce)}</p></nav>`;
}
