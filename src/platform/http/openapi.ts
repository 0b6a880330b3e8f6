import swagger from "@fastify/swagger";
import swaggerUi from "@fastify/swagger-ui";
import type { FastifyInstance, FastifySchema, RouteOptions } from "fastify";
import { Type } from "typebox";
import { documentPath, OPERATION_IDS } from "./operations.ts";

// The OpenAPI document (/openapi.json), made from the routes' TypeBox schemas, and its reference
// page (/docs), which is public like its static assets. What every route shares is written here
// once, into the document only (what a route answers is its own schema's business): its
// operation id (operations.ts), the error body every error is answered with (error-handler.ts),
// and the security of the routes that are neither key- nor admin-authenticated.

/** Every error, as error-handler.ts answers it: the message, a stable code for some, and context fields. */
const ERROR_BODY = Type.Object(
  {
    error: Type.String({ description: "What went wrong, naming the field or the rule" }),
    code: Type.Optional(Type.String({ description: "A stable code clients branch on (payout errors)" })),
  },
  {
    additionalProperties: true,
    description:
      "An error; context fields (failStreak, circuitBreaker, available…) where docs/api.md names them",
  },
);

/** Security of the routes by their `config.auth` where the route's schema names none. */
const SECURITY_BY_AUTH: Record<string, Array<Record<string, string[]>>> = {
  session: [{ dashboardSession: [] }],
};

export async function registerOpenApi(
  http: FastifyInstance,
  publicBaseUrl: string,
  options: { sessionCookie: string },
): Promise<void> {
  await http.register(swagger, {
    transform: ({ schema, url, route }) => ({ schema: documented(schema, url, route), url }),
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
          dashboardSession: {
            type: "apiKey",
            in: "cookie",
            name: options.sessionCookie,
            description: "A dashboard session (sign-in); state changes also carry the session's CSRF token",
          },
          cardSignature: {
            type: "apiKey",
            in: "header",
            name: "Stripe-Signature",
            description: "The card provider's signature of an inbound event",
          },
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

/** A route's schema as the document shows it: its operation id, its error responses, its security. */
function documented(schema: FastifySchema | undefined, url: string, route: RouteOptions): FastifySchema {
  const base: FastifySchema & { operationId?: string; security?: unknown; hide?: boolean } = schema ?? {};
  if (base.hide) return base;
  const method = (Array.isArray(route.method) ? route.method[0] : route.method) ?? "GET";
  const operationId = base.operationId ?? OPERATION_IDS[`${method.toUpperCase()} ${documentPath(url)}`];
  const auth = (route.config as { auth?: string } | undefined)?.auth;
  const security = base.security ?? (auth ? SECURITY_BY_AUTH[auth] : undefined);
  const response = { "4xx": ERROR_BODY, "5xx": ERROR_BODY, ...(base.response as object | undefined) };
  const querystring = withDefaultsOptional(base.querystring);
  return {
    ...base,
    ...(operationId ? { operationId } : {}),
    ...(security ? { security } : {}),
    ...(querystring ? { querystring } : {}),
    response,
  };
}

/**
 * A query parameter with a default (`limit`, `offset`, `page`) is required by its TypeBox schema
 * only because the validator fills it in; a caller may leave it out, and the document says so.
 */
function withDefaultsOptional(schema: unknown): unknown {
  if (typeof schema !== "object" || schema === null) return schema;
  const { properties, required } = schema as { properties?: Record<string, object>; required?: string[] };
  if (!properties || !required) return schema;
  const left = required.filter((name) => !(properties[name] && "default" in properties[name]));
  return { ...schema, required: left };
}
