import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { requireKey } from "../../platform/http/auth.ts";
import { documentedBodyOnly } from "../../platform/http/validation.ts";
import type { X402Service } from "./service.ts";

// The x402 v2 facilitator endpoints (D23): the stock middleware's facilitator URL is
// `<base>/api/v1/x402`, with the workspace key as a Bearer token. Bodies are x402's own shapes,
// checked by x402's schemas in the service (request.ts) so that a malformed one is a 400 naming
// the problem; a well-formed payment this facilitator refuses is answered in x402's terms (200,
// isValid or success false, with the specification's reason).

const Request = Type.Object(
  {
    x402Version: Type.Optional(Type.Integer({ examples: [2] })),
    paymentPayload: Type.Object({}, { additionalProperties: true, description: "x402 v2 PaymentPayload" }),
    paymentRequirements: Type.Object(
      {},
      {
        additionalProperties: true,
        description: "x402 v2 PaymentRequirements (the one the payload accepted)",
      },
    ),
  },
  { additionalProperties: false },
);

const VerifyResponse = Type.Object(
  {
    isValid: Type.Boolean(),
    invalidReason: Type.Optional(Type.String()),
    invalidMessage: Type.Optional(Type.String()),
    payer: Type.Optional(Type.String()),
  },
  { additionalProperties: true },
);

const SettleResponse = Type.Object(
  {
    success: Type.Boolean(),
    errorReason: Type.Optional(Type.String()),
    errorMessage: Type.Optional(Type.String()),
    payer: Type.Optional(Type.String()),
    transaction: Type.String({ description: "The settlement's transaction hash; empty when none was sent" }),
    network: Type.String({ examples: ["eip155:8453"] }),
    extra: Type.Optional(
      Type.Object(
        { paymentId: Type.Optional(Type.String({ format: "uuid" })) },
        {
          additionalProperties: true,
          description: "paymentId: the payment this settlement is (GET /api/v1/payments/{id})",
        },
      ),
    ),
  },
  { additionalProperties: true },
);

export const x402Routes =
  (x402: X402Service): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.get(
      "/api/v1/x402/supported",
      {
        schema: {
          tags: ["x402"],
          operationId: "x402Supported",
          summary: "The payment kinds this workspace's facilitator settles (x402 v2 /supported)",
          security: [{ apiKey: [] }],
          response: {
            200: Type.Object({
              kinds: Type.Array(
                Type.Object({
                  x402Version: Type.Integer(),
                  scheme: Type.String(),
                  network: Type.String(),
                  extra: Type.Optional(
                    Type.Record(Type.String(), Type.Unknown(), {
                      description:
                        "upto: `facilitatorAddress`, the facilitator its payers name in what they sign",
                    }),
                  ),
                }),
              ),
              extensions: Type.Array(Type.String()),
              signers: Type.Record(Type.String(), Type.Array(Type.String())),
            }),
          },
        },
      },
      async (request) => x402.supported(requireKey(request)),
    );

    app.post(
      "/api/v1/x402/verify",
      {
        validatorCompiler: documentedBodyOnly,
        schema: {
          tags: ["x402"],
          operationId: "x402Verify",
          summary: "Check a payment payload against its requirements without settling it (x402 v2 /verify)",
          security: [{ apiKey: [] }],
          body: Request,
          response: { 200: VerifyResponse },
        },
      },
      async (request) => x402.verify(requireKey(request), request.body),
    );

    app.post(
      "/api/v1/x402/settle",
      {
        validatorCompiler: documentedBodyOnly,
        schema: {
          tags: ["x402"],
          operationId: "x402Settle",
          summary: "Settle a payment payload: the payer's transfer, recorded as a payment (x402 v2 /settle)",
          description:
            "Idempotent by the payment-identifier extension: the same id and payload answer the same; the same id with another payload is a 409.",
          security: [{ apiKey: [] }],
          body: Request,
          response: { 200: SettleResponse },
        },
      },
      async (request) => x402.settle(requireKey(request), request.body),
    );
  };
