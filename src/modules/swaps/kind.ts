import type { ChainToken, EventLog, Hex } from "../../chain/network.ts";
import type { Environment } from "../../config.ts";
import type { Db } from "../../platform/db/database.ts";
import type { TransferKind } from "../transfers/kinds.ts";
import type { TransferRow } from "../transfers/repo.ts";
import * as repo from "./repo.ts";
import { type SwapVenues, venueKey } from "./venues.ts";
import { amountOf, swapViewOfTransfer } from "./view.ts";

// A swap as a kind of transfer of the transfer engine (transfers/kinds.ts): its events, and what
// it sold and bought, read from the events its move emitted (which the engine asks its rail for)
// before its completion is recorded, so that `swap.completed` carries the amounts received. The
// reading is pure; the amounts are stored in the swaps table by a statement the engine runs.

export function swapTransferKind(db: Db, venues: SwapVenues): TransferKind {
  return {
    completedEvent: "swap.completed",
    failedEvent: "swap.failed",
    view: (row: TransferRow) => ({ ...swapViewOfTransfer(row) }),
    // Whoever asked may never have had an answer: a swap that never left is announced.
    announcesNeverSent: true,
    failureDetails: (error: string) => ({ error }),
    measure: (row: TransferRow, logs: readonly EventLog[]) => {
      const venue = venues.get(venueKey(row.environment as Environment, row.network));
      if (!venue) throw new Error(`no swap venue for ${row.environment} network ${row.network}`);
      const sell = (row.metadata.sellToken ?? row.token_symbol) as ChainToken;
      const buy = row.metadata.buyToken as ChainToken;
      const pool = row.metadata.pool as Hex | undefined;
      const amounts = venue.amountsIn(logs, { sell, buy, pool });
      return {
        details: { sellAmount: amountOf(amounts.sold, sell), buyAmount: amountOf(amounts.bought, buy) },
        // Idempotent: the reconciler may read them again.
        statements: [repo.recordAmountsStatement(db, row.id, amounts)],
      };
    },
  };
}
