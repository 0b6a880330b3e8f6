import type { FastifyBaseLogger } from "fastify";
import { type BlockRef, confirmationsAt, type Hex, type Network } from "../../../chain/network.ts";
import { UNMATCHED_TRANSITIONS } from "../../../domain/unmatched-state.ts";
import type { Db } from "../../../platform/db/database.ts";
import * as unmatchedRepo from "../inbox/unmatched-repo.ts";

// The unmatched inbox against the chain (issue 39): a transfer the watcher recorded there is
// checked, as a detected payment is, until the network's confirmations are met. A reorganisation
// that drops its transaction first leaves it `dropped` (attach and return refuse it: there is
// nothing to send back), and a dropped one whose transaction is mined again is open again, the
// same inbox item. The simulated ledger's transfers are final at once and never checked.

/** Inbox transfers checked against the chain per tick. */
const CHECK_BATCH = 500;

/**
 * What the chain says about each transfer: `included[i]` is the block holding the transaction of
 * `rows[i]` now (null: in no block); a transfer in block b has head − b + 1 confirmations.
 */
export function planInboxCheck(
  rows: ReadonlyArray<Pick<unmatchedRepo.UnmatchedRow, "id" | "status" | "block_number">>,
  included: ReadonlyArray<BlockRef | null>,
  headNumber: bigint,
  required: number,
): unmatchedRepo.InboxCheckRecord {
  const plan: unmatchedRepo.InboxCheckRecord = { confirm: [], move: [], drop: [], reopen: [] };
  rows.forEach((row, i) => {
    const block = included[i];
    if (row.status === UNMATCHED_TRANSITIONS.mined_again.from) {
      if (block) plan.reopen.push({ id: row.id, block: block.number });
    } else if (!block) plan.drop.push(row.id);
    else if (confirmationsAt(headNumber, block.number) >= BigInt(required))
      plan.confirm.push({ id: row.id, block: block.number });
    else if (block.number !== BigInt(row.block_number)) plan.move.push({ id: row.id, block: block.number });
  });
  return plan;
}

/**
 * The watcher's inbox check, made once per head. While the head stays the same block the chain
 * answers the same for every transfer checked (a reorganisation brings a new head), so the ticks in
 * between ask it nothing for the inbox; a transfer a catch-up scan records meanwhile is checked with
 * the next head.
 */
export class InboxCheck {
  #checkedAt: Hex | undefined;

  async run(db: Db, network: Network, log: FastifyBaseLogger, head: BlockRef, at: Date): Promise<void> {
    if (head.hash === this.#checkedAt) return;
    await checkInbox(db, network, log, head.number, at);
    this.#checkedAt = head.hash;
  }
}

/** Checks the network's unconfirmed inbox transfers against the chain at `headNumber`, recorded in one transaction. */
async function checkInbox(
  db: Db,
  network: Network,
  log: FastifyBaseLogger,
  headNumber: bigint,
  at: Date,
): Promise<void> {
  const rows = await unmatchedRepo.unconfirmedInbox(db, network, CHECK_BATCH);
  if (rows.length === 0) return;
  // One batched round trip (the client batches concurrent calls).
  const included = await Promise.all(rows.map((row) => network.transactionBlock(row.tx_hash as Hex)));
  const plan = planInboxCheck(rows, included, headNumber, network.confirmations);
  if (plan.confirm.length + plan.move.length + plan.drop.length + plan.reopen.length === 0) return;
  const { dropped, reopened } = await db
    .transaction()
    .execute((trx) => unmatchedRepo.recordInboxCheck(trx, plan, at));
  for (const row of dropped)
    log.warn(
      { unmatchedId: row.id, txHash: row.tx_hash, network: network.id },
      "inbox transfer dropped by a reorg: nothing to attach or return until it is mined again",
    );
  for (const row of reopened)
    log.info(
      { unmatchedId: row.id, txHash: row.tx_hash, network: network.id },
      "dropped inbox transfer mined again: open",
    );
}
