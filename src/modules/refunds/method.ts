import type { Environment } from "../../config.ts";
import type { Fence } from "../../platform/db/fences.ts";
import type { PaymentRow } from "../../platform/db/schema.ts";
import type { RefundView } from "./view.ts";

// How a payment's money goes back (D19), one refund method per payment method it came in by: a
// crypto payment is refunded from a workspace wallet by the transfer engine and its Rail port
// (wallet-refunds.ts: the sandbox ledger, the EOA, the smart account), a card payment at the
// card provider (modules/card/refunds.ts). The refund operation (service.ts) picks the one of the
// payment's provider from a map and never asks which it holds. ("Rail" names only the money-out
// port of src/rails.)

export type Scope = { workspaceId: string; environment: Environment };

export interface RefundOrder {
  /** The refund's id, chosen by the operation (its idempotency claim names it). */
  id: string;
  /** Decided by the operation (what was asked, or what was left to refund when it looked). */
  amount: bigint;
  /** Where the money goes on chain; null for a card (it goes back to the card). */
  destinationAddress: string | null;
  walletType: "eoa" | "smart_wallet" | null;
  reason: string | null;
  /**
   * Run first in the transaction that records the refund (platform/db/fences.ts): the claim of
   * the Idempotency-Key and the take of the amount from what the payment has left to refund
   * (payments/refund-shares.ts); when one takes nothing, nothing is recorded and nothing moves
   * (FenceRefused, naming it).
   */
  fences: readonly Fence[];
}

export interface RefundMethod {
  /**
   * Records the refund (after `order.fences`, in the same transaction) before any money moves,
   * then moves it. Resolves with the refund once it ended, or while it is still pending (the
   * method's own recovery finishes it); rejects with why nothing was recorded (FenceRefused).
   */
  refund(scope: Scope, payment: PaymentRow, order: RefundOrder): Promise<RefundView>;
  /** The refunds of a payment made by this method, oldest first. */
  refundsOf(
    scope: Scope,
    paymentId: string,
    page: { limit: number; offset: number },
  ): Promise<{ refunds: RefundView[]; total: number }>;
  /** A refund this method made, by id; undefined if none (or another tenant's). */
  find(scope: Scope, id: string): Promise<RefundView | undefined>;
}
