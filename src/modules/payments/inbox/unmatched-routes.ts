import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { CRYPTO_TOKENS } from "../../../domain/money.ts";
import { requireKey } from "../../../platform/http/auth.ts";
import { OffsetPage } from "../../../platform/http/schemas.ts";
import { documentedBodyOnly } from "../../../platform/http/validation.ts";
import { NetworkField } from "../../networks/routes.ts";
import { PaymentSchema, UnmatchedTransferSchema } from "../routes.ts";
import type { UnmatchedInbox } from "./unmatched.ts";

// The unmatched inbox (D13, D19): the list, attaching a transfer to a payment, and the sandbox's
// simulated incoming transfer that lands there. Returning one is a refund (refunds/routes.ts).

const Id = Type.Object({ id: Type.String() });

export const unmatchedRoutes =
  (inbox: UnmatchedInbox): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.get(
      "/api/v1/transfers/unmatched",
      {
        schema: {
          tags: ["Payments"],
          summary: "Incoming transfers that matched no pending payment (never lost, listed here)",
          security: [{ apiKey: [] }],
          querystring: Type.Object(OffsetPage),
          response: {
            200: Type.Object({
              transfers: Type.Array(UnmatchedTransferSchema),
              total: Type.Integer(),
            }),
          },
        },
      },
      async (request) => inbox.list(requireKey(request), request.query),
    );

    app.post(
      "/api/v1/transfers/unmatched/:id/attach",
      {
        validatorCompiler: documentedBodyOnly,
        schema: {
          tags: ["Payments"],
          summary: "Attach an unmatched transfer to a pending or expired payment (D19); once",
          description:
            "The payment then settles what the transfer carried (amountReceived), fee and splits computed on it.",
          security: [{ apiKey: [] }],
          params: Id,
          body: Type.Object({ paymentId: Type.String({ format: "uuid" }) }),
          response: { 200: Type.Object({ transfer: UnmatchedTransferSchema, payment: PaymentSchema }) },
        },
      },
      async (request) => inbox.attach(requireKey(request), request.params.id, request.body),
    );

    app.post(
      "/api/v1/transfers/unmatched/:id/keep",
      {
        schema: {
          tags: ["Payments"],
          summary: "Keep an unmatched transfer as the wallet's own money (a top-up of your own); once",
          description:
            "Its money is no longer held from payouts, refunds and swaps. Only an open, confirmed transfer.",
          security: [{ apiKey: [] }],
          params: Id,
          response: { 200: Type.Object({ transfer: UnmatchedTransferSchema }) },
        },
      },
      async (request) => inbox.keep(requireKey(request), request.params.id),
    );

    app.post(
      "/api/v1/sandbox/incoming-transfer",
      {
        validatorCompiler: documentedBodyOnly,
        schema: {
          tags: ["Payments"],
          summary: "Simulate a payer's transfer to the workspace wallet (sandbox keys only, D19)",
          description:
            "Sandbox payments settle at creation, so it lands in the unmatched inbox (status open).",
          security: [{ apiKey: [] }],
          body: Type.Object({
            tokenSymbol: Type.Enum(CRYPTO_TOKENS),
            amount: Type.String(),
            fromAddress: Type.Optional(Type.String({ pattern: "^0x[0-9a-fA-F]{40}$" })),
            walletType: Type.Optional(Type.Enum(["eoa", "smart_wallet"])),
            network: NetworkField,
          }),
          response: { 201: Type.Object({ transfer: UnmatchedTransferSchema }) },
        },
      },
      async (request, reply) =>
        reply.status(201).send(await inbox.sandboxIncoming(requireKey(request), request.body)),
    );
  };
