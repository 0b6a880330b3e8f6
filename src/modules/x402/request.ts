import { createHash } from "node:crypto";
import {
  isPaymentPayloadV2,
  isPaymentRequirementsV2,
  parsePaymentPayload,
  parsePaymentRequirements,
} from "@x402/core/schemas";
import type { Network, PaymentPayload, PaymentRequirements } from "@x402/core/types";
import {
  extractPaymentIdentifier,
  isValidPaymentId,
  PAYMENT_IDENTIFIER,
} from "@x402/extensions/payment-identifier";
import { type Hex, isAddress, isHex } from "viem";
import { badRequest } from "../../domain/errors.ts";
import { isPlainObject } from "../../domain/validation.ts";
import { permit2NonceKey, X402_VERSION } from "../../domain/x402.ts";

// The body of POST /api/v1/x402/verify and /settle (x402 v2: `{x402Version, paymentPayload,
// paymentRequirements}`), parsed with x402's own schemas. A body that is not an x402 v2 request
// is a 400 naming the problem; a well-formed request for something this facilitator does not
// settle is answered in x402's terms (isValid false, success false) by the service.

export interface FacilitatorRequest {
  payload: PaymentPayload;
  requirements: PaymentRequirements;
  /** What the payer signed (EIP-3009 or Permit2); null for a kind settled nowhere here. */
  authorization: PayerAuthorization | null;
  /** The payment-identifier extension's id (D23); null when the payload carries none. */
  identifier: string | null;
  /** SHA-256 of the payload and requirements as given: same id, another payload → 409. */
  fingerprint: string;
}

/**
 * What a payer signed, whichever way: an EIP-3009 `transferWithAuthorization` (`exact`) or a
 * Permit2 witness transfer to x402's upto proxy (`upto`).
 */
export interface PayerAuthorization {
  kind: "eip3009" | "permit2";
  from: Hex;
  /** The payee the signed message names. */
  to: Hex;
  /** The most it lets move (the whole amount for EIP-3009), in the token's smallest unit. */
  value: string;
  validAfter: string;
  /** Unix seconds until which it may be used (Permit2's deadline). */
  validBefore: string;
  /**
   * The nonce, unique per payer within its kind: EIP-3009's 32 bytes of hex, or `permit2:` and
   * Permit2's unordered nonce (a payer's Permit2 nonces are shared by every token).
   */
  nonce: string;
  /** The facilitator a Permit2 witness names (upto's): only it may settle; null when none is named. */
  facilitator: Hex | null;
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

/**
 * The payer's authorization, checked field by field (the packages trust its shape): EIP-3009's
 * `authorization` or Permit2's `permit2Authorization`; null for another kind.
 */
function authorizationOf(payload: Record<string, unknown>): PayerAuthorization | null {
  const where = "paymentPayload.payload";
  if (!("authorization" in payload) && !("permit2Authorization" in payload)) return null;
  if (typeof payload.signature !== "string" || !isHex(payload.signature))
    throw badRequest(`${where}.signature must be hex`);
  if ("authorization" in payload) {
    const a = objectAt(payload.authorization, `${where}.authorization`);
    if (typeof a.nonce !== "string" || !isHex(a.nonce) || a.nonce.length !== 66)
      throw badRequest(`${where}.authorization.nonce must be 32 bytes of hex`);
    return {
      kind: "eip3009",
      from: addressAt(a.from, `${where}.authorization.from`),
      to: addressAt(a.to, `${where}.authorization.to`),
      value: wholeAt(a.value, `${where}.authorization.value`),
      validAfter: wholeAt(a.validAfter, `${where}.authorization.validAfter`),
      validBefore: wholeAt(a.validBefore, `${where}.authorization.validBefore`),
      nonce: a.nonce,
      facilitator: null,
    };
  }
  const at = `${where}.permit2Authorization`;
  const p = objectAt(payload.permit2Authorization, at);
  const permitted = objectAt(p.permitted, `${at}.permitted`);
  const witness = objectAt(p.witness, `${at}.witness`);
  addressAt(permitted.token, `${at}.permitted.token`);
  addressAt(p.spender, `${at}.spender`);
  return {
    kind: "permit2",
    from: addressAt(p.from, `${at}.from`),
    to: addressAt(witness.to, `${at}.witness.to`),
    value: wholeAt(permitted.amount, `${at}.permitted.amount`),
    validAfter: wholeAt(witness.validAfter, `${at}.witness.validAfter`),
    validBefore: wholeAt(p.deadline, `${at}.deadline`),
    nonce: permit2NonceKey(wholeAt(p.nonce, `${at}.nonce`)),
    // exact's Permit2 witness names none (that kind is refused with x402's reason, not a 400).
    facilitator:
      witness.facilitator === undefined ? null : addressAt(witness.facilitator, `${at}.witness.facilitator`),
  };
}

function objectAt(value: unknown, where: string): Record<string, unknown> {
  if (!isPlainObject(value)) throw badRequest(`${where} must be an object`);
  return value;
}

function addressAt(value: unknown, where: string): Hex {
  if (typeof value !== "string" || !isAddress(value, { strict: false }))
    throw badRequest(`${where} must be an address`);
  return value;
}

function wholeAt(value: unknown, where: string): string {
  if (typeof value !== "string" || !/^[0-9]{1,78}$/.test(value))
    throw badRequest(`${where} must be a whole number as a string`);
  return value;
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
