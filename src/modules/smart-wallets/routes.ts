import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { ENVIRONMENTS } from "../../config.ts";
import { InvalidRequest, Unauthorized } from "../../domain/errors.ts";
import { assertWorkspaceAccess, settingsEnvironment } from "../../platform/http/auth.ts";
import { documentedBodyOnly } from "../../platform/http/validation.ts";
import type { SmartWalletsService } from "./service.ts";

const WorkspaceId = Type.Object({ id: Type.String() });
const DefaultType = Type.Enum(["workspace", "smart_wallet"]);
// The default wallet type is kept per environment (D21): which one a call reads or sets.
const EnvironmentQuery = Type.Object({
  environment: Type.Optional(
    Type.Enum(ENVIRONMENTS, {
      description:
        "Whose default wallet type: an API key acts on its own environment only (the other → 403); the admin secret and the dashboard session on live unless this says sandbox",
    }),
  ),
});

export const smartWalletRoutes =
  (smartWallets: SmartWalletsService): FastifyPluginAsyncTypebox =>
  async (app) => {
    // Part 4.13: programmatic (workspace API key of that workspace, or the admin secret).
    app.post(
      "/api/v1/workspaces/:id/smart-wallet",
      {
        config: { auth: "key-or-admin" },
        validatorCompiler: documentedBodyOnly,
        schema: {
          tags: ["Smart wallets"],
          summary: "Create the workspace's smart wallet (idempotent: an existing one is returned)",
          security: [{ apiKey: [] }, { adminSecret: [] }],
          params: WorkspaceId,
          querystring: EnvironmentQuery,
          body: Type.Optional(Type.Object({ setDefault: Type.Optional(Type.Boolean()) })),
        },
      },
      async (request, reply) => {
        assertWorkspaceAccess(request, request.params.id);
        const environment = settingsEnvironment(request, request.query.environment);
        const body = (request.body ?? {}) as { setDefault?: unknown };
        if (body.setDefault !== undefined && typeof body.setDefault !== "boolean") {
          throw new InvalidRequest("setDefault must be a boolean");
        }
        const result = await smartWallets.create(request.params.id, body.setDefault === true, environment);
        return reply.status(result.created ? 201 : 200).send({
          success: true,
          workspaceId: request.params.id,
          smartWallet: {
            address: result.smartWallet.address,
            ownerAddress: result.smartWallet.ownerAddress,
            walletId: result.smartWallet.walletId,
          },
          defaultWalletType: result.defaultWalletType,
        });
      },
    );

    app.get(
      "/api/v1/workspaces/:id/smart-wallet",
      {
        config: { auth: "key-or-admin" },
        schema: {
          tags: ["Smart wallets"],
          summary: "The workspace's EOA, smart wallet (or null) and the environment's default wallet type",
          security: [{ apiKey: [] }, { adminSecret: [] }],
          params: WorkspaceId,
          querystring: EnvironmentQuery,
        },
      },
      async (request) => {
        assertWorkspaceAccess(request, request.params.id);
        const environment = settingsEnvironment(request, request.query.environment);
        const state = await smartWallets.get(request.params.id, environment);
        return {
          workspaceId: state.workspaceId,
          eoa: state.eoa,
          smartWallet: state.smartWallet
            ? {
                address: state.smartWallet.address,
                walletId: state.smartWallet.walletId,
                createdAt: state.smartWallet.createdAt,
              }
            : null,
          defaultWalletType: state.defaultWalletType,
        };
      },
    );

    app.patch(
      "/api/v1/workspaces/:id/smart-wallet",
      {
        config: { auth: "key-or-admin" },
        validatorCompiler: documentedBodyOnly,
        schema: {
          tags: ["Smart wallets"],
          summary:
            "Choose the wallet used when walletType is omitted, in one environment (a key's own; the admin secret's live unless ?environment=sandbox)",
          security: [{ apiKey: [] }, { adminSecret: [] }],
          params: WorkspaceId,
          querystring: EnvironmentQuery,
          body: Type.Object({ defaultWalletType: DefaultType }),
        },
      },
      async (request) => {
        assertWorkspaceAccess(request, request.params.id);
        const environment = settingsEnvironment(request, request.query.environment);
        const body = (request.body ?? {}) as { defaultWalletType?: unknown };
        const value = await smartWallets.setDefault(request.params.id, environment, body.defaultWalletType);
        return { success: true, workspaceId: request.params.id, defaultWalletType: value };
      },
    );

    // Part 4.14: the dashboard's (session cookie + CSRF token).
    app.post(
      "/api/workspaces/smart-wallet",
      {
        config: { auth: "session" },
        schema: {
          tags: ["Dashboard"],
          summary: "Create the smart wallet of the signed-in workspace (idempotent)",
        },
      },
      async (request) => {
        const workspaceId = sessionWorkspace(request.principal);
        // Creation sets no default: the environment does not matter here.
        const result = await smartWallets.create(workspaceId, false, "live");
        return {
          smartWallet: {
            address: result.smartWallet.address,
            type: "smart_wallet" as const,
            ownerAddress: result.smartWallet.ownerAddress,
          },
          message: result.created ? "Smart wallet created" : "Smart wallet already exists",
        };
      },
    );

    app.patch(
      "/api/workspaces/smart-wallet",
      {
        config: { auth: "session" },
        validatorCompiler: documentedBodyOnly,
        schema: {
          tags: ["Dashboard"],
          summary:
            "Choose the default wallet of the signed-in workspace, in one environment (live unless ?environment=sandbox)",
          querystring: EnvironmentQuery,
          body: Type.Object({ defaultWalletType: DefaultType }),
        },
      },
      async (request) => {
        const workspaceId = sessionWorkspace(request.principal);
        const environment = settingsEnvironment(request, request.query.environment);
        const body = (request.body ?? {}) as { defaultWalletType?: unknown };
        const value = await smartWallets.setDefault(workspaceId, environment, body.defaultWalletType);
        return { defaultWalletType: value, message: `Default wallet set to ${value}` };
      },
    );
  };

function sessionWorkspace(principal: unknown): string {
  const p = principal as { kind?: string; workspaceId?: string } | null;
  if (p?.kind !== "session" || !p.workspaceId) throw new Unauthorized("Sign in to the dashboard first");
  return p.workspaceId;
}
