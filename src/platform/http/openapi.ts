import swagger from "@fastify/swagger";
import swaggerUi from "@fastify/swagger-ui";
import type { FastifyInstance } from "fastify";

// The OpenAPI document (/openapi.json), made from the routes' TypeBox schemas, and its reference
// page (/docs), which is public like its static assets.

export async function registerOpenApi(http: FastifyInstance, publicBaseUrl: string): Promise<void> {
  await http.register(swagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "Payments, Payouts and Wallets Service",
        version: "1.0.0",
        description: "Payments on the crypto and card payment methods, payouts, wallets and signed webhooks.",
      },
      servers: [{ url: publicBaseUrl }],
      components: {
        securitySchemes: {
          apiKey: {
            type: "http",
            scheme: "bearer",
            description: "Workspace API key: svc_test_… or svc_live_…",
          },
          adminSecret: { type: "http", scheme: "bearer", description: "The operator's ADMIN_SECRET" },
        },
      },
    },
  });
  // The reference page and its static assets are public; everything else defaults to key auth.
  await http.register(async (docs) => {
    docs.addHook("onRoute", (route) => {
      route.config = { ...route.config, auth: "none" };
    });
    await docs.register(swaggerUi, { routePrefix: "/docs", uiConfig: { deepLinking: true } });
  });
}
