import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyReply } from "fastify";
import { Type } from "typebox";
import { REFUND_STATUSES } from "../../domain/refund-state.ts";
import { requireKey } from "../../platform/http/auth.ts";
import { NullableString, OffsetPage } from "../../platform/http/schemas.ts";
import { documentedBodyOnly } from "../../platform/http/validation.ts";
import { NetworkField } from "../networks/routes.ts";
import type { RefundAnswer, RefundsService } from "./service.ts";

// Refunds of payments and returns of unmatched transfers (D19). Bodies are checked by the
// domain's rules (domain/refund-request.ts) so every refusal is the spec's 400 with its message.

export const RefundSchema = Type.Object(
  {
    id: Type.String({ format: "uuid" }),
    paymentId: NullableString(),
    amount: Type.String({ examples: ["25.00"] }),
    tokenSymbol: Type.String({ examples: ["USDC"] }),
    network: NullableString({ description: "The network it goes back on (D22); null for a card refund" }),
    destinationAddress: NullableString(),
    status: Type.Enum(REFUND_STATUSES),
    txHash: NullableString(),
    reason: NullableString(),
    createdAt: Type.String({ format: "date-time" }),
    userOpHash: Type.Optional(Type.String()),
    unmatchedTransferId: Type.Optional(Type.String({ format: "uuid" })),
    error: Type.Optional(Type.String({ description: "Why a failed refund failed" })),
  },
  { additionalProperties: true },
);

const RefundBody = Type.Object({
  amount: Type.Optional(
    Type.String({ description: "Decimal string; default: what is left to refund", examples: ["25.00"] }),
  ),
  destinationAddress: Type.Optional(
    Type.String({
      description: "Crypto only; default: the payment's payerAddress",
      pattern: "^0x[0-9a-fA-F]{40}$",
    }),
  ),
  walletType: Type.Optional(Type.Enum(["eoa", "smart_wallet"])),
  network: NetworkField,
  reason: Type.Optional(Type.String({ maxLength: 500 })),
});

const ReturnBody = Type.Object({
  destinationAddress: Type.Optional(
    Type.String({ description: "Default: the transfer's sender", pattern: "^0x[0-9a-fA-F]{40}$" }),
  ),
  network: NetworkField,
  reason: Type.Optional(Type.String({ maxLength: 500 })),
});

const Id = Type.Object({ id: Type.String() });
const KeyHeader = Type.Object({ "idempotency-key": Type.Optional(Type.String()) });
const Answer = Type.Object({ refund: RefundSchema });

function send(reply: FastifyReply, answer: RefundAnswer) {
  if (answer.replayed) reply.header("idempotent-replayed", "true");
  return reply.status(201).send({ refund: answer.refund });
}

function keyOf(header: string | string[] | undefined): string | undefined {
  return Array.isArray(header) ? header[0] : header;
}

export const refundsRoutes =
  (refunds: RefundsService): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.post(
      "/api/v1/payments/:id/refunds",
      {
        validatorCompiler: documentedBodyOnly,
        schema: {
          tags: ["Refunds"],
          summary: "Refund a forwarded payment, in part or whole (D19)",
          description:
            "Crypto: a transfer of the payment's token from the workspace wallet (payout rules: balance, gas, circuit breaker). Card: a refund at the provider. Send an Idempotency-Key header to make retries safe.",
          security: [{ apiKey: [] }],
          params: Id,
          headers: KeyHeader,
          body: RefundBody,
          response: { 201: Answer },
        },
      },
      async (request, reply) =>
        send(
          reply,
          await refunds.create(
            requireKey(request),
            request.params.id,
            request.body,
            keyOf(request.headers["idempotency-key"]),
          ),
        ),
    );

    app.get(
      "/api/v1/payments/:id/refunds",
      {
        schema: {
          tags: ["Refunds"],
          summary: "A payment's refunds, oldest first",
          security: [{ apiKey: [] }],
          params: Id,
          querystring: Type.Object(OffsetPage),
          response: {
            200: Type.Object({
              refunds: Type.Array(RefundSchema),
              total: Type.Integer(),
              limit: Type.Integer(),
              offset: Type.Integer(),
            }),
          },
        },
      },
      async (request) => refunds.list(requireKey(request), request.params.id, request.query),
    );

    app.post(
      "/api/v1/transfers/unmatched/:id/return",
      {
        validatorCompiler: documentedBodyOnly,
        schema: {
          tags: ["Refunds"],
          summary: "Send an unmatched transfer back, by default to its sender (D19); once",
          description: "A refund with paymentId null, from the wallet the transfer reached.",
          security: [{ apiKey: [] }],
          params: Id,
          headers: KeyHeader,
          body: ReturnBody,
          response: { 201: Answer },
        },
      },
      async (request, reply) =>
        send(
          reply,
          await refunds.returnTransfer(
            requireKey(request),
            request.params.id,
            request.body,
            keyOf(request.headers["idempotency-key"]),
          ),
        ),
    );
  };
