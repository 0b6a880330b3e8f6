import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import { Type } from "typebox";
import type { AppContext } from "../../context.ts";
import { InvalidRequest, Unavailable } from "../../domain/errors.ts";
import type { Mailer } from "../../platform/mail/mailer.ts";
import type { BrandingService } from "../workspaces/branding.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import { brandingPages } from "./branding-pages.ts";
import { mailEmailConfirmation } from "./email-change.ts";
import type { Logins } from "./login.ts";
import { EnvParams, type PageKit } from "./page-kit.ts";
import type { SessionsService } from "./sessions.ts";
import { stepUp } from "./step-up.ts";
import type { BrandingField } from "./views/branding.ts";
import { type SettingsForm, settingsBody } from "./views/settings.ts";

// The workspace's settings (shared by both environments): the settlement address and the admin
// e-mail, saved after the current password is given again (step-up, D21), a new e-mail only once
// the link mailed to it is opened; the password; and the checkout branding (branding-pages.ts).

export interface SettingsPageServices {
  workspaces: WorkspacesService;
  branding: BrandingService;
  sessions: SessionsService;
  logins: Logins;
  mailer: Mailer;
}

type SettingsField = NonNullable<SettingsForm["error"]>["field"];

/** What a refused form gives back to show again: the values typed, and which field and why. */
export interface Typed {
  settlementAddress?: string;
  adminEmail?: string;
  displayName?: string;
  brandColor?: string;
  error?: { field: SettingsField | BrandingField; message: string };
}

export type ShowSettings = (
  request: FastifyRequest,
  reply: FastifyReply,
  env: string,
  typed?: Typed,
) => Promise<FastifyReply>;

const BRANDING_FIELDS: readonly string[] = ["displayName", "brandColor", "logo"] satisfies BrandingField[];
const isBrandingField = (field: string): field is BrandingField => BRANDING_FIELDS.includes(field);

export const settingsPages =
  (ctx: AppContext, services: SettingsPageServices, kit: PageKit): FastifyPluginAsyncTypebox =>
  async (app) => {
    const show: ShowSettings = async (request, reply, env, typed = {}) => {
      const tenant = kit.tenantOf(request, env);
      const [saved, pending, branding] = await Promise.all([
        services.workspaces.settings(tenant.workspaceId),
        services.workspaces.pendingAdminEmail(tenant.workspaceId),
        services.branding.get(tenant.workspaceId),
      ]);
      const error = typed.error;
      return kit.render(
        request,
        reply,
        tenant,
        { title: "Settings", section: "settings", path: "/settings" },
        (csrfToken) =>
          settingsBody({
            environment: tenant.environment,
            csrfToken,
            settlementAddress: typed.settlementAddress ?? saved.settlementAddress ?? "",
            adminEmail: typed.adminEmail ?? saved.adminEmail ?? "",
            hasPassword: saved.hasPassword,
            pendingEmail: pending && { email: pending.email, expiresAt: pending.expiresAt.toISOString() },
            branding: {
              workspaceName: branding.name,
              displayName: typed.displayName ?? branding.displayName ?? "",
              brandColor: typed.brandColor ?? branding.brandColor ?? "",
              logoSha256: branding.logoSha256,
              error:
                error && isBrandingField(error.field)
                  ? { field: error.field, message: error.message }
                  : undefined,
            },
            error:
              error && !isBrandingField(error.field)
                ? { field: error.field, message: error.message }
                : undefined,
          }),
      );
    };

    await app.register(brandingPages(services.branding, kit, show));

    app.get("/dashboard/:env/settings", { schema: { params: EnvParams } }, async (request, reply) =>
      show(request, reply, request.params.env),
    );

    app.post(
      "/dashboard/:env/settings",
      {
        schema: {
          params: EnvParams,
          body: Type.Object({
            _csrf: Type.String(),
            settlementAddress: Type.String({ maxLength: 200 }),
            adminEmail: Type.String({ maxLength: 300 }),
            currentPassword: Type.Optional(Type.String({ maxLength: 200 })),
          }),
        },
      },
      async (request, reply) => {
        const tenant = kit.tenantOf(request, request.params.env);
        const { settlementAddress, adminEmail } = request.body;
        const refused = await stepUp(services.logins, request, reply);
        if (refused) {
          reply.status(refused.status);
          return show(request, reply, request.params.env, {
            settlementAddress,
            adminEmail,
            error: { field: "settingsPassword", message: refused.message },
          });
        }
        let saved: Awaited<ReturnType<WorkspacesService["updateSettings"]>>;
        try {
          saved = await services.workspaces.updateSettings(tenant.workspaceId, {
            settlementAddress,
            adminEmail,
          });
        } catch (err) {
          if (!(err instanceof InvalidRequest)) throw err;
          reply.status(400);
          const field = err.message.startsWith("adminEmail") ? "adminEmail" : "settlementAddress";
          return show(request, reply, request.params.env, {
            settlementAddress,
            adminEmail,
            error: { field, message: err.message },
          });
        }
        const change = saved.emailChange;
        if (!change) return kit.done(reply, tenant.environment, "/settings", "settings-saved");
        const profile = await services.workspaces.profile(tenant.workspaceId);
        try {
          await mailEmailConfirmation(services.mailer, ctx.config.publicBaseUrl, {
            ...change,
            workspaceName: profile.name,
          });
        } catch (err) {
          await services.workspaces.cancelAdminEmailChange(tenant.workspaceId);
          throw new Unavailable(
            `The confirmation e-mail to ${change.email} could not be sent, so the admin e-mail is unchanged; the rest was saved. Try again later.`,
            {},
            { cause: err },
          );
        }
        return kit.done(reply, tenant.environment, "/settings", "email-confirmation-sent");
      },
    );

    app.post(
      "/dashboard/:env/settings/password",
      {
        schema: {
          params: EnvParams,
          body: Type.Object({
            _csrf: Type.String(),
            currentPassword: Type.String({ maxLength: 200 }),
            newPassword: Type.String({ maxLength: 1000 }),
            username: Type.Optional(Type.String({ maxLength: 300 })),
          }),
        },
      },
      async (request, reply) => {
        const tenant = kit.tenantOf(request, request.params.env);
        const refused = await stepUp(services.logins, request, reply);
        if (refused) {
          reply.status(refused.status);
          return show(request, reply, request.params.env, {
            error: { field: "currentPassword", message: refused.message },
          });
        }
        try {
          await services.workspaces.setPassword(tenant.workspaceId, request.body.newPassword);
        } catch (err) {
          if (!(err instanceof InvalidRequest)) throw err;
          reply.status(400);
          return show(request, reply, request.params.env, {
            error: { field: "newPassword", message: "The new password must be 12 to 200 characters" },
          });
        }
        const session = request.dashboard;
        if (session) await services.sessions.closeOthers(tenant.workspaceId, session.sessionId);
        return kit.done(reply, tenant.environment, "/settings", "password-changed");
      },
    );
  };
