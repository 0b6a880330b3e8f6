import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { ENVIRONMENTS } from "../../config.ts";
import { CARD_CURRENCY, CRYPTO_TOKENS } from "../../domain/money.ts";
import { PAYMENT_STATUSES } from "../../domain/payment-state.ts";
import { UNMATCHED_STATUSES } from "../../domain/unmatched-state.ts";
import { MAX_DESCRIPTION } from "../../domain/validation.ts";
import { requireKey } from "../../platform/http/auth.ts";
import { CsvDownload, sendCsv } from "../../platform/http/csv.ts";
import { NullableString, OffsetPage } from "../../platform/http/schemas.ts";
import { documentedBodyOnly } from "../../platform/http/validation.ts";
import { NetworkField } from "../networks/routes.ts";
import {
  PAYMENT_CSV_COLUMNS,
  PAYMENT_METHODS,
  PAYMENT_TOKENS,
  parsePaymentFilter,
  paymentsCsv,
} from "./browse.ts";
import type { PaymentsService } from "./service.ts";

const Status = Type.Enum(PAYMENT_STATUSES);
const Environment = Type.Enum(ENVIRONMENTS);
// Nullable fields as `type: [T, "null"]` rather than anyOf (platform/http/schemas.ts).
const NullableObject = <T>(properties?: Record<string, unknown>) =>
  Type.Unsafe<T | null>({
    type: ["object", "null"],
    additionalProperties: true,
    ...(properties ? { properties } : {}),
  });

export const PaymentSchema = Type.Object(
  {
    id: Type.String({ format: "uuid" }),
    status: Status,
    paymentMethod: Type.Union([Type.Literal("crypto"), Type.Literal("card")]),
    paymentProvider: Type.Union([Type.Literal("onchain"), Type.Literal("card")]),
    tokenSymbol: Type.String({ examples: ["USDC"] }),
    grossAmount: Type.String({ examples: ["100.00"] }),
    feeAmount: Type.String({ examples: ["1.50"] }),
    netAmount: Type.String({ examples: ["98.50"] }),
    merchantWallet: NullableString(),
    walletType: Type.Union([Type.Literal("eoa"), Type.Literal("smart_wallet")]),
    receivingAddress: NullableString(),
    environment: Environment,
    network: NullableString({
      description:
        "The network it is paid on (D22); null for a card payment, and for one payable on several networks until a transfer is detected",
    }),
    networks: Type.Optional(
      Type.Array(Type.String(), {
        description: "Present on a payment payable on several networks: the networks the payer may choose",
      }),
    ),
    description: NullableString(),
    metadata: Type.Record(Type.String(), Type.String()),
    returnUrl: NullableString(),
    cancelUrl: NullableString(),
    expiresAt: Type.String({ format: "date-time" }),
    createdAt: Type.String({ format: "date-time" }),
    updatedAt: Type.String({ format: "date-time" }),
    txHash: NullableString(),
    payerAddress: NullableString(),
    settlementTxHashes: NullableObject<{ net: string | null; fee: string | null }>({
      net: { type: ["string", "null"] },
      fee: { type: ["string", "null"] },
    }),
    failureReason: NullableString(),
    checkoutUrl: NullableString(),
    cardCheckoutSessionId: NullableString(),
    lastPaymentError: NullableObject<Record<string, unknown>>(),
    amountReceived: NullableString(),
    refundedAmount: Type.String({ examples: ["0.00"] }),
    x402: Type.Optional(
      Type.Object(
        { payer: Type.String(), resource: NullableString(), scheme: Type.String() },
        { description: "Settled through the x402 facilitator (D23); present only then" },
      ),
    ),
  },
  { additionalProperties: true },
);

/** An incoming transfer that matched no payment (D13), and what became of it (D19). */
export const UnmatchedTransferSchema = Type.Object({
  id: Type.String({ format: "uuid" }),
  status: Type.Enum(UNMATCHED_STATUSES, {
    description:
      "onramp: an on-ramp session's delivery (D17); dropped: a reorganisation dropped its transaction (open again once it is mined again)",
  }),
  network: Type.String({ description: "The network it arrived on (D22)" }),
  paymentId: NullableString(),
  amount: Type.String(),
  token: Type.String(),
  from: Type.String(),
  to: Type.String(),
  txHash: Type.String(),
  blockNumber: Type.Integer(),
  reason: Type.String(),
  createdAt: Type.String(),
});

const CreatePaymentBody = Type.Object(
  {
    paymentMethod: Type.Optional(
      Type.Union([Type.Literal("crypto"), Type.Literal("card")], { default: "crypto" }),
    ),
    tokenSymbol: Type.String({
      description: `crypto: ${CRYPTO_TOKENS.join(", ")}; card: ${CARD_CURRENCY}`,
      examples: ["USDC"],
    }),
    amount: Type.String({ description: 'Decimal string, e.g. "100.00"', examples: ["100.00"] }),
    merchantWallet: Type.Optional(Type.String({ pattern: "^0x[0-9a-fA-F]{40}$" })),
    returnUrl: Type.Optional(Type.String({ format: "uri", maxLength: 2048 })),
    successUrl: Type.Optional(Type.String({ description: "Alias of returnUrl" })),
    merchantReturnUrl: Type.Optional(Type.String({ description: "Alias of returnUrl" })),
    cancelUrl: Type.Optional(Type.String({ format: "uri", maxLength: 2048 })),
    description: Type.Optional(Type.String({ maxLength: 1000 })),
    metadata: Type.Optional(Type.Record(Type.String({ maxLength: 40 }), Type.String({ maxLength: 500 }))),
    expiresInMinutes: Type.Optional(Type.Integer({ minimum: 1, maximum: 10080, default: 60 })),
    walletType: Type.Optional(Type.Union([Type.Literal("eoa"), Type.Literal("smart_wallet")])),
    network: NetworkField,
    networks: Type.Optional(
      Type.Array(Type.String(), {
        description: "Instead of network: the networks a crypto payment may be paid on",
      }),
    ),
  },
  { additionalProperties: true },
);

const PaymentId = Type.Object({ id: Type.String({ description: "Payment UUID" }) });

const ExportQuery = Type.Object({
  status: Type.Optional(Status),
  environment: Type.Optional(Environment),
  tokenSymbol: Type.Optional(Type.Enum(PAYMENT_TOKENS)),
  paymentMethod: Type.Optional(Type.Enum(PAYMENT_METHODS)),
  network: Type.Optional(
    Type.String({ description: "Only payments on this network (D22)", examples: ["base"] }),
  ),
  createdFrom: Type.Optional(
    Type.String({
      description: "Created at or after: YYYY-MM-DD (UTC) or an ISO 8601 date-time",
      examples: ["2025-01-01"],
    }),
  ),
  createdTo: Type.Optional(
    Type.String({ description: "Created before (exclusive), as createdFrom", examples: ["2025-02-01"] }),
  ),
  search: Type.Optional(
    Type.String({
      maxLength: MAX_DESCRIPTION,
      description: "A payment id, or text found in the description (case-insensitive)",
    }),
  ),
});

export const paymentsRoutes =
  (payments: PaymentsService): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.post(
      "/api/v1/payments",
      {
        validatorCompiler: documentedBodyOnly,
        schema: {
          tags: ["Payments"],
          summary: "Create a payment (crypto or card payment method)",
          description:
            "Sandbox payments complete at once (status forwarded). Send an Idempotency-Key header to make retries safe.",
          security: [{ apiKey: [] }],
          headers: Type.Object({ "idempotency-key": Type.Optional(Type.String()) }),
          body: CreatePaymentBody,
          response: {
            201: Type.Object(
              {
                payment: PaymentSchema,
                paymentMethod: Type.Union([Type.Literal("crypto"), Type.Literal("card")]),
                paymentProvider: Type.Union([Type.Literal("onchain"), Type.Literal("card")]),
                receivingAddress: Type.Optional(Type.String()),
                receivingAddresses: Type.Optional(
                  Type.Record(Type.String(), Type.String(), {
                    description: "A payment payable on several networks: its receiving address on each",
                  }),
                ),
                checkoutUrl: Type.Optional(Type.String()),
                cardCheckoutSessionId: Type.Optional(Type.String()),
                paymentUrl: Type.String(),
              },
              { additionalProperties: true },
            ),
          },
        },
      },
      async (request, reply) => {
        const principal = requireKey(request);
        const header = request.headers["idempotency-key"];
        const result = await payments.create(
          principal,
          request.body,
          Array.isArray(header) ? header[0] : header,
        );
        if (result.replayed) reply.header("idempotent-replayed", "true");
        return reply.status(201).send(result.body);
      },
    );

    app.get(
      "/api/v1/payments",
      {
        schema: {
          tags: ["Payments"],
          summary: "List payments of the key's environment, newest first",
          security: [{ apiKey: [] }],
          querystring: Type.Object({
            status: Type.Optional(Status),
            environment: Type.Optional(Environment),
            ...OffsetPage,
          }),
          response: { 200: Type.Object({ payments: Type.Array(PaymentSchema), total: Type.Integer() }) },
        },
      },
      async (request) => payments.list(requireKey(request), request.query),
    );

    app.get(
      "/api/v1/payments/export.csv",
      {
        schema: {
          tags: ["Payments"],
          summary: "Download the key's payments as CSV, newest first (streamed)",
          description: `RFC 4180, UTF-8, header row. Columns: ${PAYMENT_CSV_COLUMNS.join(", ")}. Cells beginning with = + - @ are prefixed with '. An environment other than the key's gives the header row alone.`,
          security: [{ apiKey: [] }],
          querystring: ExportQuery,
          response: { 200: CsvDownload },
        },
      },
      async (request, reply) => {
        const tenant = requireKey(request);
        const filter = parsePaymentFilter(request.query);
        const environment = request.query.environment ?? tenant.environment;
        // The other environment's payments are never shown (D13): its export is the header row.
        const rows = environment === tenant.environment ? payments.exportPayments(tenant, filter) : [];
        return sendCsv(reply, `payments-${environment}.csv`, paymentsCsv(rows));
      },
    );

    app.get(
      "/api/v1/payments/:id",
      {
        schema: {
          tags: ["Payments"],
          summary: "Read a payment",
          security: [{ apiKey: [] }],
          params: PaymentId,
          response: { 200: Type.Object({ payment: PaymentSchema }) },
        },
      },
      async (request) => ({ payment: await payments.get(requireKey(request), request.params.id) }),
    );

    app.post(
      "/api/v1/payments/:id/cancel",
      {
        schema: {
          tags: ["Payments"],
          summary: "Cancel a pending payment",
          security: [{ apiKey: [] }],
          params: PaymentId,
          response: { 200: Type.Object({ payment: PaymentSchema }) },
        },
      },
      async (request) => ({ payment: await payments.cancel(requireKey(request), request.params.id) }),
    );

    app.post(
      "/api/v1/verify",
      {
        validatorCompiler: documentedBodyOnly,
        schema: {
          tags: ["Payments"],
          summary: "Verify a payment: true only when it is forwarded (fully settled)",
          security: [{ apiKey: [] }],
          body: Type.Object({ paymentId: Type.String({ format: "uuid" }) }),
          response: { 200: Type.Object({ verified: Type.Boolean(), payment: PaymentSchema }) },
        },
      },
      async (request) => {
        const body = request.body as { paymentId?: unknown } | undefined;
        return payments.verify(requireKey(request), body?.paymentId);
      },
    );
  };
