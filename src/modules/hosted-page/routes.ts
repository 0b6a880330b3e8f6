import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { LRUCache } from "lru-cache";
import QRCode from "qrcode";
import type { AppContext } from "../../context.ts";
import { pageSecurityHeaders } from "../../platform/http/page-security.ts";
import type { PaymentsService } from "../payments/service.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import { negotiateLang } from "./i18n.ts";
import { payerView } from "./loader.ts";
import { renderNoReceiptPage, renderNotFoundPage, renderReceiptPage } from "./receipt-render.ts";
import { renderPaymentPage } from "./render.ts";

// {base_url}/pay/<payment_id>: public (no API key), for both rails. Strict CSP with a nonce for
// our one script, no framing, no referrer; assets served by us, nothing from other origins.

// A Map, not an object: a path segment such as "constructor" or "__proto__" must find nothing.
const ASSETS = new Map([
  [
    "page.js",
    {
      type: "text/javascript; charset=utf-8",
      body: readFileSync(new URL("./assets/page.js", import.meta.url)),
    },
  ],
  [
    "page.css",
    { type: "text/css; charset=utf-8", body: readFileSync(new URL("./assets/page.css", import.meta.url)) },
  ],
]);

// A payment's URI never changes, and encoding it (segment optimisation plus the standard's mask
// selection) costs ~2 ms: pages viewed again (reloads, several payers' tabs) reuse the SVG. Bounded:
// ~4 KB per entry.
const qrSvgCache = new LRUCache<string, string>({ max: 2_000 });

async function qrSvgOf(paymentUri: string): Promise<string> {
  const cached = qrSvgCache.get(paymentUri);
  if (cached !== undefined) return cached;
  const svg = await QRCode.toString(paymentUri, { type: "svg", margin: 1, errorCorrectionLevel: "M" });
  qrSvgCache.set(paymentUri, svg);
  return svg;
}

function securityHeaders(reply: FastifyReply, nonce?: string): void {
  pageSecurityHeaders(reply, { ...(nonce ? { nonce } : {}), formAction: "'none'" });
}

/** The request's query, kept by the page's links (language switch, network choice). */
const queryOf = (url: string): URLSearchParams => new URLSearchParams(url.split("?")[1] ?? "");

export const hostedPageRoutes =
  (ctx: AppContext, payments: PaymentsService, workspaces: WorkspacesService): FastifyPluginAsync =>
  async (app) => {
    const load = payerView(ctx, payments, workspaces);

    /**
     * What the page and its receipt share: the payment, the language, a fresh nonce and the
     * page's headers; null once the not-found page is sent.
     */
    const openPage = async (
      request: FastifyRequest<{ Params: { id: string }; Querystring: { lang?: string } }>,
      reply: FastifyReply,
      network?: string,
    ) => {
      const payment = await load(request.params.id, network);
      const lang = negotiateLang(request.headers["accept-language"], request.query.lang);
      const nonce = randomBytes(16).toString("base64");
      securityHeaders(reply, nonce);
      reply
        .header("cache-control", "no-store")
        .header("vary", "accept-language")
        .type("text/html; charset=utf-8");
      if (!payment) {
        reply.status(404).send(renderNotFoundPage(lang));
        return null;
      }
      return { payment, lang, nonce, query: queryOf(request.url) };
    };

    app.get<{ Params: { id: string }; Querystring: { network?: string; lang?: string } }>(
      "/pay/:id",
      { config: { auth: "none" }, schema: { hide: true } },
      async (request, reply) => {
        const page = await openPage(request, reply, request.query.network);
        if (!page) return reply;
        const { payment, ...options } = page;
        const qrSvg = payment.paymentUri ? await qrSvgOf(payment.paymentUri) : null;
        // The script listens to the event stream only where the service serves one (else it polls).
        const events = app.hasRoute({ method: "GET", url: "/pay/:id/events" });
        return reply.send(renderPaymentPage(payment, { ...options, qrSvg, events }));
      },
    );

    // The receipt (D25): once paid, and still after the payment is final; before, a 404 that
    // says so and links back to the payment.
    app.get<{ Params: { id: string }; Querystring: { lang?: string } }>(
      "/pay/:id/receipt",
      { config: { auth: "none" }, schema: { hide: true } },
      async (request, reply) => {
        const page = await openPage(request, reply);
        if (!page) return reply;
        const { payment, ...options } = page;
        const receipt = renderReceiptPage(payment, options);
        if (!receipt) return reply.status(404).send(renderNoReceiptPage(payment, options));
        return reply.send(receipt);
      },
    );

    app.get<{ Params: { id: string } }>(
      "/pay/:id/status",
      { config: { auth: "none" }, schema: { hide: true } },
      async (request, reply) => {
        // The page polls this every few seconds where it has no stream: the payment's row alone,
        // not the page's other reads (the merchant's branding, the network's facts).
        const payment = await payments.forPayer(request.params.id);
        securityHeaders(reply);
        reply.header("cache-control", "no-store");
        if (!payment) return reply.status(404).send({ error: "Payment not found" });
        // Only what the page itself shows.
        return { id: payment.id, status: payment.status, expiresAt: payment.expires_at.toISOString() };
      },
    );

    app.get<{ Params: { file: string } }>(
      "/pay/assets/:file",
      { config: { auth: "none" }, schema: { hide: true } },
      async (request, reply) => {
        const asset = ASSETS.get(request.params.file);
        securityHeaders(reply);
        if (!asset) return reply.status(404).send({ error: "Not found" });
        return reply.header("cache-control", "public, max-age=3600").type(asset.type).send(asset.body);
      },
    );
  };
