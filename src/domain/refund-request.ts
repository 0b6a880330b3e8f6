import type { Validated, WalletType } from "./payment-request.ts";
import { isAddress, isPlainObject, isZeroAddress, zeroAddressMessage } from "./validation.ts";

// Validation of a refund (POST /api/v1/payments/{id}/refunds) and of a return of an unmatched
// transfer (POST /api/v1/transfers/unmatched/{id}/return), D19. The amount is parsed later, with
// the decimals of the payment's token (D13's message for every malformed one).

export const REFUND_MESSAGES = {
  notAnObject: "Request body must be a JSON object",
  invalidDestination: "Invalid destinationAddress format",
  zeroDestination: zeroAddressMessage("destinationAddress"),
  invalidWalletType: "Invalid walletType: use eoa or smart_wallet",
  invalidReason: "reason must be a string of at most 500 characters",
  invalidIdempotencyKey: "Idempotency-Key must be 1 to 255 characters",
} as const;

const MAX_REASON = 500;

export interface RefundRequest {
  /** As sent (a JSON string), parsed with the payment's decimals; undefined: what is left. */
  amount: unknown;
  destinationAddress: string | null;
  walletType: WalletType | null;
  reason: string | null;
}

const absent = (value: unknown) => value === undefined || value === null;

/** A refund's body; an absent body is an empty one (every field is optional). */
export function validateRefundRequest(body: unknown): Validated<RefundRequest> {
  const fail = (message: string) => ({ ok: false as const, message });
  const input = body === undefined || body === null ? {} : body;
  if (!isPlainObject(input)) return fail(REFUND_MESSAGES.notAnObject);
  if (!absent(input.destinationAddress) && !isAddress(input.destinationAddress))
    return fail(REFUND_MESSAGES.invalidDestination);
  if (isAddress(input.destinationAddress) && isZeroAddress(input.destinationAddress))
    return fail(REFUND_MESSAGES.zeroDestination);
  if (!absent(input.walletType) && input.walletType !== "eoa" && input.walletType !== "smart_wallet")
    return fail(REFUND_MESSAGES.invalidWalletType);
  if (!absent(input.reason) && (typeof input.reason !== "string" || input.reason.length > MAX_REASON))
    return fail(REFUND_MESSAGES.invalidReason);
  return {
    ok: true,
    value: {
      amount: absent(input.amount) ? undefined : input.amount,
      destinationAddress: absent(input.destinationAddress) ? null : (input.destinationAddress as string),
      walletType: absent(input.walletType) ? null : (input.walletType as WalletType),
      reason: absent(input.reason) ? null : (input.reason as string),
    },
  };
}

/** An Idempotency-Key header's value, or the message refusing it. */
export function idempotencyKeyProblem(key: string | undefined): string | null {
  if (key === undefined) return null;
  return key.length === 0 || key.length > 255 ? REFUND_MESSAGES.invalidIdempotencyKey : null;
}
