import { describe, expect, it } from "vitest";
import { LANGS, type Lang, MESSAGES } from "../../src/modules/hosted-page/i18n.ts";
import type { PublicPayment } from "../../src/modules/hosted-page/public-payment.ts";
import {
  renderNoReceiptPage,
  renderNotFoundPage,
  renderReceiptPage,
} from "../../src/modules/hosted-page/receipt-render.ts";
import { renderPaymentPage } from "../../src/modules/hosted-page/render.ts";

// The hosted page and receipt as rendered for constructed payments: payer words in every language,
// no internal status name, exact localized amounts, the merchant escaped, the wallet's data.

const RECEIVER = "0x1111111111111111111111111111111111111111";
const TOKEN = "0x2222222222222222222222222222222222222222";
const HASH = `0x${"ab".repeat(32)}`;
const PAYER = "0x3333333333333333333333333333333333333333";

function payment(overrides: Partial<PublicPayment> = {}): PublicPayment {
  return {
    id: "pay_123",
    status: "pending",
    paymentMethod: "crypto",
    environment: "live",
    amount: "1234.5",
    tokenSymbol: "USDC",
    description: null,
    receivingAddress: RECEIVER,
    checkoutUrl: null,
    returnUrl: "https://shop.example/back",
    expiresAt: "2026-03-05T10:20:30.000Z",
    paymentUri: `ethereum:${TOKEN}@8453/transfer?address=${RECEIVER}&uint256=1234500000`,
    network: {
      id: "base",
      name: "Base",
      chainId: 8453,
      explorerUrl: "https://basescan.org",
      walletRpcUrl: null,
    },
    choices: [],
    merchant: { name: "Acme", logoUrl: null, brandColor: null },
    units: "1234500000",
    decimals: 6,
    tokenAddress: TOKEN,
    receipt: null,
    refund: null,
    ...overrides,
  };
}

const paidReceipt = {
  txHash: HASH,
  txUrl: `https://basescan.org/tx/${HASH}`,
  paidAt: "2026-03-05T10:20:30.000Z",
  payerAddress: PAYER,
};

const render = (p: PublicPayment, lang: Lang = "en") =>
  renderPaymentPage(p, { nonce: "n0nce", qrSvg: null, lang });
const text = (html: string) =>
  html
    .replace(/<script[\s\S]*?<\/script>/g, " ")
    .replace(/<[^>]+>/g, " ")
    .replace(/\s+/g, " ");
const h1 = (html: string) => /<h1[^>]*>([^<]*)<\/h1>/.exec(html)?.[1];

const STATES: [string, Partial<PublicPayment>, keyof typeof MESSAGES.en][] = [
  ["pending", { status: "pending" }, "waiting"],
  ["detected", { status: "detected", receipt: paidReceipt }, "confirming"],
  ["confirmed", { status: "confirmed", receipt: paidReceipt }, "confirming"],
  ["forwarded", { status: "forwarded", receipt: paidReceipt }, "paid"],
  ["expired", { status: "expired" }, "expired"],
  ["cancelled", { status: "cancelled" }, "cancelled"],
  ["failed", { status: "failed" }, "failed"],
  [
    "refunded",
    {
      status: "forwarded",
      receipt: paidReceipt,
      refund: { refunded: "1234.5", received: "1234.5", full: true },
    },
    "refunded",
  ],
];

describe("payer words", () => {
  for (const lang of LANGS) {
    it.each(STATES)(`${lang}: %s`, (_name, overrides, key) => {
      const html = render(payment(overrides), lang);
      const expected = MESSAGES[lang][key];
      expect(h1(html)).toBe(expected);
      expect(html).toContain(`<title>${expected}</title>`);
      expect(html).toContain(`<html lang="${lang}">`);
      // The internal status stays for the script, never as words on screen.
      expect(html).toContain(`data-status="${overrides.status}"`);
      const visible = text(html).toLowerCase();
      for (const word of ["forwarded", "detected", "confirmed", "pending", "status:"])
        expect(visible).not.toContain(word);
    });
  }

  it("English words are the payer's", () => {
    expect(h1(render(payment()))).toBe("Waiting for your payment");
    expect(h1(render(payment({ status: "detected" })))).toBe("Payment received, confirming…");
    expect(h1(render(payment({ status: "forwarded" })))).toBe("Paid");
    const failed = render(payment({ status: "failed" }));
    expect(h1(failed)).toBe("Payment could not be completed");
    expect(text(failed)).toContain("Please contact the merchant");
  });

  it("a partial refund keeps Paid and says how much went back", () => {
    const html = render(
      payment({ status: "forwarded", refund: { refunded: "7.50", received: "30.00", full: false } }),
    );
    expect(h1(html)).toBe("Paid");
    expect(html).toContain('<p class="refund" id="refund">Refunded 7.50 USDC of 30.00 USDC</p>');
  });
});

describe("amounts", () => {
  it("are localized exactly", () => {
    expect(render(payment(), "en")).toContain('<span id="amount">1,234.5</span>');
    expect(render(payment(), "fr")).toContain('<span id="amount">1\u202f234,5</span>');
    expect(render(payment(), "de")).toContain('<span id="amount">1.234,5</span>');
    const eth = payment({ amount: "0.123456789012345678", tokenSymbol: "ETH", tokenAddress: null });
    expect(render(eth, "en")).toContain('<span id="amount">0.123456789012345678</span>');
    expect(render(eth, "fr")).toContain('<span id="amount">0,123456789012345678</span>');
  });
});

describe("merchant identity", () => {
  it("shows the name, escaped", () => {
    const html = render(payment({ merchant: { name: `<b>"Evil"</b>`, logoUrl: null, brandColor: null } }));
    expect(html).toContain("Pay &lt;b&gt;&quot;Evil&quot;&lt;/b&gt;");
    expect(html).not.toContain("<b>");
    expect(html).not.toContain("<img");
    expect(html).not.toContain("<style");
  });

  it("shows the logo with the name as its alt text", () => {
    const html = render(
      payment({ merchant: { name: "A&B", logoUrl: "/pay/pay_123/logo", brandColor: null } }),
    );
    expect(html).toContain('<img class="logo" src="/pay/pay_123/logo" alt="A&amp;B"');
  });

  it("sets the brand colour and a contrasting text colour in a nonce'd style element", () => {
    const dark = render(payment({ merchant: { name: "A", logoUrl: null, brandColor: "#1f3fbf" } }));
    expect(dark).toContain('<style nonce="n0nce">:root{--brand:#1f3fbf;--on-brand:#ffffff}</style>');
    const light = render(payment({ merchant: { name: "A", logoUrl: null, brandColor: "#ffcc00" } }));
    expect(light).toContain("--on-brand:#000000");
    const bad = render(payment({ merchant: { name: "A", logoUrl: null, brandColor: "red;}</style><x>" } }));
    expect(bad).not.toContain("<style");
  });
});

describe("wallet one-click, EIP-681 link and network warning", () => {
  it("an ERC-20 payment carries the token's contract", () => {
    const html = render(payment());
    expect(html).toContain(
      `id="pay-with-wallet" hidden data-chain-id="8453" data-network-name="Base" data-receiving-address="${RECEIVER}" data-units="1234500000" data-token-address="${TOKEN}">Pay with browser wallet</button>`,
    );
    expect(html).toMatch(/id="wallet-status" role="status" aria-live="polite"/);
    expect(html).toContain(
      `<a class="button" id="open-in-wallet" href="ethereum:${TOKEN}@8453/transfer?address=${RECEIVER}&amp;uint256=1234500000">Open in a wallet app</a>`,
    );
    expect(html).toContain("Send USDC on Base only");
    expect(render(payment(), "fr")).toContain("Envoyez des USDC sur Base uniquement");
  });

  it("an ETH payment sends the value, with no token contract", () => {
    const html = render(
      payment({ tokenSymbol: "ETH", tokenAddress: null, amount: "0.5", units: "500000000000000000" }),
    );
    expect(html).toContain('data-units="500000000000000000">');
    expect(html).not.toContain("data-token-address");
  });

  it("is not offered without a real network, nor once the payment is no longer pending", () => {
    // With a public endpoint named, what a wallet needs to add the network (EIP-3085).
    const addable = render(
      payment({
        network: {
          id: "base",
          name: "Base",
          chainId: 8453,
          explorerUrl: "https://basescan.org",
          walletRpcUrl: "https://mainnet.base.org",
        },
      }),
    );
    expect(addable).toContain(
      'data-wallet-rpc-url="https://mainnet.base.org" data-explorer-url="https://basescan.org"',
    );
    expect(render(payment())).not.toContain("data-wallet-rpc-url");
    expect(render(payment({ network: null, paymentUri: null }))).not.toContain("pay-with-wallet");
    expect(render(payment({ network: null, paymentUri: null }))).not.toContain("open-in-wallet");
    expect(render(payment({ status: "detected" }))).not.toContain("pay-with-wallet");
  });

  it("hands the script its words as JSON data, not code", () => {
    const html = render(payment(), "de");
    const json = /<script type="application\/json" id="page-messages">([^<]*)<\/script>/.exec(html)?.[1];
    expect(JSON.parse(json ?? "null")).toMatchObject({ addNetwork: MESSAGES.de.script.addNetwork });
  });
});

describe("language switch", () => {
  it("links each language, keeping the other query parameters", () => {
    const html = renderPaymentPage(payment(), {
      nonce: "n",
      qrSvg: null,
      lang: "es",
      query: new URLSearchParams("network=base&lang=es"),
    });
    expect(html).toMatch(/<nav class="languages" id="languages" aria-label="Idioma">/);
    expect(html).toContain(
      'id="lang-fr" href="/pay/pay_123?network=base&amp;lang=fr" hreflang="fr" lang="fr">Français</a>',
    );
    expect(html).toContain('hreflang="es" lang="es" aria-current="true">Español</a>');
  });
});

describe("network choice", () => {
  const base = {
    id: "base",
    name: "Base",
    chainId: 8453,
    explorerUrl: "https://basescan.org",
    walletRpcUrl: null,
  };
  const polygon = {
    id: "polygon",
    name: "Polygon",
    chainId: 137,
    explorerUrl: "https://polygonscan.com",
    walletRpcUrl: null,
  };
  const links = (query: string) =>
    renderPaymentPage(payment({ network: base, choices: [base, polygon] }), {
      nonce: "n",
      qrSvg: null,
      lang: "fr",
      query: new URLSearchParams(query),
    });

  it("links each network keeping the language, as the language switch keeps the network", () => {
    const html = links("lang=fr&network=base");
    expect(html).toContain('<a href="/pay/pay_123?lang=fr&amp;network=polygon">Polygon');
    expect(html).toContain('<a href="/pay/pay_123?lang=fr&amp;network=base" aria-current="true">Base');
    // A language from Accept-Language alone is negotiated again on the next page: no ?lang= added.
    expect(links("")).toContain('<a href="/pay/pay_123?network=polygon">Polygon');
  });

  it("is not offered for a payment on one network", () => {
    expect(links("lang=fr")).toContain('id="networks"');
    expect(render(payment({ choices: [base] }))).not.toContain('id="networks"');
  });
});

describe("receipt", () => {
  it("links from the paid page", () => {
    expect(render(payment({ status: "forwarded", receipt: paidReceipt }))).toContain(
      'id="receipt-link" href="/pay/pay_123/receipt?lang=en"',
    );
    expect(render(payment())).not.toContain("receipt-link");
  });

  it("shows merchant, amount, token, network, hash, time, payer and id", () => {
    const html = renderReceiptPage(payment({ status: "forwarded", receipt: paidReceipt }), {
      nonce: "n",
      lang: "fr",
    });
    expect(html).not.toBeNull();
    const body = html ?? "";
    expect(body).toContain('<main id="receipt"');
    expect(body).toContain(
      `<a href="https://basescan.org/tx/${HASH}" rel="noopener noreferrer" data-tx-hash="${HASH}">`,
    );
    expect(body).toContain('<span id="receipt-amount">1\u202f234,5</span> USDC');
    expect(text(body)).toContain("Base");
    expect(text(body)).toContain("5 mars 2026");
    expect(body).toContain(PAYER);
    expect(body).toContain("pay_123");
    expect(body).toContain('<button type="button" id="print-receipt" hidden>Imprimer</button>');
  });

  it("for a card: method Card and no hash", () => {
    const body =
      renderReceiptPage(
        payment({
          paymentMethod: "card",
          receivingAddress: null,
          network: null,
          status: "forwarded",
          receipt: { txHash: null, txUrl: null, paidAt: "2026-03-05T10:20:30.000Z", payerAddress: null },
        }),
        { nonce: "n", lang: "en" },
      ) ?? "";
    expect(text(body)).toContain("Method Card");
    expect(body).not.toContain("data-tx-hash");
  });

  it("none before payment, a friendly page instead", () => {
    expect(renderReceiptPage(payment(), { nonce: "n", lang: "en" })).toBeNull();
    const html = renderNoReceiptPage(payment(), { nonce: "n", lang: "es" });
    expect(html).toContain("Aún no hay recibo");
    expect(html).toContain('href="/pay/pay_123?lang=es"');
  });

  it("not found page in each language", () => {
    expect(renderNotFoundPage("de")).toContain("<h1>Zahlung nicht gefunden</h1>");
    expect(renderNotFoundPage()).toContain("<h1>Payment not found</h1>");
  });
});
