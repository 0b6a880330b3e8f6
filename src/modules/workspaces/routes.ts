import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { ENVIRONMENTS } from "../../config.ts";
import { assertWorkspaceAccess, settingsEnvironment } from "../../platform/http/auth.ts";
import type { BrandingService } from "./branding.ts";
import type { WorkspacesService } from "./service.ts";

const IssuedKey = Type.Object({
  id: Type.String(),
  key: Type.String(),
  prefix: Type.String(),
  environment: Type.Enum(ENVIRONMENTS),
  name: Type.Union([Type.String(), Type.Null()]),
  createdAt: Type.String(),
});

export const WorkspaceSchema = Type.Object(
  {
    id: Type.String({ format: "uuid" }),
    workspaceId: Type.String({ format: "uuid" }),
    name: Type.String(),
    settlement_address: Type.Union([Type.String(), Type.Null()]),
    defaultWalletType: Type.Union([Type.Literal("workspace"), Type.Literal("smart_wallet")]),
    adminEmail: Type.Union([Type.String(), Type.Null()]),
    displayName: Type.Union([Type.String(), Type.Null()], {
      description: "The name payers see on the hosted page (D25); null: `name`",
    }),
    brandColor: Type.Union([Type.String(), Type.Null()], {
      description: "The hosted page's accent colour, lower-case #rrggbb; null: the page's own",
    }),
    eoa: Type.Object({ address: Type.String(), createdAt: Type.String() }),
    smartWallet: Type.Union([
      Type.Object({
        address: Type.String(),
        walletId: Type.String(),
        createdAt: Type.String(),
        ownerAddress: Type.String(),
        type: Type.Literal("smart_wallet"),
      }),
      Type.Null(),
    ]),
    createdAt: Type.String(),
  },
  { additionalProperties: true },
);

export const workspacesRoutes =
  (workspaces: WorkspacesService, branding: BrandingService): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.post(
      "/api/v1/workspaces",
      {
        config: { auth: "admin" },
        schema: {
          tags: ["Workspaces"],
          summary: "Create a workspace with its EOA wallet and one sandbox and one live key (admin secret)",
          security: [{ adminSecret: [] }],
          body: Type.Object({
            name: Type.String({ minLength: 1, maxLength: 200 }),
            settlementAddress: Type.Optional(Type.String({ pattern: "^0x[0-9a-fA-F]{40}$" })),
            adminEmail: Type.Optional(Type.String({ format: "email", maxLength: 254 })),
            adminPassword: Type.Optional(Type.String({ minLength: 12, maxLength: 200 })),
          }),
          response: {
            201: Type.Object({
              workspace: WorkspaceSchema,
              apiKeys: Type.Object({ test: IssuedKey, live: IssuedKey }),
            }),
          },
        },
      },
      async (request, reply) => reply.status(201).send(await workspaces.create(request.body)),
    );

    app.get(
      "/api/v1/workspaces/:id",
      {
        config: { auth: "key-or-admin" },
        schema: {
          tags: ["Workspaces"],
          summary: "Read a workspace (its own key, or the admin secret)",
          security: [{ apiKey: [] }, { adminSecret: [] }],
          params: Type.Object({ id: Type.String() }),
          response: { 200: Type.Object({ workspace: WorkspaceSchema }) },
        },
      },
      async (request) => {
        assertWorkspaceAccess(request, request.params.id);
        // defaultWalletType is the reader's environment's (D21): a key's own, the admin's live.
        const environment = settingsEnvironment(request, undefined);
        return { workspace: await workspaces.get(request.params.id, environment) };
      },
    );

    app.patch(
      "/api/v1/workspaces/:id",
      {
        config: { auth: "key-or-admin" },
        schema: {
          tags: ["Workspaces"],
          summary: "Set the checkout branding a payer sees: display name and brand colour (null clears)",
          security: [{ apiKey: [] }, { adminSecret: [] }],
          params: Type.Object({ id: Type.String() }),
          body: Type.Object(
            {
              displayName: Type.Optional(
                Type.Union([Type.String({ minLength: 1, maxLength: 200 }), Type.Null()]),
              ),
              brandColor: Type.Optional(Type.Union([Type.String({ maxLength: 7 }), Type.Null()])),
            },
            { additionalProperties: false },
          ),
          response: { 200: Type.Object({ workspace: WorkspaceSchema }) },
        },
      },
      async (request) => {
        assertWorkspaceAccess(request, request.params.id);
        await branding.setIdentity(request.params.id, request.body);
        const environment = settingsEnvironment(request, undefined);
        return { workspace: await workspaces.get(request.params.id, environment) };
      },
    );
  };
