import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { InvalidRequest } from "../../domain/errors.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import type { WebhooksService } from "../webhooks/service.ts";
import type { Logins } from "./login.ts";
import { EnvIdParams, EnvParams, field, type PageKit, queryOf } from "./page-kit.ts";
import { stepUp } from "./step-up.ts";
import {
  EMPTY_FORM,
  type WebhookForm,
  webhookCreatedBody,
  webhookDetailBody,
  webhookRotatedBody,
  webhooksListBody,
} from "./views/webhooks.ts";

// The webhooks section under /dashboard/<env>/webhooks: the environment's registrations and the
// form that adds one (its signing secret shown once, on the answer; the current password asked
// again), a webhook's page with its delivery log (Resend), Send test event, delete and Rotate
// secret (the current password asked again; the new secret shown once, on the answer). Everything goes through WebhooksService for
// the tenant of the session and the URL, so another workspace's or environment's id is a 404.

/** Deliveries per page of the log. */
const PAGE_SIZE = 25;
/** Pages of the log one can ask for (the offset stays far below the database's limit). */
const MAX_PAGE = 999_999;

const DeliveryParams = Type.Object({
  env: Type.String({ maxLength: 16 }),
  id: Type.String({ maxLength: 64 }),
  deliveryId: Type.String({ maxLength: 64 }),
});

export const webhookPages =
  (services: { webhooks: WebhooksService; logins: Logins }, kit: PageKit): FastifyPluginAsyncTypebox =>
  async (app) => {
    const webhooks = services.webhooks;

    /** The environment's registrations and the add form (blank, or as typed with its error). */
    const showList = async (
      request: Parameters<PageKit["render"]>[0],
      reply: Parameters<PageKit["render"]>[1],
      tenant: Tenant,
      form: WebhookForm,
    ) => {
      const list = await webhooks.list(tenant);
      return kit.render(
        request,
        reply,
        tenant,
        { title: "Webhooks", section: "webhooks", path: "/webhooks" },
        (csrfToken) => webhooksListBody({ environment: tenant.environment, csrfToken, webhooks: list, form }),
      );
    };

    app.get("/dashboard/:env/webhooks", { schema: { params: EnvParams } }, async (request, reply) =>
      showList(request, reply, kit.tenantOf(request, request.params.env), EMPTY_FORM),
    );

    app.post("/dashboard/:env/webhooks", { schema: { params: EnvParams } }, async (request, reply) => {
      const tenant = kit.tenantOf(request, request.params.env);
      const form: WebhookForm = {
        url: (field(request.body, "url") ?? "").trim(),
        events: checkedEvents(request.body),
      };
      // A webhook receives every event of the environment: registered only with the current
      // password (step-up, D21).
      const refused = await stepUp(services.logins, request, reply);
      if (refused) {
        reply.status(refused.status);
        return showList(request, reply, tenant, {
          ...form,
          error: { field: "currentPassword", message: refused.message },
        });
      }
      let created: Awaited<ReturnType<WebhooksService["register"]>>;
      try {
        created = await webhooks.register(tenant, { url: form.url, events: form.events });
      } catch (err) {
        if (!(err instanceof InvalidRequest)) throw err;
        // The form again, as typed, with the service's message next to the field it is about.
        reply.status(400);
        return showList(request, reply, tenant, {
          ...form,
          error: { field: fieldOf(err.message), message: err.message },
        });
      }
      // The secret is in this answer only: never in a cookie, a URL or another page.
      reply.status(201);
      return kit.render(
        request,
        reply,
        tenant,
        { title: "Webhook added", section: "webhooks", path: "/webhooks" },
        () => webhookCreatedBody({ environment: tenant.environment, webhook: created }),
      );
    });

    /** A webhook's page at a page of its log; with a refused rotation's message when there was one. */
    const showDetail = async (
      request: Parameters<PageKit["render"]>[0],
      reply: Parameters<PageKit["render"]>[1],
      tenant: Tenant,
      id: string,
      page: number,
      rotateError?: string,
    ) => {
      const webhook = await webhooks.get(tenant, id);
      const log = await webhooks.deliveries(tenant, id, {
        limit: PAGE_SIZE,
        offset: (page - 1) * PAGE_SIZE,
      });
      return kit.render(
        request,
        reply,
        tenant,
        // The environment switch leads to the other environment's list: this id is not there.
        { title: "Webhook", section: "webhooks", path: "/webhooks" },
        (csrfToken) =>
          webhookDetailBody({
            environment: tenant.environment,
            csrfToken,
            webhook,
            log: { ...log, page, pageSize: PAGE_SIZE },
            rotateError,
          }),
      );
    };

    app.get("/dashboard/:env/webhooks/:id", { schema: { params: EnvIdParams } }, async (request, reply) =>
      showDetail(
        request,
        reply,
        kit.tenantOf(request, request.params.env),
        request.params.id,
        pageOf(queryOf(request).page),
      ),
    );

    app.post(
      "/dashboard/:env/webhooks/:id/rotate-secret",
      { schema: { params: EnvIdParams } },
      async (request, reply) => {
        const tenant = kit.tenantOf(request, request.params.env);
        // Another tenant's id is a 404 before the password is even looked at.
        await webhooks.get(tenant, request.params.id);
        // Whoever holds the secret can forge this workspace's events: step-up (D21), like adding one.
        const refused = await stepUp(services.logins, request, reply);
        if (refused) {
          reply.status(refused.status);
          return showDetail(request, reply, tenant, request.params.id, 1, refused.message);
        }
        const rotated = await webhooks.rotateSecret(tenant, request.params.id);
        // The new secret is in this answer only: never in a cookie, a URL or another page.
        return kit.render(
          request,
          reply,
          tenant,
          { title: "Webhook secret rotated", section: "webhooks", path: "/webhooks" },
          () => webhookRotatedBody({ environment: tenant.environment, webhook: rotated }),
        );
      },
    );

    app.post(
      "/dashboard/:env/webhooks/:id/delete",
      { schema: { params: EnvIdParams } },
      async (request, reply) => {
        const tenant = kit.tenantOf(request, request.params.env);
        await webhooks.remove(tenant, request.params.id);
        return kit.done(reply, tenant.environment, "/webhooks", "webhook-deleted");
      },
    );

    app.post(
      "/dashboard/:env/webhooks/:id/test",
      { schema: { params: EnvIdParams } },
      async (request, reply) => {
        const tenant = kit.tenantOf(request, request.params.env);
        await webhooks.sendTest(tenant, request.params.id);
        return kit.done(reply, tenant.environment, webhookPath(request.params.id), "test-sent");
      },
    );

    app.post(
      "/dashboard/:env/webhooks/:id/deliveries/:deliveryId/retry",
      { schema: { params: DeliveryParams } },
      async (request, reply) => {
        const tenant = kit.tenantOf(request, request.params.env);
        // Back to the page of the log the button was on (read first: a bad one changes nothing).
        const page = pageOf(field(request.body, "page"));
        await webhooks.retry(tenant, request.params.id, request.params.deliveryId);
        const path = webhookPath(request.params.id);
        return kit.done(
          reply,
          tenant.environment,
          page > 1 ? `${path}?page=${page}` : path,
          "delivery-queued",
        );
      },
    );
  };

/** The ticked `events` checkboxes: one is a string, several an array. */
function checkedEvents(body: unknown): string[] {
  if (typeof body !== "object" || body === null) return [];
  const value: unknown = Reflect.get(body, "events");
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === "string");
  return [];
}

/** Which field a refusal of WebhooksService.register is about: the URL's messages name it. */
function fieldOf(message: string): "url" | "events" {
  return /webhook url/i.test(message) ? "url" : "events";
}

/** The page of the delivery log a query or form names (1 when none). */
function pageOf(value: unknown): number {
  if (value === undefined || value === "") return 1;
  if (typeof value !== "string" || !/^[1-9][0-9]{0,5}$/.test(value)) {
    throw new InvalidRequest(`page must be a whole number from 1 to ${MAX_PAGE}`);
  }
  return Number(value);
}

/** A webhook's page; the id was accepted by the service (digits only), encoded all the same. */
function webhookPath(id: string): string {
  return `/webhooks/${encodeURIComponent(id)}`;
}
