import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { ONRAMP_STATUSES } from "../../domain/onramp-state.ts";
import { requireKey } from "../../platform/http/auth.ts";
import { NullableString, OffsetPage } from "../../platform/http/schemas.ts";
import { documentedBodyOnly } from "../../platform/http/validation.ts";
import { NetworkField } from "../networks/routes.ts";
import type { OnrampService } from "./service.ts";

// Fiat on-ramp sessions (D17) at /api/v1/onramp/session and the interface's literal
// /onramp/session (same handler). The body is checked by the domain's rules
// (domain/onramp-request.ts), so every refusal is a 400 naming its field. The customer's IP is the
// request's: the client's own address, or what X-Forwarded-For says only behind a proxy listed in
// TRUST_PROXY (never a header a client made up).

const SessionSchema = Type.Object(
  {
    id: Type.String({ format: "uuid" }),
    provider: Type.String({ description: "card (the card provider's on-ramp) or sandbox" }),
    network: Type.String({ description: "The network it delivers on (D22)" }),
    status: Type.String({ description: ONRAMP_STATUSES.join(", ") }),
    clientSecret: Type.Optional(NullableString()),
    redirectUrl: NullableString(),
    walletAddress: Type.String(),
    walletType: Type.String(),
    destinationCurrency: Type.String(),
    destinationNetwork: Type.String(),
    sourceAmount: NullableString(),
    destinationAmount: NullableString(),
    transactionId: NullableString(),
    creditedAmount: NullableString(),
    completedAt: NullableString(),
    createdAt: Type.String({ format: "date-time" }),
    updatedAt: Type.String({ format: "date-time" }),
  },
  { additionalProperties: true },
);

const SessionBody = Type.Object({
  destinationCurrency: Type.Enum(["USDC", "ETH"]),
  sourceAmount: Type.Optional(
    Type.String({ description: 'US dollars, e.g. "100.00"; or destinationAmount' }),
  ),
  destinationAmount: Type.Optional(
    Type.String({ description: "Of the crypto; or sourceAmount; neither: the customer chooses" }),
  ),
  walletType: Type.Optional(Type.Enum(["eoa", "smart_wallet"])),
  network: NetworkField,
});

export const onrampRoutes =
  (onramp: OnrampService): FastifyPluginAsyncTypebox =>
  async (app) => {
    for (const path of ["/api/v1/onramp/session", "/onramp/session"]) {
      app.post(
        path,
        {
          validatorCompiler: documentedBodyOnly,
          schema: {
            tags: ["On-ramp"],
            summary:
              "Start a fiat on-ramp session: a customer buys crypto with a card, sent to a workspace wallet (D17)",
            description:
              "The wallet (walletType, else the workspace's default) is locked in the session. Provider refusals → 502 with the provider's message (nothing recorded); not configured → 503. In the sandbox the session completes at once on the simulated ledger.",
            security: [{ apiKey: [] }],
            body: SessionBody,
            response: { 201: SessionSchema },
          },
        },
        async (request, reply) =>
          reply.status(201).send(await onramp.create(requireKey(request), request.body, request.ip)),
      );
    }
    app.get(
      "/api/v1/onramp/sessions/:id",
      {
        schema: {
          tags: ["On-ramp"],
          summary: "One on-ramp session",
          security: [{ apiKey: [] }],
          params: Type.Object({ id: Type.String() }),
          response: { 200: SessionSchema },
        },
      },
      async (request) => onramp.get(requireKey(request), request.params.id),
    );
    app.get(
      "/api/v1/onramp/sessions",
      {
        schema: {
          tags: ["On-ramp"],
          summary: "The workspace's on-ramp sessions, newest first",
          security: [{ apiKey: [] }],
          querystring: Type.Object(OffsetPage),
          response: {
            200: Type.Object({
              sessions: Type.Array(SessionSchema),
              total: Type.Integer(),
              limit: Type.Integer(),
              offset: Type.Integer(),
            }),
          },
        },
      },
      async (request) => onramp.list(requireKey(request), request.query),
    );
  };
