import { Type } from "typebox";
import { AGENT_PAYMENT_STATUSES } from "../../domain/agent-payment-state.ts";
import { WALLET_CURRENCIES } from "../../domain/money.ts";
import { NullableString } from "../../platform/http/schemas.ts";

// Answers of an agent wallet's spending policy and x402 payments (D23, docs/x402.md) as
// AgentPaymentsService makes them. A response schema also drives serialization: a field left out
// here would be dropped from the answer, so each shape lists every field its view has.

const Amounts = (description: string) =>
  Type.Optional(
    Type.Record(Type.String(), Type.String(), {
      description: `${description}; per currency (${WALLET_CURRENCIES.join(", ")}), decimal strings, e.g. {"USDC": "5.00"}`,
    }),
  );

/** The policy as stored (policyView): a field with no limit is left out; `{}` for none at all. */
export const PolicySchema = Type.Object(
  {
    maxPerPayment: Amounts("The most one payment may be"),
    daily: Amounts("Cap per UTC day of what payments reserve or spend"),
    monthly: Amounts("Cap per UTC month of what payments reserve or spend"),
    allowedPayees: Type.Optional(
      Type.Array(Type.String(), { description: "Addresses (lowercase) a payment may go to (payTo)" }),
    ),
    allowedOrigins: Type.Optional(
      Type.Array(Type.String(), { description: "Origins of the resources a payment may pay for" }),
    ),
    approvalAbove: Amounts("Above this a payment waits for a person's approval"),
  },
  { additionalProperties: true, description: "A field left out is no limit" },
);

/** A payment signed now (a pay within approvalAbove, or an approval): 200. */
export const AuthorizedSchema = Type.Object({
  status: Type.Literal("authorized"),
  paymentSignature: Type.String({ description: "The PAYMENT-SIGNATURE header value to send" }),
  authorizationId: Type.String({ format: "uuid" }),
  expiresAt: Type.String({ format: "date-time", description: "The authorization's validBefore" }),
});

/** A payment above approvalAbove, reserved and waiting for a person: 202. */
export const ApprovalRequiredSchema = Type.Object({
  status: Type.Literal("approval_required"),
  authorizationId: Type.String({ format: "uuid" }),
});

const authorizationFields = {
  authorizationId: Type.String({ format: "uuid" }),
  walletId: Type.String({ format: "uuid" }),
  status: Type.Enum(AGENT_PAYMENT_STATUSES),
  network: Type.String({ description: "Our network id (D22)", examples: ["sandbox-a"] }),
  caip2: Type.String({ description: "The network's CAIP-2 name", examples: ["eip155:73570001"] }),
  currency: Type.Enum(WALLET_CURRENCIES),
  asset: Type.String({ description: "The token contract (the requirement's asset)" }),
  amount: Type.String({ description: "Decimal string in the currency's units", examples: ["1.50"] }),
  payTo: Type.String(),
  resource: Type.String({ description: "The URL the agent paid for" }),
  origin: Type.String({ description: "The resource's origin (what allowedOrigins is checked against)" }),
  nonce: NullableString({ description: "The EIP-3009 nonce (bytes32 hex); null until signed" }),
  validAfter: NullableString({ description: "Null until signed" }),
  validBefore: NullableString({ description: "Null until signed" }),
  createdAt: Type.String({ format: "date-time" }),
  decidedAt: NullableString({ description: "When it was signed or denied" }),
  txHash: NullableString({ description: "Set once it is settled" }),
};

/** An x402 payment authorization, as the API and the agent.payment.* events show it. */
export const AuthorizationSchema = Type.Object(authorizationFields, { additionalProperties: true });

/** One authorization read by its agent: an approved one carries its signature while usable. */
export const AuthorizationWithSignatureSchema = Type.Object(
  {
    ...authorizationFields,
    paymentSignature: Type.Optional(
      Type.String({
        description:
          "The PAYMENT-SIGNATURE value of a payment a person approved, while it is authorized and before its validBefore",
      }),
    ),
  },
  { additionalProperties: true },
);
