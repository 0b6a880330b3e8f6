import escapeHtml from "escape-html";
import { FINAL_STATUSES, isFinal, type PaymentStatus } from "../../domain/payment-state.ts";
import type { PublicPayment } from "./public-payment.ts";

// Server-rendered hosted payment page. Every user-supplied string goes through escapeHtml; the
// only script is our own file, allowed by a per-response nonce; no external resources.

const TITLES: Record<PaymentStatus, string> = {
  pending: "Waiting for payment",
  detected: "Payment detected",
  confirmed: "Payment confirmed",
  forwarded: "Payment complete",
  failed: "Payment failed",
  expired: "Payment expired",
  cancelled: "Payment cancelled",
};

/** Over, and the payer may go back: a failed payment asks them to contact the merchant instead. */
const RETURN_ON: ReadonlySet<PaymentStatus> = new Set(FINAL_STATUSES.filter((status) => status !== "failed"));

export function renderPaymentPage(
  p: PublicPayment,
  options: { nonce: string; qrSvg: string | null },
): string {
  const e = escapeHtml;
  const title = TITLES[p.status] ?? "Payment";
  const waiting = !isFinal(p.status);
  const body: string[] = [];

  body.push(`<p class="amount"><span id="amount">${e(p.amount)}</span> <span>${e(p.tokenSymbol)}</span></p>`);
  if (p.description) body.push(`<p class="description" id="description">${e(p.description)}</p>`);
  if (p.environment === "sandbox") body.push(`<p class="badge">Sandbox — no real money moves</p>`);
  if (p.refund)
    body.push(
      p.refund.full
        ? `<p class="refund" id="refund"><strong>Refunded</strong></p>`
        : `<p class="refund" id="refund">Partially refunded: ${e(p.refund.refunded)} of ${e(p.refund.received)} ${e(p.tokenSymbol)}</p>`,
    );

  if (waiting && p.paymentMethod === "crypto" && p.receivingAddress) {
    body.push(`<section aria-labelledby="send-heading">
  <h2 id="send-heading">Send exactly ${e(p.amount)} ${e(p.tokenSymbol)}</h2>
  ${p.network ? `<p>Network: <strong id="network">${e(p.network.name)}</strong> (chain id ${e(String(p.network.chainId))})</p>` : ""}
  ${networkChoice(p)}
  <label for="address">To this address</label>
  <div class="copy-row"><input id="address" readonly value="${e(p.receivingAddress)}" aria-label="Receiving address">
  <button type="button" id="copy" data-copy="${e(p.receivingAddress)}">Copy</button></div>
  <p id="copy-status" role="status" aria-live="polite"></p>
  ${options.qrSvg ? `<figure class="qr"><div role="img" aria-label="QR code of the payment request">${options.qrSvg}</div><figcaption>Scan with a wallet</figcaption></figure>` : ""}
</section>`);
  }
  if (waiting && p.paymentMethod === "card" && p.checkoutUrl) {
    body.push(
      `<p><a class="button primary" id="pay-with-card" href="${e(p.checkoutUrl)}" rel="noopener">Pay with card</a></p>`,
    );
  }
  if (p.status === "pending") {
    body.push(`<p>Expires in <time id="countdown" datetime="${e(p.expiresAt)}">${e(p.expiresAt)}</time></p>`);
  }
  if (p.status === "failed")
    body.push("<p>The payment could not be completed. Please contact the merchant.</p>");
  if (p.returnUrl && RETURN_ON.has(p.status)) {
    body.push(
      `<p><a class="button" id="return" href="${e(p.returnUrl)}" rel="noopener">Return to merchant</a></p>`,
    );
  }

  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<link rel="icon" href="data:,">
<title>${e(title)}</title>
<link rel="stylesheet" href="/pay/assets/page.css">
</head>
<body>
<main id="payment" data-payment-id="${e(p.id)}" data-status="${e(p.status)}">
<h1 id="title">${e(title)}</h1>
<p class="status">Status: <strong id="status">${e(p.status)}</strong></p>
${body.join("\n")}
</main>
<script nonce="${e(options.nonce)}" src="/pay/assets/page.js" defer></script>
</body>
</html>`;
}

/**
 * A payment payable on several networks (D22): links to the page on each (plain links, so the
 * choice works without the script), the one shown marked current. The first transfer on any of
 * them pays it; a later one on another lands in the merchant's inbox and can be sent back.
 */
function networkChoice(p: PublicPayment): string {
  if (p.choices.length < 2) return "";
  const e = escapeHtml;
  const links = p.choices.map((choice) => {
    const current = choice.id === p.network?.id ? ` aria-current="true"` : "";
    return `<li><a href="/pay/${e(encodeURIComponent(p.id))}?network=${e(encodeURIComponent(choice.id))}"${current}>${e(choice.name)} (chain id ${e(String(choice.chainId))})</a></li>`;
  });
  return `<nav aria-labelledby="networks-heading" id="networks"><p id="networks-heading">Pay on another network:</p><ul>${links.join("")}</ul><p>Send once, on one network only.</p></nav>`;
}

export function renderNotFoundPage(): string {
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Payment not found</title><link rel="stylesheet" href="/pay/assets/page.css"></head>
<body><main><h1>Payment not found</h1><p>Check the link you were given, or contact the merchant.</p></main></body>
</html>`;
}
