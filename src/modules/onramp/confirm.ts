import type { Hex, Network } from "../../chain/network.ts";
import type { AppContext } from "../../context.ts";
import type { ChainToken } from "../../domain/money.ts";
import { recordEvents } from "../webhooks/outbox.ts";
import * as repo from "./repo.ts";
import { eventOf } from "./view.ts";

// The crypto of an on-ramp session counts once the chain shows it (D17): for each session the
// provider reports fulfilled, its transaction must be in the chain, as deep as the network's
// confirmations, and move the session's currency to the session's wallet; what it moved is
// credited, with `onramp.completed`, in one transaction, once. A transaction the chain does not
// have (yet, or ever) credits nothing: the session waits, and is logged.

const BATCH = 100;

export async function confirmOnChain(ctx: AppContext, network: Network): Promise<number> {
  const pending = await repo.toConfirm(ctx.db, network.environment, BATCH);
  if (pending.length === 0) return 0;
  const head = await network.head();
  let credited = 0;
  for (const session of pending) {
    const txHash = session.transaction_id as Hex;
    const block = await network.transactionBlock(txHash);
    if (!block) {
      ctx.log.warn(
        { onrampId: session.id, txHash },
        "on-ramp session fulfilled at the provider, but its transaction is not on chain: not credited",
      );
      continue;
    }
    if (head.number - block.number + 1n < BigInt(network.confirmations)) continue;
    const token = session.destination_currency as ChainToken;
    const transfers = await network.incomingTransfers(block.number, block.number, [
      session.wallet_address as Hex,
    ]);
    const amount = transfers
      .filter((t) => t.txHash.toLowerCase() === txHash.toLowerCase() && t.token === token)
      .reduce((sum, t) => sum + t.amount, 0n);
    if (amount === 0n) {
      ctx.log.warn(
        { onrampId: session.id, txHash, token },
        "on-ramp transaction moved none of the session's currency to its wallet: not credited",
      );
      continue;
    }
    const done = await ctx.db.transaction().execute(async (trx) => {
      const row = await repo.credit(trx, session.id, amount, ctx.now());
      if (row) await recordEvents(trx, [{ ...eventOf(row), type: "onramp.completed" }]);
      return row;
    });
    if (done) credited++;
  }
  return credited;
}
