import { type CompiledQuery, type RawBuilder, type Selectable, sql } from "kysely";
import type { OnNetwork } from "../../../chain/network.ts";
import type { Environment } from "../../../config.ts";
import { UNMATCHED_TRANSITIONS, type UnmatchedTrigger } from "../../../domain/unmatched-state.ts";
import type { OpenInboxTransfer } from "../../../domain/unsettled-payments.ts";
import { columnList, columnsOf } from "../../../platform/db/columns.ts";
import type { Db } from "../../../platform/db/database.ts";
import { newestFirst } from "../../../platform/db/page.ts";
import type { UnmatchedTransfersTable } from "../../../platform/db/schema.ts";
import { idInScope } from "../../../platform/db/scope.ts";
import { type OfWallet, type WalletOn, walletIndex, walletsTable } from "../held-wallets.ts";

// SQL of the unmatched inbox's actions (D19). A status changes only by a compare-and-set whose
// `from` and `to` come from the transition table (domain/unmatched-state.ts).

/** Why a transfer is in the inbox: it matched no payment (the watcher's reason, and the sandbox's). */
export const UNMATCHED_REASON = "no pending payment for this token and amount at this address";

export type UnmatchedRow = Selectable<UnmatchedTransfersTable>;

/** An unmatched transfer's whole row, named column by column (platform/db/columns.ts). */
export const UNMATCHED_COLUMNS = columnsOf<UnmatchedTransfersTable>({
  id: true,
  workspace_id: true,
  environment: true,
  token_symbol: true,
  amount: true,
  from_address: true,
  to_address: true,
  tx_hash: true,
  log_index: true,
  block_number: true,
  reason: true,
  created_at: true,
  status: true,
  payment_id: true,
  resolved_at: true,
  network: true,
  confirmed_at: true,
});

type Scope = { workspaceId: string; environment: Environment };

/** An unmatched transfer of the scope; `forUpdate` locks it for an action. */
export async function findUnmatched(
  db: Db,
  scope: Scope,
  id: string,
  forUpdate = false,
): Promise<UnmatchedRow | undefined> {
  let query = db.selectFrom("unmatched_transfers").select(UNMATCHED_COLUMNS).where(idInScope(scope, id));
  if (forUpdate) query = query.forUpdate();
  return query.executeTakeFirst();
}

/** Moves the transfer by `trigger` if it is still where the rule starts; undefined otherwise. */
export async function moveUnmatched(
  db: Db,
  id: string,
  trigger: UnmatchedTrigger,
  changes: { payment_id?: string | null; resolved_at: Date | null },
): Promise<UnmatchedRow | undefined> {
  return moved(db, trigger, changes).where("id", "=", id).returning(UNMATCHED_COLUMNS).executeTakeFirst();
}

/** The compare-and-set of `trigger`: `to` from `from`, as the transition table says. */
function moved(
  db: Db,
  trigger: UnmatchedTrigger,
  changes: { payment_id?: string | null; resolved_at: Date | null },
) {
  const rule = UNMATCHED_TRANSITIONS[trigger];
  return db
    .updateTable("unmatched_transfers")
    .set({ ...changes, status: rule.to })
    .where("status", "=", rule.from);
}

/**
 * A transfer's move by `trigger`, as one statement for another module's transaction (the record
 * of its return, the failure that reopens it): it returns the transfer when it moved it.
 */
export function moveStatement(
  db: Db,
  scope: Scope,
  id: string,
  trigger: UnmatchedTrigger,
  changes: { resolved_at: Date | null },
): CompiledQuery {
  return moved(db, trigger, changes).where(idInScope(scope, id)).returning("id").compile();
}

/**
 * The transfers attached to `paymentIds` whose detection a reorganisation reverted: dropped until
 * their transaction is mined again (attachment_reverted), in the revert's transaction, and checked
 * against the chain again from then on. The rows it moved.
 */
export async function dropAttached(db: Db, paymentIds: readonly string[]): Promise<UnmatchedRow[]> {
  if (paymentIds.length === 0) return [];
  const rule = UNMATCHED_TRANSITIONS.attachment_reverted;
  return db
    .updateTable("unmatched_transfers")
    .set({ status: rule.to, payment_id: null, resolved_at: null, confirmed_at: null })
    .where("payment_id", "in", [...paymentIds])
    .where("status", "=", rule.from)
    .returning(UNMATCHED_COLUMNS)
    .execute();
}

/** The transfers of transaction `txHash` (lower-case) to `to` (lower-case) of `token`, locked. */
export async function lockOfTransaction(
  db: Db,
  on: OnNetwork,
  transfer: { txHash: string; to: string; token: string },
): Promise<UnmatchedRow[]> {
  return db
    .selectFrom("unmatched_transfers")
    .select(UNMATCHED_COLUMNS)
    .where("environment", "=", on.environment)
    .where("network", "=", on.id)
    .where("tx_hash", "=", transfer.txHash)
    .where((eb) => eb(eb.fn("lower", ["to_address"]), "=", transfer.to))
    .where("token_symbol", "=", transfer.token)
    .orderBy("id")
    .forUpdate()
    .execute();
}

/**
 * Moves the open transfers of transaction `txHash` (lower-case) to `to` (lower-case) of `token` by
 * `trigger`; the rows it moved.
 */
export async function moveUnmatchedOfTransaction(
  db: Db,
  on: OnNetwork,
  transfer: { txHash: string; to: string; token: string },
  trigger: UnmatchedTrigger,
  at: Date,
): Promise<UnmatchedRow[]> {
  const rule = UNMATCHED_TRANSITIONS[trigger];
  return db
    .updateTable("unmatched_transfers")
    .set({ status: rule.to, resolved_at: at })
    .where("environment", "=", on.environment)
    .where("network", "=", on.id)
    .where("tx_hash", "=", transfer.txHash)
    .where((eb) => eb(eb.fn("lower", ["to_address"]), "=", transfer.to))
    .where("token_symbol", "=", transfer.token)
    .where("status", "=", rule.from)
    .returning(UNMATCHED_COLUMNS)
    .execute();
}

/**
 * A sandbox payer's transfer (D19), recorded in the inbox as the watcher records a live one, final
 * at once (the ledger does not reorganise): an INSERT returning its row for the caller's statement.
 */
export function insertUnmatchedQuery(row: {
  workspaceId: string;
  environment: Environment;
  network: string;
  tokenSymbol: string;
  amount: bigint;
  fromAddress: string;
  toAddress: string;
  txHash: string;
  reason: string;
}): RawBuilder<unknown> {
  return sql`
    INSERT INTO unmatched_transfers (workspace_id, environment, network, token_symbol, amount, from_address,
                                     to_address, tx_hash, log_index, block_number, reason, confirmed_at)
    VALUES (${row.workspaceId}, ${row.environment}, ${row.network}, ${row.tokenSymbol}, ${row.amount.toString()}::numeric,
            ${row.fromAddress}, ${row.toAddress}, ${row.txHash}, 0, 0, ${row.reason}, now())
    RETURNING ${columnList(UNMATCHED_COLUMNS)}`;
}

/** A page of the scope's inbox, newest first, with the total. */
export async function listUnmatched(db: Db, scope: Scope, page: { limit: number; offset: number }) {
  const base = db
    .selectFrom("unmatched_transfers")
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment);
  return newestFirst(
    base.select(UNMATCHED_COLUMNS),
    base.select((eb) => eb.fn.countAll().as("total")),
    page,
  );
}

/**
 * The transfers of network `on` the watcher still checks against the chain: open ones short of
 * the network's confirmations, then dropped ones (mined again?); at most `limit`.
 */
export async function unconfirmedInbox(db: Db, on: OnNetwork, limit: number): Promise<UnmatchedRow[]> {
  return db
    .selectFrom("unmatched_transfers")
    .select(UNMATCHED_COLUMNS)
    .where("environment", "=", on.environment)
    .where("network", "=", on.id)
    .where("confirmed_at", "is", null)
    .where("status", "in", [
      UNMATCHED_TRANSITIONS.dropped_by_reorg.from,
      UNMATCHED_TRANSITIONS.mined_again.from,
    ])
    .orderBy(sql`status = ${UNMATCHED_TRANSITIONS.mined_again.from}`)
    .orderBy("id")
    .limit(limit)
    .execute();
}

/** What a check of the inbox against the chain found (incoming/inbox-check.ts): the blocks are where each transaction is now. */
export interface InboxCheckRecord {
  /** Open, under the network's confirmations now: final. */
  confirm: Array<{ id: string; block: bigint }>;
  /** Open, in another block than recorded (a reorganisation mined it again before it was confirmed). */
  move: Array<{ id: string; block: bigint }>;
  /** Open, in no block: dropped_by_reorg. */
  drop: string[];
  /** Dropped, in a block again: mined_again. */
  reopen: Array<{ id: string; block: bigint }>;
}

const placed = (rows: ReadonlyArray<{ id: string; block: bigint }>) => sql`unnest(
  ${rows.map((r) => r.id)}::uuid[], ${rows.map((r) => r.block.toString())}::bigint[]
) AS c(id, block)`;

/**
 * Records a check in one transaction's statements, each a compare-and-set on the status the check
 * saw (a transfer acted on meanwhile is left alone). The transfers dropped and reopened.
 */
export async function recordInboxCheck(
  trx: Db,
  check: InboxCheckRecord,
  at: Date,
): Promise<{ dropped: UnmatchedRow[]; reopened: UnmatchedRow[] }> {
  const open = UNMATCHED_TRANSITIONS.dropped_by_reorg.from;
  if (check.confirm.length > 0)
    await sql`
      UPDATE unmatched_transfers u SET confirmed_at = ${at}, block_number = c.block
      FROM ${placed(check.confirm)}
      WHERE u.id = c.id AND u.status = ${open} AND u.confirmed_at IS NULL`.execute(trx);
  if (check.move.length > 0)
    await sql`
      UPDATE unmatched_transfers u SET block_number = c.block
      FROM ${placed(check.move)}
      WHERE u.id = c.id AND u.status = ${open} AND u.confirmed_at IS NULL`.execute(trx);
  const dropped =
    check.drop.length === 0
      ? []
      : await moved(trx, "dropped_by_reorg", { resolved_at: null })
          .where("id", "in", check.drop)
          .where("confirmed_at", "is", null)
          .returning(UNMATCHED_COLUMNS)
          .execute();
  const reopen = UNMATCHED_TRANSITIONS.mined_again;
  const reopened =
    check.reopen.length === 0
      ? []
      : (
          await sql<UnmatchedRow>`
            UPDATE unmatched_transfers u SET status = ${reopen.to}, block_number = c.block
            FROM ${placed(check.reopen)}
            WHERE u.id = c.id AND u.status = ${reopen.from}
            RETURNING ${columnList(UNMATCHED_COLUMNS, "u")}`.execute(trx)
        ).rows;
  return { dropped, reopened };
}

/**
 * The open inbox transfers that reached each of `wallets` (issue 39), in ONE statement: money a
 * wallet holds for their senders until each is attached or returned, which no other transfer may
 * spend.
 */
export async function openInboxOf(
  db: Db,
  wallets: readonly WalletOn[],
): Promise<OfWallet<OpenInboxTransfer>[]> {
  const { rows } = await sql<{ i: string; id: string; token_symbol: string; amount: string }>`
    SELECT w.i, u.id, u.token_symbol, u.amount
    FROM ${walletsTable(wallets)}
    JOIN unmatched_transfers u
      ON ${openInboxOn(sql.ref("w.environment"), sql.ref("w.network"), sql.ref("w.address"))}`.execute(db);
  return rows.map((row) => ({
    wallet: walletIndex(row.i),
    item: { id: row.id, token: row.token_symbol, amount: BigInt(row.amount) },
  }));
}

/** A wallet and token as columns of a caller's statement, for `openInboxHeld`. */
export interface HeldOf {
  environment: RawBuilder<unknown>;
  network: RawBuilder<unknown>;
  /** The wallet's address, lower-case. */
  address: RawBuilder<unknown>;
  token: RawBuilder<unknown>;
  /** An inbox transfer not to count (the one a return sends back), or NULL. */
  except: RawBuilder<unknown>;
}

/**
 * What the open inbox transfers of `of.token` hold on `of.address` (openInboxOf's rows, summed), as
 * a scalar subquery of the caller's statement, so that it is read with the statement's snapshot.
 */
export function openInboxHeld(of: HeldOf): RawBuilder<string> {
  return sql<string>`(
    SELECT coalesce(sum(u.amount), 0) FROM unmatched_transfers u
    WHERE ${openInboxOn(of.environment, of.network, of.address)}
      AND u.token_symbol = ${of.token} AND u.id IS DISTINCT FROM ${of.except})`;
}

/**
 * The condition on `u` (unmatched_transfers) of both reads above: an open transfer that reached the
 * wallet (`address` lower-case), money held for its sender until attached or returned.
 */
function openInboxOn(
  environment: RawBuilder<unknown>,
  network: RawBuilder<unknown>,
  address: RawBuilder<unknown>,
): RawBuilder<unknown> {
  return sql`u.environment = ${environment} AND u.network = ${network} AND lower(u.to_address) = ${address}
    AND u.status = ${UNMATCHED_TRANSITIONS.attached.from}
    -- A stray payer's money only: the workspace's own transfers and possible on-ramp deliveries are its own.
    AND u.reason = ${UNMATCHED_REASON}`;
}
