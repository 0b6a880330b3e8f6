import { PAYOUT_TRANSITIONS } from "../../../domain/payout-state.ts";
import type { Db } from "../../../platform/db/database.ts";
import type { TransferKind } from "../../transfers/kinds.ts";
import type { TransferRow } from "../../transfers/repo.ts";
import { releaseClaim } from "./settlement-repo.ts";

// A payment's settlement as a kind of the transfer engine (transfers/kinds.ts): the engine
// announces nothing of it. The settlement job maps the transfer's ending to its payment
// (forwarded or failed) with the payment's own events (settlement.ts), in one transaction. A
// settlement that failed with nothing sent (its instance stopped before its rail recorded
// anything, or its sending threw first) gives its payment back, in the failure's transaction:
// the payment names no transfer, and the next tick settles it again.

export function settlementTransferKind(db: Db): TransferKind {
  return {
    completedEvent: null,
    failedEvent: null,
    view: (row: TransferRow) => ({ transferId: row.id, paymentId: row.payment_id, status: row.status }),
    announcesNeverSent: PAYOUT_TRANSITIONS.settlement_failed.event !== null,
    failureDetails: (error: string) => ({ error }),
    releasesUnsent: (row: TransferRow) => (row.payment_id ? [releaseClaim(db, row.payment_id, row.id)] : []),
  };
}
