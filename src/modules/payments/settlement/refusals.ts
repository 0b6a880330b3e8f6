import {
  type AppError,
  InsufficientBalance,
  InsufficientGas,
  NetworkUnavailable,
} from "../../../domain/errors.ts";

// What the settlement job does when the transfer engine refuses its order (nothing was recorded,
// nothing sent): a rule of its own, apart from the job's I/O (settlement.ts).

/** Why a settlement fails when its wallet has no gas and none can be had. */
export const NO_GAS = "insufficient ETH for gas in the receiving wallet";

export type RefusalStep =
  /** Short of the settlement's money: ordered again next tick while the wallet holds the payment's (retriesShort). */
  | { step: "short"; reason: string }
  /** Its network's node does not answer (D22): the payment waits, ordered again next tick. */
  | { step: "wait"; reason: string }
  /** Short of gas: the wallet is topped up by what it lacks, then ordered again (once). */
  | { step: "top_up"; shortWei: bigint }
  /** It can never be sent as it is: the payment fails. */
  | { step: "fail"; reason: string };

/** The step for `reason`; `mayTopUp`: this order is not already the one after a top-up. */
export function onRefusal(reason: AppError, mayTopUp: boolean): RefusalStep {
  if (reason instanceof InsufficientBalance) return { step: "short", reason: reason.message };
  // A node that does not answer now may answer next tick: nothing is wrong with the payment.
  if (reason instanceof NetworkUnavailable) return { step: "wait", reason: reason.message };
  if (reason instanceof InsufficientGas)
    return mayTopUp ? { step: "top_up", shortWei: reason.shortWei } : { step: "fail", reason: NO_GAS };
  return { step: "fail", reason: reason.message };
}

/**
 * Whether a wallet the engine found short is ordered again next tick: while it holds what the
 * payment brought in (another transfer completing while the check read may have been subtracted
 * twice: transfers/funds.ts). One that does not hold it fails the payment.
 */
export function retriesShort(held: bigint, received: bigint): boolean {
  return held >= received;
}
