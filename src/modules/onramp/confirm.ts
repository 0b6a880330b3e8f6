import type { Hex, Network, OnNetwork } from "../../chain/network.ts";
import { inChainOrder, transferOrdinals } from "../../chain/transfer-order.ts";
import type { AppContext } from "../../context.ts";
import { firstLineOf } from "../../domain/errors.ts";
import type { ChainToken } from "../../domain/money.ts";
import type { Db } from "../../platform/db/database.ts";
import type { ClaimedTransfer, OnrampDelivery } from "../payments/inbox/unmatched.ts";
import { recordEvents } from "../webhooks/outbox.ts";
import * as repo from "./repo.ts";
import { eventOf } from "./view.ts";

// The crypto of an on-ramp session counts once the chain shows it (D17): for each session the
// provider reports fulfilled, its transaction must be in the chain, as deep as the network's
// confirmations, and move the session's currency to the session's wallet; what it moved is
// credited, with `onramp.completed`, in one transaction, once, and only if the session can claim
// those transfers (a transfer counts once: not if a payment took it, or the merchant attached or
// returned it from the unmatched inbox: logged, left uncredited). A transaction the chain does not
// have (yet, or ever) credits nothing: the session waits, and is logged.
//
// Looked at least recently looked at first, and less and less often as a session ages (at most
// once per a tenth of the time since it last changed, at least hourly), so that sessions that never
// credit neither keep the others waiting nor cost a read of the chain every tick; given up, with an
// error logged (and counted by the onramp_sessions_stuck metric), three days after their last change.

/** The unmatched inbox's part (payments/inbox/unmatched.ts): the session claims its delivery's transfers. */
export interface OnrampInbox {
  onrampNamed(trx: Db, on: OnNetwork, delivery: OnrampDelivery): Promise<void>;
  claimForOnramp(
    trx: Db,
    on: OnNetwork,
    delivery: OnrampDelivery & { transfers: readonly ClaimedTransfer[] },
  ): Promise<boolean>;
}

const BATCH = 100;
/** The longest a session still looked at waits between two looks. */
export const CONFIRM_MAX_SPACING_MS = 3_600_000;
/** After this long without a change, a session's transaction is not looked for any more. */
export const CONFIRM_GIVE_UP_MS = 3 * 24 * 3_600_000;

export async function confirmOnChain(ctx: AppContext, network: Network, inbox: OnrampInbox): Promise<number> {
  const now = ctx.now();
  const pending = await repo.toConfirm(ctx.db, network, now, CONFIRM_MAX_SPACING_MS, BATCH);
  if (pending.length === 0) return 0;
  const head = await network.head();
  let credited = 0;
  for (const session of pending) {
    if (now.getTime() - session.updated_at.getTime() >= CONFIRM_GIVE_UP_MS) {
      await repo.giveUpConfirming(ctx.db, session.id, now);
      ctx.log.error(
        { onrampId: session.id, txHash: session.transaction_id, fulfilledAt: session.updated_at },
        "on-ramp session fulfilled at the provider, but its transaction never credited it: no longer looked for",
      );
      continue;
    }
    await repo.markChecked(ctx.db, session.id, now);
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
  const transfers = await deliveredBy(network, txHash, block.number, wallet, token);
  const amount = transfers.reduce((sum, t) => sum + t.amount, 0n);
  if (amount === 0n) {
    ctx.log.warn(
      { onrampId: session.id, txHash, token },
      "on-ramp transaction moved none of the session's currency to its wallet: not credited",
    );
    return false;
  }
  const delivery = { txHash, wallet, token, transfers };
  const done = await ctx.db.transaction().execute(async (trx) => {
    // The session first, then the inbox and the claims: the order the provider's events take too.
    if (!(await repo.lockUncredited(trx, session.id))) return undefined;
    if (!(await inbox.claimForOnramp(trx, network, delivery))) {
      ctx.log.error(
        { onrampId: session.id, txHash },
        "on-ramp delivery already counted as a payment, or attached or returned from the unmatched inbox: not credited",
      );
      return undefined;
    }
    const row = await repo.credit(trx, session.id, amount, ctx.now());
    if (row) await recordEvents(trx, [{ ...eventOf(row), type: "onramp.completed" }]);
    return row;
  });
  return done !== undefined;
}

/** The transfers of `token` that transaction `txHash` (in `block`) made to `wallet`, each with its identity. */
async function deliveredBy(
  network: Network,
  txHash: Hex,
  block: bigint,
  wallet: Hex,
  token: ChainToken,
): Promise<Array<ClaimedTransfer & { amount: bigint }>> {
  const ofTransaction = inChainOrder(await network.incomingTransfers(block, block, [wallet])).filter(
    (t) => t.txHash.toLowerCase() === txHash,
  );
  const ordinals = transferOrdinals(ofTransaction);
  return ofTransaction.flatMap((t, i) =>
    t.token === token && t.to.toLowerCase() === wallet.toLowerCase()
      ? [
          {
            txHash: t.txHash,
            token: t.token,
            to: t.to,
            ordinal: ordinals[i] ?? 0,
            logIndex: t.logIndex,
            blockNumber: t.blockNumber,
            amount: t.amount,
          },
        ]
      : [],
  );
}
