import { x402Client } from "@x402/core/client";
import { encodePaymentSignatureHeader } from "@x402/core/http";
import type { PaymentRequired } from "@x402/core/types";
import { toClientEvmSigner } from "@x402/evm";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { type Hex, isHex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { InternalError } from "../../domain/errors.ts";
import { isPlainObject } from "../../domain/validation.ts";

// An agent wallet's x402 payment, signed by the x402 packages themselves: @x402/core's client with
// @x402/evm's exact scheme makes the EIP-3009 authorization (nonce, validity from the requirement's
// maxTimeoutSeconds) and signs it with the wallet's key, which lives in memory for this call only;
// @x402/core encodes the PAYMENT-SIGNATURE header. The service's spending policy has already judged
// the payment, so the client's own spend controls are off.

export interface SignedPayment {
  /** The PAYMENT-SIGNATURE header value the agent sends with its retried request. */
  paymentSignature: string;
  nonce: Hex;
  validAfter: Date;
  validBefore: Date;
}

/** Signs `paymentRequired`'s one requirement (the service chose it) with `privateKey`. */
export async function signExactPayment(
  privateKey: Hex,
  paymentRequired: PaymentRequired,
): Promise<SignedPayment> {
  const requirement = paymentRequired.accepts[0];
  if (paymentRequired.accepts.length !== 1 || !requirement)
    throw new InternalError("an x402 payment is signed for exactly one requirement");
  const signer = toClientEvmSigner(privateKeyToAccount(privateKey));
  const client = new x402Client()
    .setSpendControls(false)
    .register(requirement.network, new ExactEvmScheme(signer));
  const payload = await client.createPaymentPayload(paymentRequired);
  const authorization = payload.payload.authorization;
  if (!isPlainObject(authorization))
    throw new InternalError("the exact scheme signed no EIP-3009 authorization");
  const { nonce, validAfter, validBefore } = authorization;
  if (!isHex(nonce, { strict: true }) || nonce.length !== 66)
    throw new InternalError("the exact scheme signed an authorization without a bytes32 nonce");
  return {
    paymentSignature: encodePaymentSignatureHeader(payload),
    nonce,
    validAfter: secondsToDate(validAfter),
    validBefore: secondsToDate(validBefore),
  };
}

function secondsToDate(value: unknown): Date {
  if (typeof value !== "string" || !/^[0-9]{1,12}$/.test(value))
    throw new InternalError("the exact scheme signed an authorization with an unreadable validity");
  return new Date(Number(value) * 1000);
}
