import { PAYOUT_TRANSITIONS } from "../../../domain/payout-state.ts";
import type { TransferKind } from "../../transfers/kinds.ts";
import type { TransferRow } from "../../transfers/repo.ts";

// A payment's settlement as a kind of the transfer engine (transfers/kinds.ts): the engine
// announces nothing of it. The settlement job maps the transfer's ending to its payment
// (forwarded or failed) with the payment's own events (settlement.ts), in one transaction.

export const settlementTransferKind: TransferKind = {
  completedEvent: null,
  failedEvent: null,
  view: (row: TransferRow) => ({ transferId: row.id, paymentId: row.payment_id, status: row.status }),
  announcesNeverSent: PAYOUT_TRANSITIONS.settlement_failed.event !== null,
  failureDetails: (error: string) => ({ error }),
};
