import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyReply } from "fastify";
import { Type } from "typebox";
import { ENVIRONMENTS } from "../../config.ts";
import { CRYPTO_TOKENS } from "../../domain/money.ts";
import { PAYOUT_STATUSES } from "../../domain/payout-state.ts";
import { assertWorkspaceAccess, requireKey } from "../../platform/http/auth.ts";
import { CsvDownload, sendCsv } from "../../platform/http/csv.ts";
import { NullableString, OffsetPage } from "../../platform/http/schemas.ts";
import { documentedBodyOnly } from "../../platform/http/validation.ts";
import { NetworkField } from "../networks/routes.ts";
import type { PayoutResponse } from "./answers.ts";
import { PAYOUT_CSV_COLUMNS, parsePayoutFilter, payoutsCsv } from "./browse.ts";
import type { PayoutsService } from "./service.ts";
import type { WorkspaceWalletService } from "./workspace-wallet.ts";

const Page = Type.Object(OffsetPage);
const WorkspaceId = Type.Object({ id: Type.String() });
const Token = Type.Enum(CRYPTO_TOKENS);
const Environment = Type.Enum(ENVIRONMENTS);
const PayoutStatus = Type.Enum(PAYOUT_STATUSES);

/** A payout as answered and announced (view.ts, PayoutView; part 2, "Payout (response object)"). */
export const PayoutSchema = Type.Object(
  {
    txHash: NullableString({
      description: "The transaction; for a smart wallet payout, the bundle transaction that carried it",
    }),
    userOpHash: Type.Optional(Type.String({ description: "A smart wallet payout's user operation" })),
    amount: Type.String({ examples: ["25.00"] }),
    tokenSymbol: Type.String({ examples: ["USDC"] }),
    destinationAddress: Type.String(),
    fromAddress: Type.String(),
    environment: Environment,
    network: Type.String({ description: "The network it moves on (D22)" }),
    status: PayoutStatus,
    description: NullableString(),
    metadata: Type.Record(Type.String(), Type.String()),
  },
  { additionalProperties: true },
);

/** The answer to a repeated idempotencyKey whose original payout completed. */
const RepeatedPayout = Type.Object(
  {
    txHash: NullableString(),
    status: Type.Literal("completed"),
    note: Type.String({ examples: ["Duplicate idempotencyKey; original result returned"] }),
  },
  { additionalProperties: true },
);

const PayoutAnswer = Type.Object(
  {
    payout: Type.Union([PayoutSchema, RepeatedPayout], {
      description: "The completed payout, or for a repeated idempotencyKey the original's hash and status",
    }),
    timestamp: Type.Optional(
      Type.String({ format: "date-time", description: "When it completed; absent on a repeat" }),
    ),
  },
  { additionalProperties: true },
);

const PendingPayoutAnswer = Type.Object(
  {
    payout: PayoutSchema,
    timestamp: Type.String({ format: "date-time" }),
  },
  { additionalProperties: true },
);

const PayoutHistory = Type.Object(
  {
    payouts: Type.Array(
      Type.Object(
        {
          txHash: NullableString(),
          type: Type.Enum(["ETH", "ERC20"], { description: "ETH for the native token, else ERC20" }),
          details: Type.Object(
            {
              amount: Type.String({ examples: ["25.00"] }),
              tokenSymbol: Type.String({ examples: ["USDC"] }),
              destinationAddress: Type.String(),
              description: Type.Optional(Type.String({ description: "Present when the payout has one" })),
            },
            { additionalProperties: true },
          ),
          createdAt: Type.String({ format: "date-time" }),
        },
        { additionalProperties: true },
      ),
    ),
    total: Type.Integer(),
    limit: Type.Integer(),
    offset: Type.Integer(),
  },
  { additionalProperties: true },
);

const ResumeAnswer = Type.Object(
  {
    resumed: Type.Boolean({ description: "False when payouts were not paused (nothing changed)" }),
    workspace: Type.String({ description: "The workspace's name" }),
    previousStreak: Type.Integer({ description: "Consecutive failures before the resume" }),
    previousReason: Type.String({ description: "The last failure's reason; empty when none" }),
  },
  { additionalProperties: true },
);

const BreakerStateSchema = Type.Object(
  {
    status: Type.Enum(["active", "paused"]),
    failStreak: Type.Integer({ description: "Consecutive failed payouts" }),
    pausedAt: NullableString({
      description: "When the breaker paused payouts (date-time); null when active",
    }),
    reason: NullableString({ description: "The last failure's reason" }),
  },
  { additionalProperties: true },
);

/** Amounts per token symbol (decimal strings): open-ended, the network's tokens. */
const TokenAmounts = (description: string) =>
  Type.Record(Type.String(), Type.String(), { description, examples: [{ USDC: "5.00" }] });

const WalletBalances = Type.Object(
  {
    address: Type.String(),
    balances: TokenAmounts("Balance per token; empty where the environment has no network"),
    held: Type.Optional(
      TokenAmounts("What of the balances open inbox transfers hold (issue 39); present only then"),
    ),
  },
  { additionalProperties: true },
);
const NullableWallet = (description: string) => Type.Union([WalletBalances, Type.Null()], { description });

const WalletsOnNetwork = Type.Object(
  {
    eoa: NullableWallet("The workspace EOA; null when it has none"),
    smartWallet: NullableWallet("The smart wallet; null when the workspace has none"),
  },
  { additionalProperties: true },
);

const BalanceAnswer = Type.Object(
  {
    environment: Environment,
    eoa: NullableWallet("The workspace EOA on the environment's default network; null when it has none"),
    smartWallet: NullableWallet(
      "The smart wallet on the environment's default network; null when the workspace has none",
    ),
    networks: Type.Record(Type.String(), WalletsOnNetwork, {
      description: "The same per network id of the environment (D22)",
    }),
  },
  { additionalProperties: true },
);

const StatusTotals = Type.Array(
  Type.Object(
    {
      status: Type.String(),
      tokenSymbol: Type.String({ examples: ["USDC"] }),
      count: Type.Integer(),
      volume: Type.String({ examples: ["100.00"] }),
    },
    { additionalProperties: true },
  ),
);

const StatsAnswer = Type.Object(
  {
    environment: Environment,
    payments: StatusTotals,
    payouts: StatusTotals,
    swaps: Type.Array(
      Type.Object(
        {
          sellToken: Type.String(),
          buyToken: Type.String(),
          count: Type.Integer(),
          sold: Type.String(),
          bought: Type.String(),
        },
        { additionalProperties: true },
      ),
      { description: "Completed swaps per pair of tokens" },
    ),
    networks: Type.Record(
      Type.String(),
      Type.Object({ payments: StatusTotals, payouts: StatusTotals }, { additionalProperties: true }),
      { description: "Each network's own totals (D22); card payments count in the sums only" },
    ),
  },
  { additionalProperties: true },
);

const FaucetAnswer = Type.Object(
  {
    tokenSymbol: Type.String({ examples: ["USDC"] }),
    walletType: Type.Optional(
      Type.Enum(["eoa", "smart_wallet"], {
        description: "The workspace wallet credited; absent when walletId named an agent or user wallet",
      }),
    ),
    walletId: Type.Optional(
      Type.String({ description: "The agent or user wallet credited, when the request named one" }),
    ),
    address: Type.String(),
    network: Type.String({ description: "The network credited (D22)" }),
    balance: Type.String({ description: "The new balance", examples: ["100.00"] }),
  },
  { additionalProperties: true },
);

/** A payout's answer with its status: 200 completed (or a completed original's repeat), 202 still pending. */
function sendPayout(reply: FastifyReply, result: PayoutResponse) {
  return reply.status(result.status).send(result.body);
}

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
          response: { 200: PayoutAnswer, 202: PendingPayoutAnswer },
        },
      },
      async (request, reply) => sendPayout(reply, await payouts.create(requireKey(request), request.body)),
    );

    app.get(
      "/api/v1/payouts",
      {
        schema: {
          tags: ["Payouts"],
          summary: "Completed payouts, newest first",
          security: [{ apiKey: [] }],
          querystring: Page,
          response: { 200: PayoutHistory },
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
          response: { 200: ResumeAnswer },
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
          response: { 200: BreakerStateSchema },
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
          response: { 200: BalanceAnswer },
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
          response: { 200: StatsAnswer },
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
          response: { 200: FaucetAnswer },
        },
      },
      async (request) => wallet.faucet(requireKey(request), request.body),
    );
  };
