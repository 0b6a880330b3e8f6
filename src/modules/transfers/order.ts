import type { AppError } from "../../domain/errors.ts";
import type { TransferKindName } from "../../domain/payout-state.ts";
import { type Fence, FenceRefused } from "../../platform/db/fences.ts";
import type { Leg, MoveOutcome } from "../../rails/rail.ts";
import type { NewTransfer, Scope, TransferRow } from "./repo.ts";

// What an orderer hands the engine (an order) and what the engine answers (an outcome). Payouts,
// refunds, returns and swaps each build an order and map its outcome to their own resource at
// their own edge: the engine never answers in HTTP.

export type WalletType = "eoa" | "smart_wallet";

/** One movement of money out of a workspace wallet, as its orderer asks for it. */
export interface TransferOrder {
  /** Chosen by the orderer, whose fences (its idempotency claim) may name it. */
  id: string;
  kind: TransferKindName;
  scope: Scope;
  tokenSymbol: string;
  amount: bigint;
  destinationAddress: string;
  /** The wallet it leaves; null: the workspace's default for the scope's environment. */
  walletType: WalletType | null;
  /** The network it moves on (D22), as the orderer resolved it; null: the environment's default. */
  network: string | null;
  /** A payout's idempotencyKey, claimed with its record (keys.ts); never with fences. */
  idempotencyKey?: string | null;
  description?: string | null;
  /** What its orderer's events show of it (a swap's tokens and amounts); stored as metadata. */
  metadata?: Record<string, string>;
  /** What a refund refunds, or a return returns. */
  paymentId?: string | null;
  unmatchedTransferId?: string | null;
  reason?: string | null;
  /**
   * What the orderer writes with the transfer, as statements (platform/db/fences.ts) run first in
   * the transaction that records it: they take what the transfer needs in the orderer's tables (a
   * refund's share of its payment, its idempotency claim); when a required one takes nothing,
   * nothing is recorded and the outcome names that fence.
   */
  fences?: readonly Fence[];
  /** The legs of a move that is not one plain transfer (a swap's), and the wallet they are for. */
  legs?: { from: string; legs: Leg[] };
}

/** How the breaker stood once it counted a failure (or did not: a recipient's refusal). */
export interface BreakerCount {
  failStreak: number;
  remainingBeforePause: number;
  /** This failure paused the workspace's transfers. */
  tripped: boolean;
  pausedAt: Date | null;
}

/**
 * How an order ended for whoever waits on it. `pending`: recorded and maybe sent, its outcome
 * the reconciler's to record from the chain. `refused`: nothing was recorded and nothing sent,
 * for the coded reason given. `duplicate`: not recorded, its idempotencyKey was taken meanwhile.
 */
export type TransferOutcome =
  /** `legs`: each leg's transaction, where its rail answered (not when read back from its record). */
  | { status: "completed"; transfer: TransferRow; legs?: MoveOutcome["legs"] }
  | { status: "pending"; transfer: TransferRow; txHash: string | null; userOpHash?: string }
  | { status: "failed"; transfer: TransferRow; error: string; breaker: BreakerCount }
  | { status: "refused"; reason: AppError }
  /** Nothing recorded: the orderer's fence `fence` took nothing (its writer tells why). */
  | { status: "fenced"; fence: string }
  | { status: "duplicate"; idempotencyKey: string };

/** The transfer an ended, pending or failed outcome recorded; the refusal itself otherwise. */
export function recordedTransfer(outcome: TransferOutcome): TransferRow {
  if (outcome.status === "refused") throw outcome.reason;
  if (outcome.status === "fenced") throw new FenceRefused(outcome.fence);
  if (outcome.status === "duplicate")
    throw new Error(`transfer key ${outcome.idempotencyKey} taken by an order that claims none`);
  return outcome.transfer;
}

/** The transfer `order` asks for, from `fromAddress` on `network` (its rail's). */
export function newTransfer(
  order: TransferOrder,
  from: { fromAddress: string; walletType: WalletType; network: string },
  createdAt: Date,
): NewTransfer {
  const { fromAddress, walletType, network } = from;
  return {
    id: order.id,
    scope: order.scope,
    network,
    idempotencyKey: order.idempotencyKey ?? null,
    tokenSymbol: order.tokenSymbol,
    amount: order.amount,
    destinationAddress: order.destinationAddress,
    fromAddress,
    walletType,
    description: order.description ?? null,
    metadata: order.metadata ?? {},
    createdAt,
    kind: order.kind,
    paymentId: order.paymentId ?? null,
    unmatchedTransferId: order.unmatchedTransferId ?? null,
    reason: order.reason ?? null,
    ...(order.fences ? { fences: order.fences } : {}),
    ...(order.legs ? { legs: legsFor(order.legs, fromAddress) } : {}),
  };
}

/** An order's legs, refused if the wallet chosen is not the one they were built for. */
function legsFor(order: { from: string; legs: Leg[] }, fromAddress: string): Leg[] {
  if (order.from.toLowerCase() !== fromAddress.toLowerCase())
    throw new Error(`legs built for ${order.from} would be sent from ${fromAddress}`);
  return order.legs;
}
