import type { Hex, Network } from "../../chain/network.ts";
import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { firstLineOf } from "../../domain/errors.ts";
import type { ChainToken } from "../../domain/money.ts";
import type { Db } from "../../platform/db/database.ts";
import { recordEvents } from "../webhooks/outbox.ts";
import * as repo from "./repo.ts";
import { eventOf } from "./view.ts";

// The crypto of an on-ramp session counts once the chain shows it (D17): for each session the
// provider reports fulfilled, its transaction must be in the chain, as deep as the network's
// confirmations, and move the session's currency to the session's wallet; what it moved is
// credited, with `onramp.completed`, in one transaction, once. Not if the unmatched inbox had it
// and the merchant attached it to a payment or sent it back meanwhile: that money is not the
// wallet's (logged, left uncredited). A transaction the chain does not have (yet, or ever)
// credits nothing: the session waits, and is logged. Sessions are looked at least recently looked
// at first, so ones that never credit do not keep the others waiting.

/** The unmatched inbox's part (payments/unmatched.ts): a delivery it holds is the session's. */
export interface OnrampInbox {
  claimForOnramp(
    trx: Db,
    environment: Environment,
    delivery: { txHash: string; wallet: string },
  ): Promise<boolean>;
}

const BATCH = 100;

export async function confirmOnChain(ctx: AppContext, network: Network, inbox: OnrampInbox): Promise<number> {
  const pending = await repo.toConfirm(ctx.db, network.environment, BATCH);
  if (pending.length === 0) return 0;
  const head = await network.head();
  let credited = 0;
  for (const session of pending) {
    await repo.markChecked(ctx.db, session.id, ctx.now());
    try {
      if (await confirmOne(ctx, network, inbox, session, head.number)) credited++;
    } catch (err) {
      // One session the node cannot answer for does not stop the others.
      ctx.log.error(
        { err, onrampId: session.id },
        `confirming an on-ramp session failed: ${firstLineOf(err)}`,
      );
    }
  }
  return credited;
}

async function confirmOne(
  ctx: AppContext,
  network: Network,
  inbox: OnrampInbox,
  session: repo.OnrampRow,
  head: bigint,
): Promise<boolean> {
  const txHash = session.transaction_id as Hex;
  const block = await network.transactionBlock(txHash);
  if (!block) {
    ctx.log.warn(
      { onrampId: session.id, txHash },
      "on-ramp session fulfilled at the provider, but its transaction is not on chain: not credited",
    );
    return false;
  }
  if (head - block.number + 1n < BigInt(network.confirmations)) return false;
  const token = session.destination_currency as ChainToken;
  const wallet = session.wallet_address as Hex;
  const transfers = await network.incomingTransfers(block.number, block.number, [wallet]);
  const amount = transfers
    .filter(
      (t) =>
        t.txHash.toLowerCase() === txHash && t.token === token && t.to.toLowerCase() === wallet.toLowerCase(),
    )
    .reduce((sum, t) => sum + t.amount, 0n);
  if (amount === 0n) {
    ctx.log.warn(
      { onrampId: session.id, txHash, token },
      "on-ramp transaction moved none of the session's currency to its wallet: not credited",
    );
    return false;
  }
  const done = await ctx.db.transaction().execute(async (trx) => {
    if (!(await inbox.claimForOnramp(trx, network.environment, { txHash, wallet }))) {
      ctx.log.error(
        { onrampId: session.id, txHash },
        "on-ramp delivery was attached to a payment or returned from the unmatched inbox: not credited",
      );
      return undefined;
    }
    const row = await repo.credit(trx, session.id, amount, ctx.now());
    if (row) await recordEvents(trx, [{ ...eventOf(row), type: "onramp.completed" }]);
    return row;
  });
  return done !== undefined;
}
