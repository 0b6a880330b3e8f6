import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { AGENT_PAYMENT_STATUSES } from "../../domain/agent-payment-state.ts";
import { WALLET_CURRENCIES } from "../../domain/money.ts";
import { MAX_LIST_ENTRIES } from "../../domain/spending-policy.ts";
import { requireKey } from "../../platform/http/auth.ts";
import { NumberedPage } from "../../platform/http/schemas.ts";
import { documentedBodyOnly } from "../../platform/http/validation.ts";
import { Ok, Page } from "../agents/schemas.ts";
import {
  ApprovalRequiredSchema,
  AuthorizationSchema,
  AuthorizationWithSignatureSchema,
  AuthorizedSchema,
  PolicySchema,
} from "./agent-payment-schemas.ts";
import type { AgentPaymentsService } from "./agent-payments.ts";

// An agent wallet's spending policy and its x402 payments (D23, issue 40), in the /api/wallets
// family: results as {success, data}, errors as {success: false, error} (a policy's refusal adds
// `policy`). Bodies are documented here and checked by the domain, which names the field.

const tags = { tags: ["Agent payments"], security: [{ apiKey: [] }] };
const WalletParams = Type.Object({ walletId: Type.String() });
const AuthorizationParams = Type.Object({ walletId: Type.String(), authorizationId: Type.String() });

const Amounts = (description: string) =>
  Type.Optional(
    Type.Union([
      Type.Record(Type.String(), Type.String({ pattern: "^[0-9]+(\\.[0-9]+)?$" }), {
        description: `${description}; per currency (${WALLET_CURRENCIES.join(", ")}), decimal strings, e.g. {"USDC": "5.00"}`,
      }),
      Type.Null(),
    ]),
  );
const List = (description: string, item: ReturnType<typeof Type.String>) =>
  Type.Optional(Type.Union([Type.Array(item, { maxItems: MAX_LIST_ENTRIES, description }), Type.Null()]));

const Policy = Type.Object(
  {
    maxPerPayment: Amounts("The most one payment may be"),
    daily: Amounts("Cap per UTC day of what payments reserve or spend"),
    monthly: Amounts("Cap per UTC month of what payments reserve or spend"),
    allowedPayees: List("Addresses a payment may go to (payTo); empty allows none", Type.String()),
    allowedOrigins: List(
      "Origins (https://api.example.com) of the resources a payment may pay for; empty allows none",
      Type.String(),
    ),
    approvalAbove: Amounts("Above this a payment waits for a person's approval"),
  },
  { description: "A field left out (or null) is no limit" },
);

const PayBody = Type.Object({
  paymentRequired: Type.Union([
    Type.Object(
      {
        x402Version: Type.Literal(2),
        resource: Type.Object({ url: Type.String() }),
        accepts: Type.Array(Type.Record(Type.String(), Type.Unknown()), { minItems: 1 }),
      },
      { description: "The server's PaymentRequired (x402 v2), decoded" },
    ),
    Type.String({ description: "Or the PAYMENT-REQUIRED header value as it came (base64 JSON)" }),
  ]),
  resource: Type.String({
    maxLength: 2048,
    description: "The http(s) URL the agent requested; its origin is checked against allowedOrigins",
  }),
});

export const agentPaymentsRoutes =
  (payments: AgentPaymentsService): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.get(
      "/api/wallets/:walletId/policy",
      {
        schema: {
          ...tags,
          summary: "Read an agent wallet's spending policy",
          params: WalletParams,
          response: { 200: Ok(PolicySchema) },
        },
      },
      async (request) => ({
        success: true as const,
        data: await payments.policy(requireKey(request), request.params.walletId),
      }),
    );
    app.put(
      "/api/wallets/:walletId/policy",
      {
        validatorCompiler: documentedBodyOnly,
        schema: {
          ...tags,
          summary: "Set an agent wallet's whole spending policy",
          params: WalletParams,
          body: Policy,
          response: { 200: Ok(PolicySchema) },
        },
      },
      async (request) => ({
        success: true as const,
        data: await payments.setPolicy(requireKey(request), request.params.walletId, request.body),
      }),
    );
    app.post(
      "/api/wallets/:walletId/x402/pay",
      {
        validatorCompiler: documentedBodyOnly,
        schema: {
          ...tags,
          summary:
            "Pay an x402 402 answer: 200 with the signed PAYMENT-SIGNATURE value, 202 when it awaits approval, 403 naming the policy rule that refuses it",
          params: WalletParams,
          body: PayBody,
          response: { 200: Ok(AuthorizedSchema), 202: Ok(ApprovalRequiredSchema) },
        },
      },
      async (request, reply) => {
        const data = await payments.pay(requireKey(request), request.params.walletId, request.body);
        if (data.status === "authorized") return reply.status(200).send({ success: true as const, data });
        return reply.status(202).send({ success: true as const, data });
      },
    );
    app.get(
      "/api/wallets/:walletId/x402/authorizations",
      {
        schema: {
          ...tags,
          summary: "List an agent wallet's x402 payment authorizations, newest first",
          params: WalletParams,
          querystring: Type.Object({
            ...NumberedPage,
            status: Type.Optional(Type.String({ description: AGENT_PAYMENT_STATUSES.join(" | ") })),
          }),
          response: { 200: Ok(Page(AuthorizationSchema)) },
        },
      },
      async (request) => ({
        success: true as const,
        data: await payments.authorizations(requireKey(request), request.params.walletId, request.query),
      }),
    );
    app.get(
      "/api/wallets/:walletId/x402/authorizations/:authorizationId",
      {
        schema: {
          ...tags,
          summary: "Read an x402 payment authorization",
          params: AuthorizationParams,
          response: { 200: Ok(AuthorizationWithSignatureSchema) },
        },
      },
      async (request) => ({
        success: true as const,
        data: await payments.authorization(
          requireKey(request),
          request.params.walletId,
          request.params.authorizationId,
        ),
      }),
    );
    app.post(
      "/api/wallets/:walletId/x402/authorizations/:authorizationId/approve",
      {
        schema: {
          ...tags,
          summary: "Approve (and sign) a payment awaiting approval: the answer of an authorized pay",
          params: AuthorizationParams,
          response: { 200: Ok(AuthorizedSchema) },
        },
      },
      async (request) => ({
        success: true as const,
        data: await payments.approve(
          requireKey(request),
          request.params.walletId,
          request.params.authorizationId,
        ),
      }),
    );
    app.post(
      "/api/wallets/:walletId/x402/authorizations/:authorizationId/deny",
      {
        schema: {
          ...tags,
          summary: "Deny a payment awaiting approval: its reservation is released",
          params: AuthorizationParams,
          response: { 200: Ok(AuthorizationSchema) },
        },
      },
      async (request) => ({
        success: true as const,
        data: await payments.deny(
          requireKey(request),
          request.params.walletId,
          request.params.authorizationId,
        ),
      }),
    );
  };
