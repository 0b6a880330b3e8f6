import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { ENVIRONMENTS } from "../../config.ts";
import { CRYPTO_TOKENS } from "../../domain/money.ts";
import { PAYOUT_STATUSES } from "../../domain/payout-state.ts";
import { assertWorkspaceAccess, requireKey } from "../../platform/http/auth.ts";
import { CsvDownload, sendCsv } from "../../platform/http/csv.ts";
import { OffsetPage } from "../../platform/http/schemas.ts";
import { documentedBodyOnly } from "../../platform/http/validation.ts";
import { NetworkField } from "../networks/routes.ts";
import { PAYOUT_CSV_COLUMNS, parsePayoutFilter, payoutsCsv } from "./browse.ts";
import type { PayoutsService } from "./service.ts";
import type { WorkspaceWalletService } from "./workspace-wallet.ts";

const Page = Type.Object(OffsetPage);
const WorkspaceId = Type.Object({ id: Type.String() });
const Token = Type.Enum(CRYPTO_TOKENS);

export const payoutsRoutes =
  (payouts: PayoutsService, wallet: WorkspaceWalletService): FastifyPluginAsyncTypebox =>
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
            network: NetworkField,
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

    app.get(
      "/api/v1/payouts/export.csv",
      {
        schema: {
          tags: ["Payouts"],
          summary: "Download the key's payouts as CSV, newest first (streamed)",
          description: `Every status unless status names one. RFC 4180, UTF-8, header row. Columns: ${PAYOUT_CSV_COLUMNS.join(", ")}. Cells beginning with = + - @ are prefixed with '. An environment other than the key's gives the header row alone.`,
          security: [{ apiKey: [] }],
          querystring: Type.Object({
            status: Type.Optional(Type.Enum(PAYOUT_STATUSES)),
            network: Type.Optional(Type.String({ description: "Only payouts on this network (D22)" })),
            environment: Type.Optional(Type.Enum(ENVIRONMENTS)),
          }),
          response: { 200: CsvDownload },
        },
      },
      async (request, reply) => {
        const tenant = requireKey(request);
        const filter = parsePayoutFilter(request.query);
        const environment = request.query.environment ?? tenant.environment;
        // The other environment's payouts are never shown (D13): its export is the header row.
        const rows = environment === tenant.environment ? payouts.exportPayouts(tenant, filter) : [];
        return sendCsv(reply, `payouts-${environment}.csv`, payoutsCsv(rows));
      },
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
            network: NetworkField,
          }),
        },
      },
      async (request) => wallet.faucet(requireKey(request), request.body),
    );
  };
