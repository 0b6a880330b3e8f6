import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyReply } from "fastify";
import { Type } from "typebox";
import { requireKey } from "../../platform/http/auth.ts";
import { NullableString, OffsetPage } from "../../platform/http/schemas.ts";
import { documentedBodyAndQuery } from "../../platform/http/validation.ts";
import { NetworkField } from "../networks/routes.ts";
import type { SwapAnswer, SwapsService } from "./service.ts";
import { SWAP_STATUSES } from "./view.ts";

// Token swaps (D16) at /api/v1/swap/quote and /api/v1/swap, and at the interface's literal paths
// /swap/quote and /swap (same handlers). Query and body are checked by the domain's rules
// (domain/swap-request.ts), so every refusal is a 400 naming its field.

const Token = Type.Enum(["ETH", "USDC", "ADAO", "DAI"]);
const Amount = (example: string) => Type.String({ examples: [example] });
const Route = Type.Array(Type.Object({ protocol: Type.String(), pool: Type.String(), fee: Type.Integer() }));

const QuoteSchema = Type.Object({
  quoteId: Type.String({ format: "uuid" }),
  network: Type.String({ description: "The network it trades on (D22)" }),
  side: Type.String({ description: "exact_in (sellAmount given) or exact_out (buyAmount given)" }),
  sellToken: Type.String({ examples: ["USDC"] }),
  buyToken: Type.String({ examples: ["ETH"] }),
  sellAmount: Amount("100"),
  buyAmount: Amount("0.033"),
  minBuyAmount: Amount("0.032835"),
  maxSellAmount: Type.String({ description: "The most an exact-output swap may sell (its slippage limit)" }),
  price: Type.String({ description: "Units of buyToken per unit of sellToken at this quote" }),
  priceImpactBps: Type.Integer(),
  slippageBps: Type.Integer(),
  route: Route,
  walletType: Type.String({ examples: ["eoa"] }),
  fromAddress: Type.String(),
  gasEstimate: Type.String({
    description: "Gas units of the swap (sponsored for a smart wallet; 0 in the sandbox)",
  }),
  expiresAt: Type.String({ format: "date-time" }),
});

const SwapSchema = Type.Object(
  {
    swapId: Type.String({ format: "uuid" }),
    status: Type.Enum(SWAP_STATUSES),
    network: Type.String({ description: "The network it trades on (D22)" }),
    quoteId: NullableString(),
    side: Type.String(),
    sellToken: Type.String(),
    buyToken: Type.String(),
    sellAmount: Type.String({
      description: "Sold (read from the chain once completed; the quote's until then)",
    }),
    buyAmount: Type.String({
      description: "Received (read from the chain once completed; the quote's until then)",
    }),
    minBuyAmount: Type.String(),
    maxSellAmount: Type.String(),
    slippageBps: Type.Integer(),
    walletType: Type.String(),
    fromAddress: Type.String(),
    txHash: NullableString(),
    userOpHash: Type.Optional(Type.String()),
    error: Type.Optional(Type.String({ description: "Why a failed swap failed (its revert)" })),
    createdAt: Type.String({ format: "date-time" }),
    completedAt: NullableString(),
  },
  { additionalProperties: true },
);

const QuoteQuery = Type.Object({
  sellToken: Token,
  buyToken: Token,
  sellAmount: Type.Optional(Type.String({ description: "Exactly one of sellAmount and buyAmount" })),
  buyAmount: Type.Optional(Type.String()),
  walletType: Type.Optional(Type.Enum(["eoa", "smart_wallet"])),
  network: NetworkField,
  slippageBps: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000, default: 50 })),
});

const SwapBody = Type.Object({
  quoteId: Type.Optional(Type.String({ format: "uuid", description: "Or the quote's own parameters" })),
  sellToken: Type.Optional(Token),
  buyToken: Type.Optional(Token),
  sellAmount: Type.Optional(Type.String()),
  buyAmount: Type.Optional(Type.String()),
  walletType: Type.Optional(Type.Enum(["eoa", "smart_wallet"])),
  network: NetworkField,
  slippageBps: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
});

const KeyHeader = Type.Object({ "idempotency-key": Type.Optional(Type.String()) });

function send(reply: FastifyReply, answer: SwapAnswer) {
  if (answer.replayed) reply.header("idempotent-replayed", "true");
  // Completed or failed: 200 (D16); still on its way (the reconciler finishes it): 202.
  return reply.status(answer.swap.status === "pending" ? 202 : 200).send(answer.swap);
}

function keyOf(header: string | string[] | undefined): string | undefined {
  return Array.isArray(header) ? header[0] : header;
}

export const swapsRoutes =
  (swaps: SwapsService): FastifyPluginAsyncTypebox =>
  async (app) => {
    for (const path of ["/api/v1/swap/quote", "/swap/quote"]) {
      app.get(
        path,
        {
          validatorCompiler: documentedBodyAndQuery,
          schema: {
            tags: ["Swaps"],
            summary: "Quote a token swap from a workspace wallet (D16); valid 30 s",
            description:
              "The best fill of the configured pools now (Uniswap v3 on a network; the sandbox's constant-product pools), with the limits a swap of it runs with. No pool can fill it: 400 No liquidity for this pair.",
            security: [{ apiKey: [] }],
            querystring: QuoteQuery,
            response: { 200: QuoteSchema },
          },
        },
        async (request) => swaps.quote(requireKey(request), request.query as Record<string, unknown>),
      );
      app.post(
        path.replace("/quote", ""),
        {
          validatorCompiler: documentedBodyAndQuery,
          schema: {
            tags: ["Swaps"],
            summary: "Execute a quote (or a quote's parameters) from its workspace wallet (D16)",
            description:
              "Re-quoted first: past the quote's limits → 409 Price moved beyond slippage, nothing sent. Expired quote → 400. A swap moves money like a payout (balance, gas, circuit breaker). Send an Idempotency-Key header to make retries safe.",
            security: [{ apiKey: [] }],
            headers: KeyHeader,
            body: SwapBody,
            response: { 200: SwapSchema, 202: SwapSchema },
          },
        },
        async (request, reply) =>
          send(
            reply,
            await swaps.execute(requireKey(request), request.body, keyOf(request.headers["idempotency-key"])),
          ),
      );
    }

    app.get(
      "/api/v1/swaps",
      {
        schema: {
          tags: ["Swaps"],
          summary: "The workspace's swaps, newest first",
          security: [{ apiKey: [] }],
          querystring: Type.Object(OffsetPage),
          response: {
            200: Type.Object({
              swaps: Type.Array(SwapSchema),
              total: Type.Integer(),
              limit: Type.Integer(),
              offset: Type.Integer(),
            }),
          },
        },
      },
      async (request) => swaps.list(requireKey(request), request.query),
    );

    app.get(
      "/api/v1/swaps/:id",
      {
        schema: {
          tags: ["Swaps"],
          summary: "One swap",
          security: [{ apiKey: [] }],
          params: Type.Object({ id: Type.String() }),
          response: { 200: SwapSchema },
        },
      },
      async (request) => swaps.get(requireKey(request), request.params.id),
    );
  };
