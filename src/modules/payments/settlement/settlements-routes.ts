import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { requireKey } from "../../../platform/http/auth.ts";
import { OffsetPage } from "../../../platform/http/schemas.ts";
import type { SettlementsService } from "./settlements-service.ts";

// GET /api/v1/settlements (paged like payments, filter paymentId) and /{id} (D15).

const Amount = Type.String({ examples: ["98.50"] });
const Settlement = Type.Object({
  settlementId: Type.String({ format: "uuid" }),
  paymentIds: Type.Array(Type.String({ format: "uuid" })),
  network: Type.Union([Type.String(), Type.Null()], { description: "The network it moved on (D22)" }),
  tokenSymbol: Type.String(),
  grossAmount: Amount,
  feeAmount: Amount,
  netAmount: Amount,
  merchantAmount: Amount,
  merchantWallet: Type.Union([Type.String(), Type.Null()]),
  txRef: Type.Union([Type.String(), Type.Null()]),
  splits: Type.Array(
    Type.Object({
      splitId: Type.String({ format: "uuid" }),
      label: Type.String(),
      amount: Amount,
      percent_bps: Type.Integer(),
      destination: Type.String(),
      status: Type.Union([Type.Literal("sent"), Type.Literal("failed")]),
      txRef: Type.Union([Type.String(), Type.Null()]),
    }),
  ),
  createdAt: Type.String({ format: "date-time" }),
});

export const settlementsRoutes =
  (settlements: SettlementsService): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.get(
      "/api/v1/settlements",
      {
        schema: {
          tags: ["Splits"],
          summary: "List the settlements of the key's environment, most recent first",
          description:
            "One settlement per crypto payment, recorded when it was forwarded (or failed), with its split breakdown.",
          security: [{ apiKey: [] }],
          querystring: Type.Object({
            paymentId: Type.Optional(Type.String({ maxLength: 100 })),
            ...OffsetPage,
          }),
          response: { 200: Type.Object({ settlements: Type.Array(Settlement), total: Type.Integer() }) },
        },
      },
      async (request) => settlements.list(requireKey(request), request.query),
    );

    app.get(
      "/api/v1/settlements/:id",
      {
        schema: {
          tags: ["Splits"],
          summary: "Read a settlement",
          security: [{ apiKey: [] }],
          params: Type.Object({ id: Type.String() }),
          response: { 200: Type.Object({ settlement: Settlement }) },
        },
      },
      async (request) => ({ settlement: await settlements.get(requireKey(request), request.params.id) }),
    );
  };
