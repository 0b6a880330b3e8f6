import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import QRCode from "qrcode";
import { Type } from "typebox";
import type { AppContext } from "../../context.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import type { KeysService } from "../keys/service.ts";
import type { UnmatchedInbox } from "../payments/inbox/unmatched.ts";
import type { PaymentsService } from "../payments/service.ts";
import type { WorkspaceWalletService } from "../payouts/workspace-wallet.ts";
import type { SmartWalletsService } from "../smart-wallets/service.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import type { Logins } from "./login.ts";
import { EnvIdParams, EnvParams, explorerOf, offsetOf, type PageKit, queryOf } from "./page-kit.ts";
import { newFormToken, type UnmatchedFormError } from "./refund-form.ts";
import { stepUp } from "./step-up.ts";
import { balancesOf, type NetworkBalances } from "./views/balances.ts";
import { keysBody } from "./views/keys.ts";
import { unmatchedBody } from "./views/unmatched.ts";
import { type WalletCard, walletsBody } from "./views/wallets.ts";

// API keys, wallets and the unmatched inbox (the settings are in settings-pages.ts).

export interface WorkspacePageServices {
  workspaces: WorkspacesService;
  keys: KeysService;
  payments: PaymentsService;
  unmatched: UnmatchedInbox;
  wallet: WorkspaceWalletService;
  smartWallets: SmartWalletsService;
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
      extra: {
        created?: { key: string; name: string | null };
        error?: string;
        passwordError?: string;
        name?: string;
      } = {},
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
          body: Type.Object({
            _csrf: Type.String(),
            name: Type.Optional(Type.String()),
            currentPassword: Type.Optional(Type.String({ maxLength: 200 })),
          }),
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
        // A live key moves real money: it is created only after the current password (D21).
        if (tenant.environment === "live") {
          const refused = await stepUp(services.logins, request, reply);
          if (refused) {
            reply.status(refused.status);
            return showKeys(request, reply, request.params.env, { passwordError: refused.message, name });
          }
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
        read: NetworkBalances,
      ): Promise<WalletCard | null> =>
        wallet
          ? {
              label,
              address: wallet.address,
              createdAt: wallet.createdAt,
              balances: read,
              qrSvg: await QRCode.toString(wallet.address, {
                type: "svg",
                margin: 1,
                errorCorrectionLevel: "M",
              }),
            }
          : null;
      const [eoa, smartWallet] = await Promise.all([
        card("Workspace wallet (EOA)", setup.eoa, balancesOf(balances.networks, "eoa")),
        card("Smart wallet", setup.smartWallet, balancesOf(balances.networks, "smartWallet")),
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
  };
