import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import formbody from "@fastify/formbody";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Type } from "typebox";
import type { AppContext } from "../../context.ts";
import { AppError, NotFound, RateLimited } from "../../domain/errors.ts";
import { statusOf, validationMessage } from "../../platform/http/error-handler.ts";
import { servedOverHttps } from "../../platform/http/hsts.ts";
import { pageSecurityHeaders } from "../../platform/http/page-security.ts";
import { constantTimeEqual } from "../../platform/secrets/hashing.ts";
import { type AgentPageServices, agentPages } from "./agent-pages.ts";
import { CSRF_REFUSED, csrfGiven } from "./csrf.ts";
import { emailConfirmRoutes } from "./email-change.ts";
import { type Logins, waitText } from "./login.ts";
import { PageKit } from "./page-kit.ts";
import { type DashboardServices, pageRoutes } from "./pages.ts";
import { payoutPages } from "./payout-pages.ts";
import { refundPages } from "./refund-pages.ts";
import { type SessionsService, sessionCookieName } from "./sessions.ts";
import { type SettingsPageServices, settingsPages } from "./settings-pages.ts";
import { type SplitPageServices, splitPages } from "./split-pages.ts";
import { html } from "./views/html.ts";
import { bare } from "./views/layout.ts";
import { loginPage } from "./views/login.ts";
import { webhookPages } from "./webhook-pages.ts";
import { type WorkspacePageServices, workspacePages } from "./workspace-pages.ts";

// The merchant dashboard under /dashboard (D12, D18): server-rendered pages behind a session
// cookie. Forms post urlencoded bodies with the session's CSRF token in `_csrf` (our script's
// requests send it in X-CSRF-Token); the login form has its own token, double-submitted in a
// cookie, so that nobody can sign a visitor into an account of theirs.

const LOGIN_COOKIE = "svc_login";

// A Map, not an object: a path segment such as "constructor" must find nothing.
const ASSETS = new Map<string, { type: string; body: Buffer }>(
  [
    ["dashboard.js", "text/javascript; charset=utf-8"],
    ["dashboard.css", "text/css; charset=utf-8"],
    ["pages.css", "text/css; charset=utf-8"],
  ].map(([file, type]) => [
    file ?? "",
    { type: type ?? "", body: readFileSync(new URL(`./assets/${file}`, import.meta.url)) },
  ]),
);

/** The signed-in session of a dashboard request (set by the guard). */
export interface DashboardSession {
  workspaceId: string;
  sessionId: string;
  csrfToken: string;
}

declare module "fastify" {
  interface FastifyRequest {
    dashboard: DashboardSession | null;
  }
}

const SAFE_METHODS = new Set(["GET", "HEAD"]);

export interface DashboardDependencies
  extends DashboardServices,
    WorkspacePageServices,
    SplitPageServices,
    SettingsPageServices,
    AgentPageServices {
  sessions: SessionsService;
  logins: Logins;
}

export const dashboardRoutes =
  (ctx: AppContext, deps: DashboardDependencies): FastifyPluginAsyncTypebox =>
  async (app) => {
    // Every dashboard route authenticates itself (below), not with an API key.
    app.addHook("onRoute", (route) => {
      route.config = { ...route.config, auth: "none" };
      route.schema = { ...route.schema, hide: true };
    });
    await app.register(formbody, { bodyLimit: 16 * 1024 });
    app.decorateRequest("dashboard", null);
    // Over https the session cookie is `__Host-` prefixed and Secure (sessions.ts).
    const secure = servedOverHttps(ctx.config.publicBaseUrl);
    const sessionCookie = sessionCookieName(ctx.config.publicBaseUrl);
    const cookieOptions = { httpOnly: true, secure, sameSite: "lax", path: "/" } as const;

    app.addHook("onRequest", async (_request, reply) => {
      reply.header("cache-control", "no-store");
    });
    setErrorPages(app);

    app.get("/dashboard", async (_request, reply) => reply.redirect("/dashboard/sandbox", 303));

    app.get<{ Params: { file: string } }>("/dashboard/assets/:file", async (request, reply) => {
      const asset = ASSETS.get(request.params.file);
      pageSecurityHeaders(reply, { formAction: "'none'" });
      if (!asset) throw new NotFound("Not found");
      return reply.header("cache-control", "public, max-age=3600").type(asset.type).send(asset.body);
    });

    const showLogin = (
      reply: FastifyReply,
      status: number,
      form: Omit<Parameters<typeof loginPage>[0], "nonce" | "csrfToken">,
    ) => {
      const nonce = randomBytes(16).toString("base64");
      const csrfToken = randomBytes(24).toString("base64url");
      pageSecurityHeaders(reply, { nonce, formAction: "'self'" });
      reply.setCookie(LOGIN_COOKIE, csrfToken, {
        ...cookieOptions,
        sameSite: "strict",
        path: "/dashboard/login",
      });
      return reply
        .status(status)
        .type("text/html; charset=utf-8")
        .send(String(loginPage({ ...form, nonce, csrfToken })));
    };

    // Shown even to a signed-in browser: logging in again (another workspace of the same e-mail)
    // replaces its session.
    app.get("/dashboard/login", async (_request, reply) => showLogin(reply, 200, {}));

    app.post(
      "/dashboard/login",
      {
        schema: {
          body: Type.Object({
            email: Type.String({ maxLength: 254 }),
            password: Type.String({ maxLength: 200 }),
            workspaceId: Type.Optional(Type.String({ maxLength: 64 })),
            _csrf: Type.String({ maxLength: 100 }),
          }),
        },
      },
      async (request, reply) => {
        const body = request.body;
        const cookieToken = request.cookies[LOGIN_COOKIE];
        if (!cookieToken || !constantTimeEqual(cookieToken, body._csrf))
          return showLogin(reply, 403, {
            email: body.email,
            error: "The form had expired. Please try again.",
          });
        const outcome = await deps.logins.attempt({
          email: body.email,
          password: body.password,
          workspaceId: body.workspaceId ?? "",
          clientAddress: request.ip,
        });
        if (outcome.status === "limited") {
          reply.header("retry-after", String(outcome.retryAfterSeconds));
          return showLogin(reply, 429, {
            email: body.email,
            error: `Too many failed attempts from this address. Try again in ${waitText(outcome.retryAfterSeconds)}.`,
          });
        }
        if (outcome.status === "invalid")
          return showLogin(reply, 401, { email: body.email, error: "Wrong e-mail or password." });
        if (outcome.status === "choose")
          return showLogin(reply, 200, {
            email: body.email,
            error: "Several workspaces use this e-mail. Choose one and enter the password again.",
            workspaces: outcome.workspaces,
          });
        // A new session at every login; the one the browser came with (if any) ends.
        const previous = request.cookies[sessionCookie];
        if (previous) await deps.sessions.close(previous);
        const session = await deps.sessions.open(outcome.workspaceId);
        reply.setCookie(sessionCookie, session.token, cookieOptions);
        reply.clearCookie(LOGIN_COOKIE, { path: "/dashboard/login" });
        return reply.redirect("/dashboard/sandbox", 303);
      },
    );

    // The link confirming a new admin e-mail works without a session (it may be opened elsewhere).
    await app.register(emailConfirmRoutes(deps));

    // Everything else needs a session.
    await app.register(async (signedIn) => {
      // Before the body is validated: a signed-out form goes to the login page, not to a 400.
      signedIn.addHook("preValidation", async (request, reply) => {
        const token = request.cookies[sessionCookie];
        const session = token ? await deps.sessions.resolve(token) : null;
        if (!session) return reply.redirect("/dashboard/login", 303);
        const checkedLater = request.routeOptions.config.csrfAfterMultipart === true;
        if (!SAFE_METHODS.has(request.method) && !checkedLater && !csrfGiven(request, session.csrfToken))
          return errorPage(reply, 403, CSRF_REFUSED);
        request.dashboard = {
          workspaceId: session.workspaceId,
          sessionId: session.sessionId,
          csrfToken: session.csrfToken,
        };
      });

      signedIn.post("/dashboard/logout", async (request, reply) => {
        const token = request.cookies[sessionCookie];
        if (token) await deps.sessions.close(token);
        reply.clearCookie(sessionCookie, cookieOptions);
        return reply.redirect("/dashboard/login", 303);
      });

      const kit = new PageKit(deps.workspaces);
      await signedIn.register(pageRoutes(ctx, deps, kit));
      await signedIn.register(webhookPages(deps, kit));
      await signedIn.register(workspacePages(ctx, deps, kit));
      await signedIn.register(settingsPages(ctx, deps, kit));
      await signedIn.register(payoutPages(ctx, deps, kit));
      await signedIn.register(splitPages(ctx, deps, kit));
      await signedIn.register(refundPages(ctx, deps, kit));
      await signedIn.register(agentPages(deps, kit));
    });
  };

export function errorPage(reply: FastifyReply, status: number, message: string) {
  const nonce = randomBytes(16).toString("base64");
  pageSecurityHeaders(reply, { nonce, formAction: "'self'" });
  const title =
    status === 404
      ? "Not found"
      : status === 403
        ? "Not allowed"
        : status >= 500
          ? "Something went wrong"
          : "Request refused";
  return reply
    .status(status)
    .type("text/html; charset=utf-8")
    .send(
      String(
        bare(
          title,
          nonce,
          html`<section class="error-page"><h1>${title}</h1><p role="alert">${message}</p><p><a href="/dashboard">Back to the dashboard</a></p></section>`,
        ),
      ),
    );
}

/** Errors of dashboard routes are pages, with the status and message the API would give. */
function setErrorPages(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError | AppError, request: FastifyRequest, reply) => {
    if (err instanceof AppError) {
      if (err instanceof RateLimited) reply.header("retry-after", String(err.retryAfterSeconds));
      if (statusOf(err.code) >= 500) request.log.error({ err }, "dashboard request failed");
      return errorPage(reply, statusOf(err.code), err.message);
    }
    const fastifyErr = err as FastifyError;
    if (fastifyErr.validation) return errorPage(reply, 400, validationMessage(fastifyErr));
    if (
      typeof fastifyErr.statusCode === "number" &&
      fastifyErr.statusCode >= 400 &&
      fastifyErr.statusCode < 500
    )
      return errorPage(reply, fastifyErr.statusCode, fastifyErr.message);
    request.log.error({ err }, "unhandled dashboard error");
    return errorPage(reply, 500, "The page could not be shown. Try again in a moment.");
  });
}
