import type { TransferKindName } from "../../domain/payout-state.ts";
import type { Db } from "../../platform/db/database.ts";
import type { Leg } from "../../rails/rail.ts";
import type { NewPayout, Scope } from "./repo.ts";

// What another module orders through the payout operation (kinds.ts): its transfer, and the
// payout record it becomes.

/** A transfer another module orders through the payout operation (kinds.ts): a refund, a return. */
export interface TransferOrder {
  /** Chosen by the orderer, whose guard may name it. */
  id: string;
  kind: Exclude<TransferKindName, "payout">;
  tokenSymbol: string;
  amount: bigint;
  destinationAddress: string;
  walletType: "eoa" | "smart_wallet" | null;
  paymentId: string | null;
  unmatchedTransferId: string | null;
  reason: string | null;
  guard: (trx: Db) => Promise<void>;
  /** What its orderer's events show of it (a swap's tokens and amounts); stored as metadata. */
  metadata?: Record<string, string>;
  /** The legs of a move that is not one plain transfer (NewPayout.legs), and the wallet they are for. */
  legs?: { from: string; legs: Leg[] };
}

/** The transfer `order` asks for, from `fromAddress`. */
export function newTransfer(
  scope: Scope,
  order: TransferOrder,
  fromAddress: string,
  walletType: string,
  createdAt: Date,
): NewPayout {
  return {
    id: order.id,
    scope,
    idempotencyKey: null,
    tokenSymbol: order.tokenSymbol,
    amount: order.amount,
    destinationAddress: order.destinationAddress,
    fromAddress,
    walletType,
    description: null,
    metadata: order.metadata ?? {},
    createdAt,
    kind: order.kind,
    paymentId: order.paymentId,
    unmatchedTransferId: order.unmatchedTransferId,
    reason: order.reason,
    guard: order.guard,
    ...(order.legs ? { legs: legsFor(order.legs, fromAddress) } : {}),
  };
}

/** An order's legs, refused if the wallet chosen is not the one they were built for. */
function legsFor(order: { from: string; legs: Leg[] }, fromAddress: string): Leg[] {
  if (order.from.toLowerCase() !== fromAddress.toLowerCase())
    throw new Error(`legs built for ${order.from} would be sent from ${fromAddress}`);
  return order.legs;
}
