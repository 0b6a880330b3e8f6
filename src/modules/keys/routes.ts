import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { ENVIRONMENTS } from "../../config.ts";
import { requireKey } from "../../platform/http/auth.ts";
import type { KeysService } from "./service.ts";

const Environment = Type.Enum(ENVIRONMENTS);

const ApiKeyView = Type.Object({
  id: Type.String({ format: "uuid" }),
  prefix: Type.String(),
  environment: Environment,
  name: Type.Union([Type.String(), Type.Null()]),
  createdAt: Type.String({ format: "date-time" }),
  lastUsedAt: Type.Union([Type.String({ format: "date-time" }), Type.Null()]),
  revokedAt: Type.Union([Type.String({ format: "date-time" }), Type.Null()]),
});

export const keysRoutes =
  (keys: KeysService): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.post(
      "/api/v1/keys",
      {
        schema: {
          tags: ["API keys"],
          summary: "Create an API key for the caller's workspace (the full key is shown only here)",
          security: [{ apiKey: [] }],
          body: Type.Object(
            {
              environment: Type.Optional(Environment),
              name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
            },
            { additionalProperties: false },
          ),
          response: {
            201: Type.Object({
              apiKey: Type.Object({
                id: Type.String(),
                key: Type.String(),
                prefix: Type.String(),
                environment: Environment,
                name: Type.Union([Type.String(), Type.Null()]),
                createdAt: Type.String(),
              }),
            }),
          },
        },
      },
      async (request, reply) => {
        const principal = requireKey(request);
        const body = request.body ?? {};
        const apiKey = await keys.create(
          principal.workspaceId,
          principal.environment,
          body.environment ?? principal.environment,
          body.name ?? null,
        );
        return reply.status(201).send({ apiKey });
      },
    );

    app.get(
      "/api/v1/keys",
      {
        schema: {
          tags: ["API keys"],
          summary: "List the API keys of the caller's workspace and environment (no secrets)",
          security: [{ apiKey: [] }],
          response: { 200: Type.Object({ apiKeys: Type.Array(ApiKeyView) }) },
        },
      },
      async (request) => {
        const principal = requireKey(request);
        return { apiKeys: await keys.list(principal.workspaceId, principal.environment) };
      },
    );

    app.delete(
      "/api/v1/keys/:id",
      {
        schema: {
          tags: ["API keys"],
          summary: "Revoke an API key; it answers 401 at once",
          security: [{ apiKey: [] }],
          params: Type.Object({ id: Type.String() }),
          response: { 200: Type.Object({ success: Type.Literal(true) }) },
        },
      },
      async (request) => {
        const principal = requireKey(request);
        await keys.revoke(principal.workspaceId, principal.environment, request.params.id);
        return { success: true as const };
      },
    );
  };
