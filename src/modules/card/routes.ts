import type { FastifyPluginAsync } from "fastify";
import { Type } from "typebox";
import type { CardWebhooks } from "./service.ts";

// POST /api/webhooks/card: called by the provider, not by merchants (no API key). The signature
// covers the exact bytes sent, so this route reads its body raw, in a scope of its own.
export const cardWebhookRoutes =
  (webhooks: CardWebhooks): FastifyPluginAsync =>
  async (app) => {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser("*", { parseAs: "buffer", bodyLimit: 1024 * 1024 }, (_request, body, done) => {
      done(null, body);
    });
    app.post(
      "/api/webhooks/card",
      {
        config: { auth: "none" },
        schema: {
          tags: ["Card provider"],
          summary: "Inbound events of the card checkout provider (signed with its Stripe-Signature header)",
          hide: false,
          security: [{ cardSignature: [] }],
          response: {
            200: Type.Object({
              received: Type.Literal(true),
              duplicate: Type.Optional(Type.Literal(true, { description: "An event already received" })),
            }),
          },
        },
      },
      async (request) => {
        const header = request.headers["stripe-signature"];
        const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
        return webhooks.receive(body, Array.isArray(header) ? header[0] : header);
      },
    );
  };
