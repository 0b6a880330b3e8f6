import { randomBytes } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import { Type } from "typebox";
import { type Config, ENVIRONMENTS, type Environment } from "../../config.ts";
import { NotFound, Unauthorized } from "../../domain/errors.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import { pageSecurityHeaders } from "../../platform/http/page-security.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import type { HtmlSafeString } from "./views/html.ts";
import { base, page, type Section } from "./views/layout.ts";

// What every signed-in page plugin shares: the tenant of a request (its session's workspace, the
// environment its URL names), rendering inside the frame with a fresh CSP nonce, redirects after a
// form with a notice, and the route schemas of the URL's parts.

export const EnvParams = Type.Object({ env: Type.String({ maxLength: 16 }) });
export const EnvIdParams = Type.Object({
  env: Type.String({ maxLength: 16 }),
  id: Type.String({ maxLength: 64 }),
});
export const NoticeQuery = Type.Object({ notice: Type.Optional(Type.String({ maxLength: 32 })) });

/** Fixed messages a redirect may ask a page to show (never text from the request). */
const NOTICES = new Map([
  ["cancelled", "The payment was cancelled."],
  ["resumed", "Payouts resumed."],
  ["not-paused", "Payouts were not paused."],
  ["key-revoked", "The API key was revoked."],
  ["webhook-deleted", "The webhook was deleted."],
  ["delivery-queued", "The delivery is queued and will be sent again in a moment."],
  ["test-sent", "A test event is queued for this webhook."],
  ["settings-saved", "Settings saved."],
  [
    "email-confirmation-sent",
    "Settings saved. A link was mailed to the new admin e-mail: it takes effect when the link is opened.",
  ],
  ["branding-saved", "Checkout branding saved. Payment pages show it from now on."],
  ["logo-saved", "Logo saved. Payment pages show it from now on."],
  ["logo-removed", "Logo removed."],
  ["password-changed", "Password changed. Other sessions were signed out."],
  ["smart-wallet-created", "The smart wallet is ready."],
  ["default-saved", "Default wallet saved."],
  ["splits-saved", "Splits saved. Crypto payments created from now on use them."],
  ["policy-saved", "Spending policy saved. Payments requested from now on are judged by it."],
  ["payment-denied", "The payment was denied and its reservation released."],
]);

export type Notice = Parameters<typeof NOTICES.get>[0];

export interface Frame {
  title: string;
  section: Section;
  /** The page's path below /dashboard/<env> (the environment switch keeps it). */
  path: string;
}

export class PageKit {
  readonly #workspaces: WorkspacesService;

  constructor(workspaces: WorkspacesService) {
    this.#workspaces = workspaces;
  }

  tenantOf(request: FastifyRequest, env: string): Tenant {
    const session = request.dashboard;
    if (!session) throw new Unauthorized("Sign in to the dashboard first");
    return { workspaceId: session.workspaceId, environment: environmentOf(env) };
  }

  /** The page inside the frame; `body` gets the session's CSRF token for its forms. */
  async render(
    request: FastifyRequest,
    reply: FastifyReply,
    tenant: Tenant,
    frame: Frame,
    body: (csrfToken: string) => HtmlSafeString | Promise<HtmlSafeString>,
  ): Promise<FastifyReply> {
    const session = request.dashboard;
    if (!session) throw new Unauthorized("Sign in to the dashboard first");
    const nonce = randomBytes(16).toString("base64");
    const [profile, content] = await Promise.all([
      this.#workspaces.profile(tenant.workspaceId),
      body(session.csrfToken),
    ]);
    pageSecurityHeaders(reply, { nonce, formAction: "'self'" });
    const notice = noticeOf(request);
    const html = page(
      {
        ...frame,
        environment: tenant.environment,
        workspaceName: profile.name,
        csrfToken: session.csrfToken,
        nonce,
        ...(notice ? { notice } : {}),
      },
      content,
    );
    return reply.type("text/html; charset=utf-8").send(String(html));
  }

  /** After a form: back to a page of the environment (path below /dashboard/<env>), with a notice. */
  done(reply: FastifyReply, environment: Environment, path: string, notice: string): FastifyReply {
    const separator = path.includes("?") ? "&" : "?";
    return reply.redirect(`${base(environment)}${path}${separator}notice=${encodeURIComponent(notice)}`, 303);
  }
}

function noticeOf(request: FastifyRequest): string | undefined {
  const query = request.query;
  if (typeof query !== "object" || query === null) return undefined;
  const key: unknown = Reflect.get(query, "notice");
  return typeof key === "string" ? NOTICES.get(key) : undefined;
}

/**
 * The block explorer's base URL (links to `<explorer>/tx/<hash>`) of an environment's network
 * `network`, else of its default one. Lists link the default network's transactions only, for now.
 */
export function explorerOf(config: Config, environment: Environment, network?: string | null): string | null {
  const networks = config.networks[environment];
  const chain = network ? networks.find((one) => one.id === network) : networks[0];
  return chain?.explorerUrl ?? null;
}

/** The environment a page's URL names; any other segment is a page that does not exist. */
export function environmentOf(segment: string): Environment {
  const found = ENVIRONMENTS.find((e) => e === segment);
  if (!found) throw new NotFound("Page not found");
  return found;
}

/** The query string as parsed (a repeated name gives an array: the readers refuse those). */
export function queryOf(request: FastifyRequest): Readonly<Record<string, unknown>> {
  const query = request.query;
  return typeof query === "object" && query !== null ? { ...query } : {};
}

/** The `offset` query parameter of an offset-paged list: 0 unless it is up to 7 digits. */
export function offsetOf(request: FastifyRequest): number {
  const raw = queryOf(request).offset;
  return typeof raw === "string" && /^\d{1,7}$/.test(raw) ? Number(raw) : 0;
}

/** A form field of an urlencoded body, when given once as text. */
export function field(body: unknown, name: string): string | undefined {
  if (typeof body !== "object" || body === null) return undefined;
  const value: unknown = Reflect.get(body, name);
  return typeof value === "string" ? value : undefined;
}
