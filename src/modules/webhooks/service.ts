import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { badRequest, conflict, notFound } from "../../domain/errors.ts";
import { isSubscribableEvent } from "../../domain/events.ts";
import { isUuid, MAX_URL } from "../../domain/validation.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import {
  assertLiteralHostAllowed,
  BlockedDestinationError,
  destinationPolicy,
} from "../../platform/http/outbound-guard.ts";
import * as history from "./history-repo.ts";
import * as repo from "./repo.ts";
import { newSigningSecret } from "./secrets.ts";
import { insertTestEvent } from "./test-event-repo.ts";

// Webhook registrations (parts 4.6–4.8, D7) and their delivery log. Registrations belong to the
// key's workspace and environment; the signing secret is shown once and stored encrypted.

/** How long the secret a rotation replaced keeps signing deliveries (D24). */
export const ROTATION_OVERLAP_MS = 24 * 60 * 60 * 1000;

export interface WebhookView {
  id: number;
  url: string;
  events: string[];
  active: boolean;
  created_at: string;
}

export interface DeliveryView {
  id: string;
  event: string;
  status: "pending" | "delivered" | "failed";
  attempts: number;
  lastResponseCode: number | null;
  lastError: string | null;
  nextAttemptAt: string | null;
  createdAt: string;
  deliveredAt: string | null;
}

/** An event of a subject (a payment) and where it was delivered. */
export interface SubjectEvent {
  id: string;
  event: string;
  status: string | null;
  createdAt: string;
  deliveries: Array<DeliveryView & { webhookId: string; url: string }>;
}

export function toWebhookView(row: repo.EndpointRow): WebhookView {
  return {
    id: row.id,
    url: row.url,
    events: row.events,
    active: row.active,
    created_at: row.created_at.toISOString(),
  };
}

function toDeliveryView(row: repo.DeliveryFields): DeliveryView {
  const status = row.status as DeliveryView["status"];
  return {
    id: row.id,
    event: row.event_type,
    status,
    attempts: row.attempts,
    lastResponseCode: row.last_response_code,
    lastError: row.last_error,
    nextAttemptAt: status === "pending" ? row.next_attempt_at.toISOString() : null,
    createdAt: row.created_at.toISOString(),
    deliveredAt: row.delivered_at?.toISOString() ?? null,
  };
}

/** Registration-time URL rules of D7; the address is checked again, resolved, at every delivery. */
export function webhookUrlProblem(
  value: unknown,
  environment: Environment,
  allowPrivate: boolean,
): string | null {
  if (typeof value !== "string" || value.length > MAX_URL) return "Invalid webhook URL";
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return "Invalid webhook URL";
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return "Invalid webhook URL";
  if (url.username || url.password) return "Webhook URL must not contain credentials";
  const policy = destinationPolicy(allowPrivate);
  if (environment === "live" && !allowPrivate && url.protocol !== "https:") {
    return "Webhook URL must use https in live";
  }
  try {
    assertLiteralHostAllowed(url, policy);
  } catch (err) {
    if (!(err instanceof BlockedDestinationError)) throw err;
    return "Webhook URL is a blocked destination (a private, loopback or link-local address)";
  }
  return null;
}

export class WebhooksService {
  readonly #ctx: AppContext;

  constructor(ctx: AppContext) {
    this.#ctx = ctx;
  }

  /** Deliveries due now and the age of the oldest, for the metrics (all instances). */
  backlog(): Promise<{ due: number; oldestDueAgeSeconds: number }> {
    return repo.dueBacklog(this.#ctx.db);
  }

  async register(principal: Tenant, body: unknown): Promise<WebhookView & { signingSecret: string }> {
    const input = (typeof body === "object" && body !== null ? body : {}) as {
      url?: unknown;
      events?: unknown;
    };
    const urlProblem = webhookUrlProblem(
      input.url,
      principal.environment,
      this.#ctx.config.webhookAllowPrivate,
    );
    if (urlProblem) throw badRequest(urlProblem);
    if (!Array.isArray(input.events) || input.events.length === 0) {
      throw badRequest("events must be a non-empty array of event types");
    }
    if (!input.events.every(isSubscribableEvent)) throw badRequest("Invalid event type");
    const events = [...new Set(input.events as string[])];

    const signingSecret = newSigningSecret();
    const row = await repo.insertEndpoint(this.#ctx.db, principal, {
      url: input.url as string,
      events,
      encryptedSecret: this.#ctx.secrets.encrypt(signingSecret),
    });
    return { ...toWebhookView(row), signingSecret };
  }

  async list(principal: Tenant): Promise<WebhookView[]> {
    return (await repo.listEndpoints(this.#ctx.db, principal)).map(toWebhookView);
  }

  /** One registration of the tenant (404 for another workspace's or environment's id). */
  async get(principal: Tenant, id: string): Promise<WebhookView> {
    return toWebhookView(await this.#endpoint(principal, id));
  }

  /**
   * Queues one `webhook.test` event for this registration only (whatever it subscribed to, never
   * fanned out to others), event and delivery in one statement; the dispatcher signs and sends it
   * like any event. 404 for another tenant's id, 409 for a disabled registration.
   */
  async sendTest(principal: Tenant, id: string): Promise<DeliveryView> {
    const endpointId = parseId(id);
    if (endpointId === null) throw notFound("Webhook not found");
    const written = await insertTestEvent(this.#ctx.db, principal, endpointId, {
      webhookId: endpointId,
      message: "Test event from the dashboard",
      createdAt: this.#ctx.now().toISOString(),
    });
    if (written.outcome === "missing") throw notFound("Webhook not found");
    if (written.outcome === "inactive") {
      throw conflict("Webhook is disabled: register the endpoint again to receive events");
    }
    return toDeliveryView(written.delivery);
  }

  /**
   * A new signing secret for the registration, shown in this answer only (D24). For 24 h the one
   * it replaces signs too (a second `webhook-signature` entry); rotating again within that time
   * drops the oldest. 404 for another tenant's id.
   */
  async rotateSecret(principal: Tenant, id: string): Promise<{ id: number; signingSecret: string }> {
    const endpointId = parseId(id);
    const signingSecret = newSigningSecret();
    const previousUntil = new Date(this.#ctx.now().getTime() + ROTATION_OVERLAP_MS);
    if (
      endpointId === null ||
      !(await repo.rotateSecret(
        this.#ctx.db,
        principal,
        endpointId,
        this.#ctx.secrets.encrypt(signingSecret),
        previousUntil,
      ))
    ) {
      throw notFound("Webhook not found");
    }
    return { id: endpointId, signingSecret };
  }

  async remove(principal: Tenant, id: string): Promise<void> {
    const endpointId = parseId(id);
    if (
      endpointId === null ||
      !(await repo.deleteEndpoint(this.#ctx.db, principal, endpointId, this.#ctx.now()))
    ) {
      throw notFound("Webhook not found");
    }
  }

  async deliveries(
    principal: Tenant,
    id: string,
    page: { limit: number; offset: number },
  ): Promise<{ deliveries: DeliveryView[]; total: number }> {
    const endpoint = await this.#endpoint(principal, id);
    const { rows, total } = await repo.listDeliveries(this.#ctx.db, endpoint.id, page);
    return { deliveries: rows.map(toDeliveryView), total };
  }

  async retry(principal: Tenant, id: string, deliveryId: string): Promise<DeliveryView> {
    const endpoint = await this.#endpoint(principal, id);
    const row = isUuid(deliveryId)
      ? await repo.requeueDelivery(this.#ctx.db, endpoint.id, deliveryId, this.#ctx.now())
      : undefined;
    if (!row) throw notFound("Delivery not found");
    return toDeliveryView(row);
  }

  /**
   * What happened to a payment, from its events: each event (its type, the status it carried,
   * when) with the deliveries it fanned out to, oldest first. For the dashboard's detail page.
   */
  async historyOf(tenant: Tenant, subjectId: string): Promise<SubjectEvent[]> {
    const events = await history.eventsOfSubject(this.#ctx.db, tenant, subjectId);
    const deliveries = await history.deliveriesOfEvents(
      this.#ctx.db,
      events.map((e) => e.id),
    );
    return events.map((e) => ({
      id: e.id,
      event: e.event_type,
      status: e.status,
      createdAt: e.created_at.toISOString(),
      deliveries: deliveries
        .filter((d) => d.outbox_event_id === e.id)
        .map((d) => ({
          ...toDeliveryView({ ...d, event_type: e.event_type }),
          webhookId: String(d.endpoint_id),
          url: d.url,
        })),
    }));
  }

  async #endpoint(principal: Tenant, id: string): Promise<repo.EndpointRow> {
    const endpointId = parseId(id);
    const endpoint =
      endpointId === null ? undefined : await repo.findEndpoint(this.#ctx.db, principal, endpointId);
    if (!endpoint) throw notFound("Webhook not found");
    return endpoint;
  }
}

function parseId(id: string): number | null {
  if (!/^[0-9]{1,9}$/.test(id)) return null;
  return Number(id);
}
