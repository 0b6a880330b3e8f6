import { PAYOUT_TRANSITIONS } from "../../domain/payout-state.ts";
import type { TransferKind } from "../transfers/kinds.ts";
import { toPayoutView } from "./view.ts";

// A payout as a kind of the transfer engine: what it announces. A payout that never left is not
// announced (PAYOUT_TRANSITIONS.never_sent): its caller had its answer, or will repeat its key.

export const payoutTransferKind: TransferKind = {
  completedEvent: "payout.completed",
  failedEvent: "payout.failed",
  view: (row) => ({ ...toPayoutView(row) }),
  announcesNeverSent: PAYOUT_TRANSITIONS.never_sent.event !== null,
  failureDetails: (error, failStreak) => ({ error, failStreak }),
};
