import type { ChainToken } from "../../chain/network.ts";
import type { Environment } from "../../config.ts";
import type { Db } from "../../platform/db/database.ts";
import type { TransferKind } from "../payouts/kinds.ts";
import type { PayoutRow } from "../payouts/repo.ts";
import * as repo from "./repo.ts";
import type { SwapVenue } from "./venue.ts";
import { amountOf, swapViewOfTransfer } from "./view.ts";

// A swap as a kind of transfer of the payout operation (payouts/kinds.ts): its events, and what
// the chain says it sold and bought, read before its completion is recorded so that
// `swap.completed` carries the amounts received.

export function swapTransferKind(db: Db, venues: Partial<Record<Environment, SwapVenue>>): TransferKind {
  return {
    completedEvent: "swap.completed",
    failedEvent: "swap.failed",
    view: (row: PayoutRow) => ({ ...swapViewOfTransfer(row) }),
    // Whoever asked may never have had an answer: a swap that never left is announced.
    announcesNeverSent: true,
    failureDetails: (error: string) => ({ error }),
    completion: async (row: PayoutRow, mined: { txHash: string; userOpHash?: string }) => {
      const swap = await repo.findById(db, row.id);
      if (!swap) throw new Error(`swap ${row.id} has no record`);
      let sold = swap.sold_amount === null ? null : BigInt(swap.sold_amount);
      let bought = swap.bought_amount === null ? null : BigInt(swap.bought_amount);
      if (sold === null || bought === null) {
        const venue = venues[row.environment as Environment];
        if (!venue) throw new Error(`no swap venue for ${row.environment}`);
        const read = await venue.amounts(mined, {
          sell: swap.sell_token as ChainToken,
          buy: swap.buy_token as ChainToken,
          route: swap.route,
        });
        await repo.recordAmounts(db, row.id, read);
        ({ sold, bought } = read);
      }
      return { sellAmount: amountOf(sold, swap.sell_token), buyAmount: amountOf(bought, swap.buy_token) };
    },
  };
}
