import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import QRCode from "qrcode";
import { Type } from "typebox";
import type { AppContext } from "../../context.ts";
import { InvalidRequest } from "../../domain/errors.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import type { KeysService } from "../keys/service.ts";
import type { PaymentsService } from "../payments/service.ts";
import type { UnmatchedInbox } from "../payments/unmatched.ts";
import type { WalletService } from "../payouts/wallet-service.ts";
import type { SmartWalletsService } from "../smart-wallets/service.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import type { Logins } from "./login.ts";
import { EnvIdParams, EnvParams, explorerOf, offsetOf, type PageKit, queryOf } from "./page-kit.ts";
import { newFormToken, type UnmatchedFormError } from "./refund-form.ts";
import type { SessionsService } from "./sessions.ts";
import { keysBody } from "./views/keys.ts";
import { type SettingsForm, settingsBody } from "./views/settings.ts";
import { unmatchedBody } from "./views/unmatched.ts";
import { type WalletCard, walletsBody } from "./views/wallets.ts";

// API keys, wallets, the unmatched inbox and the workspace's settings.

export interface WorkspacePageServices {
  workspaces: WorkspacesService;
  keys: KeysService;
  payments: PaymentsService;
  unmatched: UnmatchedInbox;
  wallet: WalletService;
  smartWallets: SmartWalletsService;
  sessions: SessionsService;
  logins: Logins;
}

const UNMATCHED_PAGE = 25;
const CsrfOnly = Type.Object({ _csrf: Type.String({ maxLength: 100 }) });

/**
 * The unmatched inbox's page (D13, D19), the page's `?offset=`; after a refused action (the POST
 * routes of refund-pages.ts) with the refusal in the row of its transfer.
 */
export const unmatchedPage =
  (ctx: AppContext, services: Pick<WorkspacePageServices, "unmatched">, kit: PageKit) =>
  async (
    request: FastifyRequest,
    reply: FastifyReply,
    tenant: Tenant,
    error?: UnmatchedFormError,
  ): Promise<FastifyReply> => {
    const offset = offsetOf(request);
    const page = await services.unmatched.list(tenant, { limit: UNMATCHED_PAGE, offset });
    const done = queryOf(request).done;
    const tokens = new Map(
      page.transfers.filter((t) => t.status === "open").map((t) => [t.id, newFormToken()]),
    );
    return kit.render(
      request,
      reply,
      tenant,
      { title: "Unmatched transfers", section: "unmatched", path: "/unmatched" },
      (csrfToken) =>
        unmatchedBody({
          environment: tenant.environment,
          transfers: page.transfers,
          total: page.total,
          offset,
          limit: UNMATCHED_PAGE,
          explorer: explorerOf(ctx.config, tenant.environment),
          csrfToken,
          tokenOf: (id) => tokens.get(id) ?? newFormToken(),
          error,
          done: typeof done === "string" ? done : undefined,
        }),
    );
  };

export const workspacePages =
  (ctx: AppContext, services: WorkspacePageServices, kit: PageKit): FastifyPluginAsyncTypebox =>
  async (app) => {
    const showKeys = async (
      request: Parameters<PageKit["render"]>[0],
      reply: Parameters<PageKit["render"]>[1],
      env: string,
      extra: { created?: { key: string; name: string | null }; error?: string; name?: string } = {},
    ) => {
      const tenant = kit.tenantOf(request, env);
      const keys = await services.keys.list(tenant.workspaceId, tenant.environment);
      return kit.render(
        request,
        reply,
        tenant,
        { title: "API keys", section: "keys", path: "/keys" },
        (csrfToken) => keysBody({ environment: tenant.environment, keys, csrfToken, ...extra }),
      );
    };

    app.get("/dashboard/:env/keys", { schema: { params: EnvParams } }, async (request, reply) =>
      showKeys(request, reply, request.params.env),
    );

    app.post(
      "/dashboard/:env/keys",
      {
        schema: {
          params: EnvParams,
          body: Type.Object({ _csrf: Type.String(), name: Type.Optional(Type.String()) }),
        },
      },
      async (request, reply) => {
        const tenant = kit.tenantOf(request, request.params.env);
        const name = (request.body.name ?? "").trim();
        if (name.length > 200) {
          reply.status(400);
          return showKeys(request, reply, request.params.env, {
            error: "A name has at most 200 characters",
            name,
          });
        }
        const issued = await services.keys.create(
          tenant.workspaceId,
          tenant.environment,
          tenant.environment,
          name || null,
        );
        // The key itself is in this answer only; nothing stores or redirects it.
        reply.status(201);
        return showKeys(request, reply, request.params.env, {
          created: { key: issued.key, name: name || null },
        });
      },
    );

    app.post(
      "/dashboard/:env/keys/:id/revoke",
      { schema: { params: EnvIdParams, body: CsrfOnly } },
      async (request, reply) => {
        const tenant = kit.tenantOf(request, request.params.env);
        await services.keys.revoke(tenant.workspaceId, tenant.environment, request.params.id);
        return kit.done(reply, tenant.environment, "/keys", "key-revoked");
      },
    );

    app.get("/dashboard/:env/wallets", { schema: { params: EnvParams } }, async (request, reply) => {
      const tenant = kit.tenantOf(request, request.params.env);
      const [setup, balances] = await Promise.all([
        services.smartWallets.get(tenant.workspaceId, tenant.environment),
        services.wallet.balances(tenant),
      ]);
      const card = async (
        label: string,
        wallet: { address: string; createdAt: string } | null,
        read: { balances: Record<string, string> } | null,
      ): Promise<WalletCard | null> =>
        wallet
          ? {
              label,
              address: wallet.address,
              createdAt: wallet.createdAt,
              balances: read?.balances ?? {},
              qrSvg: await QRCode.toString(wallet.address, {
                type: "svg",
                margin: 1,
                errorCorrectionLevel: "M",
              }),
            }
          : null;
      const [eoa, smartWallet] = await Promise.all([
        card("Workspace wallet (EOA)", setup.eoa, balances.eoa),
        card("Smart wallet", setup.smartWallet, balances.smartWallet),
      ]);
      return kit.render(
        request,
        reply,
        tenant,
        { title: "Wallets", section: "wallets", path: "/wallets" },
        () =>
          walletsBody({
            environment: tenant.environment,
            eoa,
            smartWallet,
            defaultWalletType: setup.defaultWalletType,
          }),
      );
    });

    const showUnmatched = unmatchedPage(ctx, services, kit);
    app.get("/dashboard/:env/unmatched", { schema: { params: EnvParams } }, async (request, reply) =>
      showUnmatched(request, reply, kit.tenantOf(request, request.params.env)),
    );

    const showSettings = async (
      request: Parameters<PageKit["render"]>[0],
      reply: Parameters<PageKit["render"]>[1],
      env: string,
      typed: Partial<Pick<SettingsForm, "settlementAddress" | "adminEmail" | "error">> = {},
    ) => {
      const tenant = kit.tenantOf(request, env);
      const saved = await services.workspaces.settings(tenant.workspaceId);
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
            error: typed.error,
          }),
      );
    };

    app.get("/dashboard/:env/settings", { schema: { params: EnvParams } }, async (request, reply) =>
      showSettings(request, reply, request.params.env),
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
          }),
        },
      },
      async (request, reply) => {
        const tenant = kit.tenantOf(request, request.params.env);
        const { settlementAddress, adminEmail } = request.body;
        try {
          await services.workspaces.updateSettings(tenant.workspaceId, { settlementAddress, adminEmail });
        } catch (err) {
          if (!(err instanceof InvalidRequest)) throw err;
          reply.status(400);
          const field = err.message.startsWith("adminEmail") ? "adminEmail" : "settlementAddress";
          return showSettings(request, reply, request.params.env, {
            settlementAddress,
            adminEmail,
            error: { field, message: err.message },
          });
        }
        return kit.done(reply, tenant.environment, "/settings", "settings-saved");
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
        const { currentPassword, newPassword } = request.body;
        const checked = await services.logins.checkPassword(tenant.workspaceId, currentPassword, request.ip);
        if (checked !== "ok") {
          const limited = typeof checked === "object";
          if (limited) reply.header("retry-after", String(checked.retryAfterSeconds));
          reply.status(limited ? 429 : 400);
          return showSettings(request, reply, request.params.env, {
            error: {
              field: "currentPassword",
              message: limited
                ? "Too many wrong passwords. Try again in a few minutes."
                : "The current password is not right",
            },
          });
        }
        try {
          await services.workspaces.setPassword(tenant.workspaceId, newPassword);
        } catch (err) {
          if (!(err instanceof InvalidRequest)) throw err;
          reply.status(400);
          return showSettings(request, reply, request.params.env, {
            error: { field: "newPassword", message: "The new password must be 12 to 200 characters" },
          });
        }
        const session = request.dashboard;
        if (session) await services.sessions.closeOthers(tenant.workspaceId, session.sessionId);
        return kit.done(reply, tenant.environment, "/settings", "password-changed");
      },
    );
  };
