import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { CRYPTO_TOKENS } from "../../domain/money.ts";
import { assertWorkspaceAccess, requireKey } from "../../platform/http/auth.ts";
import { OffsetPage } from "../../platform/http/schemas.ts";
import { documentedBodyOnly } from "../../platform/http/validation.ts";
import type { PayoutsService } from "./service.ts";
import type { WalletService } from "./wallet-service.ts";

const Page = Type.Object(OffsetPage);
const WorkspaceId = Type.Object({ id: Type.String() });
const Token = Type.Enum(CRYPTO_TOKENS);

export const payoutsRoutes =
  (payouts: PayoutsService, wallet: WalletService): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.post(
      "/api/v1/payouts",
      {
        validatorCompiler: documentedBodyOnly,
        schema: {
          tags: ["Payouts"],
          summary: "Send a payout on chain and wait for its receipt (synchronous)",
          description:
            "Errors: 400 Insufficient balance / INSUFFICIENT_GAS / validation; 500 PAYOUT_FAILED; 503 CIRCUIT_BREAKER_OPEN.",
          security: [{ apiKey: [] }],
          body: Type.Object({
            tokenSymbol: Token,
            amount: Type.String({ examples: ["25.00"] }),
            destinationAddress: Type.String({ pattern: "^0x[0-9a-fA-F]{40}$" }),
            description: Type.Optional(Type.String({ maxLength: 1000 })),
            metadata: Type.Optional(Type.Record(Type.String(), Type.String())),
            idempotencyKey: Type.Optional(Type.String({ maxLength: 255 })),
            walletType: Type.Optional(Type.Enum(["eoa", "smart_wallet"])),
          }),
        },
      },
      async (request, reply) => {
        const result = await payouts.create(requireKey(request), request.body);
        return reply.status(result.status).send(result.body);
      },
    );

    app.get(
      "/api/v1/payouts",
      {
        schema: {
          tags: ["Payouts"],
          summary: "Completed payouts, newest first",
          security: [{ apiKey: [] }],
          querystring: Page,
        },
      },
      async (request) => payouts.history(requireKey(request), request.query),
    );

    app.post(
      "/api/v1/workspaces/:id/resume",
      {
        schema: {
          tags: ["Payouts"],
          summary: "Resume payouts paused by the circuit breaker (the key's environment)",
          security: [{ apiKey: [] }],
          params: WorkspaceId,
        },
      },
      async (request) => {
        assertWorkspaceAccess(request, request.params.id);
        return payouts.resumePayouts(requireKey(request));
      },
    );

    app.get(
      "/api/v1/workspaces/:id/payout-state",
      {
        schema: {
          tags: ["Payouts"],
          summary: "Circuit-breaker state of the key's environment",
          security: [{ apiKey: [] }],
          params: WorkspaceId,
        },
      },
      async (request) => {
        assertWorkspaceAccess(request, request.params.id);
        return payouts.state(requireKey(request));
      },
    );

    app.get(
      "/api/v1/wallet/balance",
      {
        schema: {
          tags: ["Wallet"],
          summary: "Balances of the workspace EOA and smart wallet",
          security: [{ apiKey: [] }],
        },
      },
      async (request) => wallet.balances(requireKey(request)),
    );

    app.get(
      "/api/v1/wallet/stats",
      {
        schema: {
          tags: ["Wallet"],
          summary: "Counts and volumes of payments and payouts",
          security: [{ apiKey: [] }],
        },
      },
      async (request) => wallet.stats(requireKey(request)),
    );

    app.post(
      "/api/v1/sandbox/faucet",
      {
        validatorCompiler: documentedBodyOnly,
        schema: {
          tags: ["Wallet"],
          summary: "Credit the sandbox ledger of the workspace wallet (sandbox keys only)",
          security: [{ apiKey: [] }],
          body: Type.Object({
            tokenSymbol: Token,
            amount: Type.String(),
            walletType: Type.Optional(Type.Enum(["eoa", "smart_wallet"])),
          }),
        },
      },
      async (request) => wallet.faucet(requireKey(request), request.body),
    );
  };
