import { createHash } from "node:crypto";
import {
  isPaymentPayloadV2,
  isPaymentRequirementsV2,
  parsePaymentPayload,
  parsePaymentRequirements,
} from "@x402/core/schemas";
import type { Network, PaymentPayload, PaymentRequirements } from "@x402/core/types";
import type { ExactEIP3009Payload } from "@x402/evm";
import {
  extractPaymentIdentifier,
  isValidPaymentId,
  PAYMENT_IDENTIFIER,
} from "@x402/extensions/payment-identifier";
import { type Hex, isAddress, isHex } from "viem";
import { badRequest } from "../../domain/errors.ts";
import { isPlainObject } from "../../domain/validation.ts";
import { X402_VERSION } from "../../domain/x402.ts";

// The body of POST /api/v1/x402/verify and /settle (x402 v2: `{x402Version, paymentPayload,
// paymentRequirements}`), parsed with x402's own schemas. A body that is not an x402 v2 request
// is a 400 naming the problem; a well-formed request for something this facilitator does not
// settle is answered in x402's terms (isValid false, success false) by the service.

export interface FacilitatorRequest {
  payload: PaymentPayload;
  requirements: PaymentRequirements;
  /** The EIP-3009 authorization the payload carries; null for another kind (Permit2). */
  authorization: ExactEIP3009Payload["authorization"] | null;
  /** The payment-identifier extension's id (D23); null when the payload carries none. */
  identifier: string | null;
  /** SHA-256 of the payload and requirements as given: same id, another payload → 409. */
  fingerprint: string;
}

export function parseFacilitatorRequest(body: unknown): FacilitatorRequest {
  if (!isPlainObject(body)) throw badRequest("Request body must be a JSON object");
  if (body.x402Version !== undefined && body.x402Version !== X402_VERSION)
    throw badRequest(`x402Version must be ${X402_VERSION}`);
  const { paymentPayload: payload, paymentRequirements: requirements } = body;
  const parsedPayload = parsePaymentPayload(payload);
  if (!parsedPayload.success)
    throw badRequest(`paymentPayload is not an x402 payment payload: ${issue(parsedPayload.error)}`);
  if (!isPaymentPayloadV2(payload)) throw badRequest(`paymentPayload.x402Version must be ${X402_VERSION}`);
  const parsedRequirements = parsePaymentRequirements(requirements);
  if (!parsedRequirements.success)
    throw badRequest(
      `paymentRequirements is not an x402 payment requirement: ${issue(parsedRequirements.error)}`,
    );
  if (!isPaymentRequirementsV2(requirements))
    throw badRequest("paymentRequirements is not an x402 v2 payment requirement (amount is required)");
  // x402's schemas type a network as any string; its facilitator wants `<namespace>:<reference>`.
  const accepted = requirementsOf(payload.accepted, "paymentPayload.accepted");
  const { extensions, ...rest } = payload;
  const typed: PaymentPayload = { ...rest, accepted, ...(extensions ? { extensions } : {}) };
  return {
    payload: typed,
    requirements: requirementsOf(requirements, "paymentRequirements"),
    authorization: authorizationOf(payload.payload),
    identifier: identifierOf(typed),
    fingerprint: createHash("sha256")
      .update(JSON.stringify([body.paymentPayload, body.paymentRequirements]))
      .digest("hex"),
  };
}

/** The EIP-3009 authorization, checked field by field (the packages trust its shape); null for another kind. */
function authorizationOf(payload: Record<string, unknown>): ExactEIP3009Payload["authorization"] | null {
  if (!("authorization" in payload)) return null;
  const a: unknown = payload.authorization;
  if (!isPlainObject(a)) throw badRequest("paymentPayload.payload.authorization must be an object");
  for (const field of ["from", "to"] as const)
    if (typeof a[field] !== "string" || !isAddress(a[field], { strict: false }))
      throw badRequest(`paymentPayload.payload.authorization.${field} must be an address`);
  for (const field of ["value", "validAfter", "validBefore"] as const)
    if (typeof a[field] !== "string" || !/^[0-9]{1,78}$/.test(a[field]))
      throw badRequest(`paymentPayload.payload.authorization.${field} must be a whole number as a string`);
  if (typeof a.nonce !== "string" || !isHex(a.nonce) || a.nonce.length !== 66)
    throw badRequest("paymentPayload.payload.authorization.nonce must be 32 bytes of hex");
  if (typeof payload.signature !== "string" || !isHex(payload.signature))
    throw badRequest("paymentPayload.payload.signature must be hex");
  return {
    from: a.from as Hex,
    to: a.to as Hex,
    value: a.value as string,
    validAfter: a.validAfter as string,
    validBefore: a.validBefore as string,
    nonce: a.nonce,
  };
}

function requirementsOf(
  r: Omit<PaymentRequirements, "network" | "extra"> & {
    network: string;
    extra?: Record<string, unknown> | null;
  },
  where: string,
): PaymentRequirements {
  return { ...r, network: caip2(r.network, where), extra: r.extra ?? {} };
}

function caip2(network: string, where: string): Network {
  if (!isNetwork(network)) throw badRequest(`${where}.network must be a CAIP-2 id such as eip155:8453`);
  return network;
}

function isNetwork(network: string): network is Network {
  return /^[-a-z0-9]{3,8}:[-_a-zA-Z0-9]{1,32}$/.test(network);
}

function identifierOf(payload: PaymentPayload): string | null {
  if (!payload.extensions || !(PAYMENT_IDENTIFIER in payload.extensions)) return null;
  const id = extractPaymentIdentifier(payload, false);
  if (id === null || !isValidPaymentId(id))
    throw badRequest("paymentPayload.extensions.payment-identifier must carry a valid id");
  return id;
}

function issue(error: {
  issues: ReadonlyArray<{ path: ReadonlyArray<string | number>; message: string }>;
}): string {
  const first = error.issues[0];
  if (!first) return "invalid";
  return first.path.length > 0 ? `${first.path.join(".")}: ${first.message}` : first.message;
}
