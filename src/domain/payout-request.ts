import { type CryptoToken, isCryptoToken, TOKEN_DECIMALS } from "./money.ts";
import type { Validated, WalletType } from "./payment-request.ts";
import {
  descriptionProblem,
  isAddress,
  isPlainObject,
  isZeroAddress,
  metadataProblem,
  parseAmountField,
  zeroAddressMessage,
} from "./validation.ts";

// Validation of POST /api/v1/payouts, messages of part 7 word for word, in the table's order.

export const PAYOUT_MESSAGES = {
  required: "Missing required fields: tokenSymbol, amount, destinationAddress",
  invalidToken: "Invalid token symbol",
  invalidAmount: "Amount must be a positive number",
  invalidDestination: "Invalid destinationAddress format",
  /** Not part 7's: the zero address burns what is sent to it (issue 36, as splits refuse it). */
  zeroDestination: zeroAddressMessage("destinationAddress"),
  invalidWalletType: "Invalid walletType: use eoa or smart_wallet",
  invalidIdempotencyKey: "idempotencyKey must be a string of 1 to 255 characters",
  notAnObject: "Request body must be a JSON object",
} as const;

export interface PayoutRequest {
  tokenSymbol: CryptoToken;
  amount: bigint;
  destinationAddress: string;
  walletType: WalletType | null;
  idempotencyKey: string | null;
  description: string | null;
  metadata: Record<string, string>;
}

const absent = (value: unknown) => value === undefined || value === null || value === "";

export function validatePayoutRequest(body: unknown): Validated<PayoutRequest> {
  const fail = (message: string) => ({ ok: false as const, message });
  if (!isPlainObject(body)) return fail(PAYOUT_MESSAGES.notAnObject);
  // An empty amount is malformed, not missing (D13); an empty token or address is missing.
  const amountMissing = body.amount === undefined || body.amount === null;
  if (absent(body.tokenSymbol) || amountMissing || absent(body.destinationAddress)) {
    return fail(PAYOUT_MESSAGES.required);
  }
  if (!isCryptoToken(body.tokenSymbol)) return fail(PAYOUT_MESSAGES.invalidToken);
  const amount = parseAmountField(body.amount, TOKEN_DECIMALS[body.tokenSymbol]);
  if (amount === null) return fail(PAYOUT_MESSAGES.invalidAmount);
  if (!isAddress(body.destinationAddress)) return fail(PAYOUT_MESSAGES.invalidDestination);
  if (isZeroAddress(body.destinationAddress)) return fail(PAYOUT_MESSAGES.zeroDestination);

  let walletType: WalletType | null = null;
  if (body.walletType !== undefined && body.walletType !== null) {
    if (body.walletType !== "eoa" && body.walletType !== "smart_wallet")
      return fail(PAYOUT_MESSAGES.invalidWalletType);
    walletType = body.walletType;
  }
  let idempotencyKey: string | null = null;
  if (body.idempotencyKey !== undefined && body.idempotencyKey !== null) {
    const key = body.idempotencyKey;
    if (typeof key !== "string" || key.length === 0 || key.length > 255)
      return fail(PAYOUT_MESSAGES.invalidIdempotencyKey);
    idempotencyKey = key;
  }
  let description: string | null = null;
  if (body.description !== undefined && body.description !== null) {
    const problem = descriptionProblem(body.description);
    if (problem) return fail(problem);
    description = body.description as string;
  }
  let metadata: Record<string, string> = {};
  if (body.metadata !== undefined && body.metadata !== null) {
    const problem = metadataProblem(body.metadata);
    if (problem) return fail(problem);
    metadata = body.metadata as Record<string, string>;
  }
  return {
    ok: true,
    value: {
      tokenSymbol: body.tokenSymbol,
      amount,
      destinationAddress: body.destinationAddress,
      walletType,
      idempotencyKey,
      description,
      metadata,
    },
  };
}
