import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { ALL_EVENTS, EVENT_TYPES } from "../../domain/events.ts";
import { requireKey } from "../../platform/http/auth.ts";
import { OffsetPage } from "../../platform/http/schemas.ts";
import { documentedBodyOnly } from "../../platform/http/validation.ts";
import type { WebhooksService } from "./service.ts";

const Webhook = Type.Object({
  id: Type.Integer(),
  url: Type.String(),
  events: Type.Array(Type.String()),
  active: Type.Boolean(),
  created_at: Type.String({ format: "date-time" }),
});

const Delivery = Type.Object({
  id: Type.String({ description: "The X-Service-Delivery value; stays the same across retries" }),
  event: Type.String(),
  status: Type.Enum(["pending", "delivered", "failed"]),
  attempts: Type.Integer(),
  lastResponseCode: Type.Union([Type.Integer(), Type.Null()]),
  lastError: Type.Union([Type.String(), Type.Null()]),
  nextAttemptAt: Type.Union([Type.String(), Type.Null()]),
  createdAt: Type.String(),
  deliveredAt: Type.Union([Type.String(), Type.Null()]),
});

const WebhookId = Type.Object({ id: Type.String() });

export const webhooksRoutes =
  (webhooks: WebhooksService): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.post(
      "/api/v1/webhooks",
      {
        validatorCompiler: documentedBodyOnly,
        schema: {
          tags: ["Webhooks"],
          summary: "Register a webhook endpoint (the signing secret is returned only here)",
          security: [{ apiKey: [] }],
          body: Type.Object({
            url: Type.String({
              format: "uri",
              description:
                "https in live, http or https in sandbox; public addresses only (private, loopback and link-local: 400 blocked destination) unless the operator sets WEBHOOK_ALLOW_PRIVATE",
            }),
            events: Type.Array(Type.Enum([...EVENT_TYPES, ALL_EVENTS]), { minItems: 1 }),
          }),
          response: {
            201: Type.Object({
              webhook: Type.Intersect([Webhook, Type.Object({ signingSecret: Type.String() })]),
            }),
          },
        },
      },
      async (request, reply) =>
        reply.status(201).send({ webhook: await webhooks.register(requireKey(request), request.body) }),
    );

    app.get(
      "/api/v1/webhooks",
      {
        schema: {
          tags: ["Webhooks"],
          summary: "List the webhook endpoints of the key's environment",
          security: [{ apiKey: [] }],
          response: { 200: Type.Object({ webhooks: Type.Array(Webhook) }) },
        },
      },
      async (request) => ({ webhooks: await webhooks.list(requireKey(request)) }),
    );

    app.delete(
      "/api/v1/webhooks/:id",
      {
        schema: {
          tags: ["Webhooks"],
          summary: "Delete a webhook endpoint; its queued deliveries stop",
          security: [{ apiKey: [] }],
          params: WebhookId,
          response: { 200: Type.Object({ success: Type.Literal(true) }) },
        },
      },
      async (request) => {
        await webhooks.remove(requireKey(request), request.params.id);
        return { success: true as const };
      },
    );

    app.post(
      "/api/v1/webhooks/:id/rotate-secret",
      {
        schema: {
          tags: ["Webhooks"],
          summary: "Replace the signing secret (the new one is returned only here)",
          description:
            "For 24 h the replaced secret signs too: `webhook-signature` carries both `v1,` signatures, the new one first; the X-Service-Signature headers use the new secret at once. Rotating again within the 24 h drops the oldest secret. 404 for a webhook of another workspace or environment.",
          security: [{ apiKey: [] }],
          params: WebhookId,
          response: {
            200: Type.Object({
              webhook: Type.Object({ id: Type.Integer(), signingSecret: Type.String() }),
            }),
          },
        },
      },
      async (request) => ({
        webhook: await webhooks.rotateSecret(requireKey(request), request.params.id),
      }),
    );

    app.get(
      "/api/v1/webhooks/:id/deliveries",
      {
        schema: {
          tags: ["Webhooks"],
          summary: "Delivery log of a webhook endpoint, newest first",
          security: [{ apiKey: [] }],
          params: WebhookId,
          querystring: Type.Object(OffsetPage),
          response: { 200: Type.Object({ deliveries: Type.Array(Delivery), total: Type.Integer() }) },
        },
      },
      async (request) => webhooks.deliveries(requireKey(request), request.params.id, request.query),
    );

    app.post(
      "/api/v1/webhooks/:id/deliveries/:deliveryId/retry",
      {
        schema: {
          tags: ["Webhooks"],
          summary: "Send a delivery again now (same delivery id)",
          security: [{ apiKey: [] }],
          params: Type.Object({ id: Type.String(), deliveryId: Type.String() }),
          response: { 202: Type.Object({ delivery: Delivery }) },
        },
      },
      async (request, reply) =>
        reply.status(202).send({
          delivery: await webhooks.retry(requireKey(request), request.params.id, request.params.deliveryId),
        }),
    );
  };
