import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import type { Db } from "../../platform/db/database.ts";
import type { ProviderOnrampSession } from "../card/onramp-provider.ts";
import { recordEvents } from "../webhooks/outbox.ts";
import type { OnrampInbox } from "./confirm.ts";
import * as repo from "./repo.ts";
import { eventOf } from "./view.ts";

// What the provider says a session is now, applied: the one path of its events (service.ts,
// applyEvent) and of the reconciler's answers (reconcile.ts), so that both move a session the same
// way: under its row lock, forward only (the repo's compare-and-set), each change announced with
// `onramp.session.updated`, a snapshot that changes nothing announcing nothing. Crediting is not
// here: the chain decides it (confirm.ts).

/** Where a snapshot came from, for the logs: an event, or the reconciler's read. */
export type SnapshotSource = { eventId: string } | { reconciled: true };

export interface Applied {
  /** What happened (an event's record keeps it). */
  outcome: string;
  /** The session moved or had its transaction named. */
  changed: boolean;
}

/** Applies `session` in `trx` (the caller's transaction), the session's row locked here. */
export async function applySnapshot(
  ctx: AppContext,
  inbox: OnrampInbox,
  trx: Db,
  environment: Environment,
  session: ProviderOnrampSession,
  source: SnapshotSource,
): Promise<Applied> {
  const row = await repo.lockByProviderId(trx, environment, session.id);
  if (!row) {
    ctx.log.warn({ ...source, session: session.id }, "on-ramp session update for no session of ours");
    return { outcome: "unknown on-ramp session", changed: false };
  }
  const now = ctx.now();
  let txHash = session.transactionId?.toLowerCase() ?? null;
  if (txHash) {
    // One transaction delivers one session (a unique index backs it).
    const other = await repo.sessionOfTransaction(trx, { environment, id: row.network }, txHash);
    if (other && other.id !== row.id) {
      ctx.log.error(
        { ...source, onrampId: row.id, otherOnrampId: other.id, txHash },
        "on-ramp update names a transaction that delivered another session: its transaction ignored",
      );
      txHash = null;
    }
  }
  const moved = await repo.moveStatus(trx, row.id, session.status, {
    sourceAmount: session.sourceAmount,
    destinationAmount: session.destinationAmount,
    transactionId: txHash,
    at: now,
  });
  if (!moved) {
    const ignored = { outcome: `ignored: session is ${row.status}`, changed: false };
    // A later update of the same ending may name the transaction the first one did not.
    if (!txHash || row.status !== session.status) return ignored;
    const filled = await repo.fillTransaction(trx, row.id, txHash, now);
    if (!filled) return ignored;
    await inbox.onrampNamed(trx, { environment, id: filled.network }, deliveryOf(filled, txHash));
    return { outcome: "applied: transaction named", changed: true };
  }
  // The watcher may have seen the delivery before the provider named it: it is this session's.
  if (moved.transaction_id)
    await inbox.onrampNamed(trx, { environment, id: moved.network }, deliveryOf(moved, moved.transaction_id));
  await recordEvents(trx, [{ ...eventOf(moved), type: "onramp.session.updated" }]);
  return { outcome: "applied", changed: true };
}

const deliveryOf = (row: repo.OnrampRow, txHash: string) => ({
  txHash,
  wallet: row.wallet_address,
  token: row.destination_currency,
});
