import type { ChainToken } from "../../chain/network.ts";
import { badRequest } from "../../domain/errors.ts";
import { isZeroAddress, zeroAddressMessage } from "../../domain/validation.ts";
import type { Db } from "../../platform/db/database.ts";
import type { PaymentRow } from "../../platform/db/schema.ts";
import type { UnmatchedInbox } from "../payments/inbox/unmatched.ts";
import type { UnmatchedRow } from "../payments/inbox/unmatched-repo.ts";
import type { RefundShares } from "../payments/refund-shares.ts";
import type { OrderedKinds } from "../transfers/kinds.ts";
import { recordedTransfer } from "../transfers/order.ts";
import type { TransferRow } from "../transfers/repo.ts";
import type { TransfersService } from "../transfers/service.ts";
import type { RefundMethod, RefundOrder, Scope } from "./method.ts";
import { type RefundView, refundOfTransfer } from "./view.ts";

// Refunds of crypto payments and returns of unmatched transfers: transfers out of a workspace
// wallet, ordered from the transfer engine (modules/transfers) and so through the Rail port — the
// sandbox ledger, the EOA, the smart account — with the engine's breaker, balance and gas checks,
// record before broadcast and reconciler. A refund's record takes its amount from what
// the payment has left to refund; a return's claims its unmatched transfer; a transfer that fails
// gives either back (its kind's `released`, in the failure's transaction).

export class WalletRefunds implements RefundMethod {
  readonly #transfers: TransfersService;

  constructor(transfers: TransfersService) {
    this.#transfers = transfers;
  }

  async refund(scope: Scope, payment: PaymentRow, order: RefundOrder): Promise<RefundView> {
    const destination = order.destinationAddress ?? payment.payer_address;
    if (!destination)
      throw badRequest("destinationAddress is required: the payment has no payerAddress to refund to");
    if (isZeroAddress(destination))
      throw badRequest(
        `${zeroAddressMessage("destinationAddress")}: the payment's payerAddress is the zero address, name another`,
      );
    const outcome = await this.#transfers.run({
      id: order.id,
      kind: "refund",
      scope,
      tokenSymbol: payment.token_symbol,
      amount: order.amount,
      destinationAddress: destination,
      walletType: order.walletType,
      // Money goes back on the network it arrived on (refunds/service.ts refuses another).
      network: payment.network,
      paymentId: payment.id,
      unmatchedTransferId: null,
      reason: order.reason,
      fences: order.fences,
    });
    // A transfer that failed answers as its row (a failure its breaker counted): only one that
    // was never recorded is refused.
    return refundOfTransfer(recordedTransfer(outcome));
  }

  /** Sends `transfer`'s amount back (D19): to its sender unless told otherwise, from the wallet it reached. */
  async returnTransfer(
    scope: Scope,
    transfer: UnmatchedRow,
    order: Omit<RefundOrder, "amount">,
  ): Promise<RefundView> {
    const destination = order.destinationAddress ?? transfer.from_address;
    // A token minted to the wallet comes from the zero address: it cannot go back there.
    if (isZeroAddress(destination))
      throw badRequest(
        `${zeroAddressMessage("destinationAddress")}: the transfer's sender is the zero address (a mint), name another`,
      );
    const outcome = await this.#transfers.run({
      id: order.id,
      kind: "return",
      scope,
      tokenSymbol: transfer.token_symbol as ChainToken,
      amount: BigInt(transfer.amount),
      destinationAddress: destination,
      walletType: order.walletType,
      network: transfer.network,
      paymentId: null,
      unmatchedTransferId: transfer.id,
      reason: order.reason,
      fences: order.fences,
    });
    // A transfer that failed answers as its row (a failure its breaker counted): only one that
    // was never recorded is refused.
    return refundOfTransfer(recordedTransfer(outcome));
  }

  async refundsOf(scope: Scope, paymentId: string, page: { limit: number; offset: number }) {
    const { rows, total } = await this.#transfers.transfersFor(scope, paymentId, "refund", page);
    return { refunds: rows.map(refundOfTransfer), total };
  }

  async find(scope: Scope, id: string): Promise<RefundView | undefined> {
    const row = await this.#transfers.findTransfer(scope, id);
    return row && (row.kind === "refund" || row.kind === "return") ? refundOfTransfer(row) : undefined;
  }
}

/**
 * The two kinds of transfer this module orders from the engine: what they announce,
 * and what a failed one gives back (a refund's share of its payment, a return's claim on its
 * unmatched transfer), in the failure's transaction.
 */
export function refundTransferKinds(
  db: Db,
  shares: RefundShares,
  inbox: UnmatchedInbox,
): Pick<OrderedKinds, "refund" | "return"> {
  const common = {
    completedEvent: "refund.completed",
    failedEvent: "refund.failed",
    view: (row: TransferRow) => ({ ...refundOfTransfer(row) }),
    // The merchant who asked may never have had an answer: a refund that never left is announced.
    announcesNeverSent: true,
    failureDetails: (error: string) => ({ error }),
  };
  return {
    refund: {
      ...common,
      releases: (row: TransferRow) => [
        shares.giveBackStatement(db, subjectOf(row.payment_id), BigInt(row.amount)),
      ],
    },
    return: {
      ...common,
      releases: (row: TransferRow) => [
        inbox.reopenStatement(scopeOfRow(row), subjectOf(row.unmatched_transfer_id)),
      ],
    },
  };
}

function scopeOfRow(row: TransferRow): Scope {
  return { workspaceId: row.workspace_id, environment: row.environment as Scope["environment"] };
}

/** A refund names its payment, a return its transfer (a CHECK of the payouts table). */
function subjectOf(id: string | null): string {
  if (id === null) throw new Error("a refund or return without its subject");
  return id;
}
