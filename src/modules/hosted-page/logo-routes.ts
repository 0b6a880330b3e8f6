import type { FastifyPluginAsync } from "fastify";
import { sendStoredImage } from "../../platform/http/cached-image.ts";
import { pageSecurityHeaders } from "../../platform/http/page-security.ts";
import type { PaymentsService } from "../payments/service.ts";
import type { BrandingService } from "../workspaces/branding.ts";

// {base_url}/pay/<payment_id>/logo: the logo of the payment's own workspace (never another's),
// public like the page that shows it. Its sha256 is its ETag; the page's URL carries a prefix of
// it (`?v=`), so five minutes of caching never shows an old logo after a change. The payment's
// workspace comes from the payments service and its logo from branding: each module its own tables.
export const hostedPageLogoRoutes =
  (payments: PaymentsService, branding: BrandingService): FastifyPluginAsync =>
  async (app) => {
    app.get<{ Params: { id: string } }>(
      "/pay/:id/logo",
      { config: { auth: "none" }, schema: { hide: true } },
      async (request, reply) => {
        pageSecurityHeaders(reply, { formAction: "'none'" });
        const payment = await payments.forPayer(request.params.id);
        const logo = payment ? await branding.logo(payment.workspace_id) : undefined;
        if (!logo)
          return reply.status(404).header("cache-control", "no-store").send({ error: "Logo not found" });
        return sendStoredImage(request, reply, logo, "public, max-age=300");
      },
    );
  };
