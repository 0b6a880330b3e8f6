import escapeHtml from "escape-html";
import { formatDateTime, formatDecimal, type Lang, MESSAGES } from "./i18n.ts";
import { renderShell } from "./layout.ts";
import type { PublicPayment } from "./public-payment.ts";

// The receipt of a paid payment (D25, `/pay/{id}/receipt`) and the pages for what has none: a
// payment not paid yet, a payment that does not exist. All printable (page.css @media print).

interface Options {
  nonce: string;
  lang: Lang;
  query?: URLSearchParams;
}

export function renderReceiptPage(p: PublicPayment, options: Options): string | null {
  const receipt = p.receipt;
  if (!receipt) return null;
  const e = escapeHtml;
  const t = MESSAGES[options.lang];
  const row = (label: string, value: string, id?: string) =>
    `<div class="fact"${id ? ` id="${id}"` : ""}><dt>${e(label)}</dt><dd>${value}</dd></div>`;
  const facts = [
    row(t.merchant, e(p.merchant.name), "receipt-merchant"),
    row(
      t.amount,
      `<span id="receipt-amount">${e(formatDecimal(options.lang, p.amount))}</span> ${e(p.tokenSymbol)}`,
    ),
  ];
  if (p.paymentMethod === "card") {
    facts.push(row(t.method, e(t.card), "receipt-method"));
  } else {
    facts.push(row(t.token, e(p.tokenSymbol)));
    if (p.network) facts.push(row(t.network, e(p.network.name), "receipt-network"));
  }
  if (receipt.txHash) {
    const hash = e(receipt.txHash);
    const shown = receipt.txUrl
      ? `<a href="${e(receipt.txUrl)}" rel="noopener noreferrer" data-tx-hash="${hash}">${hash}</a>`
      : `<code data-tx-hash="${hash}">${hash}</code>`;
    facts.push(row(t.transaction, shown, "receipt-tx"));
  }
  facts.push(
    row(
      t.time,
      `<time datetime="${e(receipt.paidAt)}">${e(formatDateTime(options.lang, receipt.paidAt))}</time>`,
      "receipt-time",
    ),
  );
  if (receipt.payerAddress)
    facts.push(row(t.payer, `<code>${e(receipt.payerAddress)}</code>`, "receipt-payer"));
  facts.push(row(t.paymentId, `<code>${e(p.id)}</code>`, "receipt-id"));

  const title = `${t.receiptTitle} — ${p.merchant.name}`;
  const main = `<main id="receipt" data-payment-id="${e(p.id)}">
<h1>${e(t.receiptTitle)}</h1>
<dl class="receipt">${facts.join("\n")}</dl>
<p class="actions"><button type="button" id="print-receipt" hidden>${e(t.print)}</button>
<a class="button" id="back-to-payment" href="/pay/${e(encodeURIComponent(p.id))}?lang=${options.lang}">${e(t.backToPayment)}</a></p>
</main>`;
  return renderShell({
    lang: options.lang,
    title,
    nonce: options.nonce,
    merchant: p.merchant,
    path: `/pay/${encodeURIComponent(p.id)}/receipt`,
    query: options.query ?? new URLSearchParams(),
    main,
  });
}

/** A payment not paid (yet): no receipt, a way back to its page. */
export function renderNoReceiptPage(p: PublicPayment, options: Options): string {
  const e = escapeHtml;
  const t = MESSAGES[options.lang];
  return renderShell({
    lang: options.lang,
    title: t.receiptTitle,
    nonce: options.nonce,
    merchant: p.merchant,
    path: `/pay/${encodeURIComponent(p.id)}/receipt`,
    query: options.query ?? new URLSearchParams(),
    main: `<main id="no-receipt"><h1>${e(t.receiptTitle)}</h1><p>${e(t.receiptNotReady)}</p>
<p><a class="button" id="back-to-payment" href="/pay/${e(encodeURIComponent(p.id))}?lang=${options.lang}">${e(t.backToPayment)}</a></p></main>`,
  });
}

export function renderNotFoundPage(lang: Lang = "en"): string {
  const t = MESSAGES[lang];
  return `<!doctype html>
<html lang="${lang}">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(t.notFoundTitle)}</title><link rel="stylesheet" href="/pay/assets/page.css"></head>
<body><main><h1>${escapeHtml(t.notFoundTitle)}</h1><p>${escapeHtml(t.notFoundText)}</p></main></body>
</html>`;
}
