import { type AppError, badRequest } from "../../domain/errors.ts";
import { isZeroAddress, zeroAddressMessage } from "../../domain/validation.ts";
import type { TransferOrder } from "./order.ts";

// The validate step: what no order may ask for, whoever orders it. Each orderer checks its own
// request first (and says why in its own words); these are the engine's last word.

/** Why the engine refuses `order` before anything else, or null. */
export function orderProblem(order: TransferOrder): AppError | null {
  // Money sent to the zero address is burnt.
  if (isZeroAddress(order.destinationAddress)) return badRequest(zeroAddressMessage("destinationAddress"));
  // The table's CHECK would refuse it too, as a fault: a refusal names it instead.
  if (order.amount <= 0n) return badRequest("amount must be greater than zero");
  return null;
}

/** An order the engine cannot take as written: its orderer's bug, never a user's. */
export function assertWellFormed(order: TransferOrder): void {
  // A fenced transfer claims no payout key: answering a taken key would commit the fences.
  if (order.fences?.length && order.idempotencyKey)
    throw new Error("a fenced transfer cannot carry a payout key");
  if (order.legs && order.legs.legs.length === 0) throw new Error("a transfer's legs cannot be empty");
}
