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

const DefaultWalletType = Type.Enum(["workspace", "smart_wallet"], {
  description: "The wallet used when a call names no walletType, in the environment acted on (D21)",
});

const CreatedAnswer = Type.Object(
  {
    success: Type.Literal(true),
    workspaceId: Type.String(),
    smartWallet: Type.Object(
      {
        address: Type.String(),
        ownerAddress: Type.String({ description: "The workspace EOA that owns it" }),
        walletId: Type.String({ format: "uuid", description: "The wallet record's UUID" }),
      },
      { additionalProperties: true },
    ),
    defaultWalletType: DefaultWalletType,
  },
  { additionalProperties: true },
);

const WalletsAnswer = Type.Object(
  {
    workspaceId: Type.String(),
    eoa: Type.Union(
      [
        Type.Object(
          { address: Type.String(), createdAt: Type.String({ format: "date-time" }) },
          { additionalProperties: true },
        ),
        Type.Null(),
      ],
      { description: "The workspace EOA; null when none is provisioned" },
    ),
    smartWallet: Type.Union(
      [
        Type.Object(
          {
            address: Type.String(),
            walletId: Type.String({ format: "uuid", description: "The wallet record's UUID" }),
            createdAt: Type.String({ format: "date-time" }),
          },
          { additionalProperties: true },
        ),
        Type.Null(),
      ],
      { description: "The smart wallet; null when the workspace has none" },
    ),
    defaultWalletType: DefaultWalletType,
  },
  { additionalProperties: true },
);

const DefaultSetAnswer = Type.Object(
  { success: Type.Literal(true), workspaceId: Type.String(), defaultWalletType: DefaultWalletType },
  { additionalProperties: true },
);

const DashboardCreatedAnswer = Type.Object(
  {
    smartWallet: Type.Object(
      {
        address: Type.String(),
        type: Type.Literal("smart_wallet"),
        ownerAddress: Type.String({ description: "The workspace EOA that owns it" }),
      },
      { additionalProperties: true },
    ),
    message: Type.String({ examples: ["Smart wallet created", "Smart wallet already exists"] }),
  },
  { additionalProperties: true },
);

const DashboardDefaultAnswer = Type.Object(
  {
    defaultWalletType: DefaultWalletType,
    message: Type.String({ examples: ["Default wallet set to smart_wallet"] }),
  },
  { additionalProperties: true },
);

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
          response: { 200: CreatedAnswer, 201: CreatedAnswer },
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
          response: { 200: WalletsAnswer },
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
          response: { 200: DefaultSetAnswer },
        },
      },
      async (request) => {
        assertWorkspaceAccess(request, request.params.id);
        const environment = settingsEnvironment(request, request.query.environment);
        const body = (request.body ?? {}) as { defaultWalletType?: unknown };
        const value = await smartWallets.setDefault(request.params.id, environment, body.defaultWalletType);
        return { success: true as const, workspaceId: request.params.id, defaultWalletType: value };
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
          response: { 200: DashboardCreatedAnswer },
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
          response: { 200: DashboardDefaultAnswer },
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
