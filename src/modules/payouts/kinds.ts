import type { Environment } from "../../config.ts";
import { PAYOUT_TRANSITIONS, type TransferKindName } from "../../domain/payout-state.ts";
import type { Db } from "../../platform/db/database.ts";
import type { OutboxEvent } from "../webhooks/outbox.ts";
import type { PayoutRow } from "./repo.ts";
import { toPayoutView } from "./view.ts";

// The kinds of transfer out of a workspace wallet (migration 022): a payout, and the transfers
// other modules order through the same operation (a refund, the return of an unmatched transfer).
// They share every rule of a payout — the breaker, the balance and gas checks, the record before
// broadcast, the reconciler — and differ only in what they announce and in what their record took
// elsewhere, which a failure gives back. The module that orders a kind describes it; app.ts hands
// every description to the payouts service when it makes it.

export type { TransferKindName };

export interface TransferKind {
  /** The event of a completed transfer, and of a failed one counted by the breaker. */
  completedEvent: string;
  failedEvent: string;
  /** The event's data for the transfer as its row stands (status and txHash are the row's). */
  view(row: PayoutRow): Record<string, unknown>;
  /**
   * Whether a transfer that failed before anything was sent (its instance stopped first) is
   * announced with `failedEvent`. A payout's is not (PAYOUT_TRANSITIONS.never_sent); a refund's
   * is, since the merchant who asked for it may never have had an answer.
   */
  announcesNeverSent: boolean;
  /** A failed transfer's event data beyond its view. */
  failureDetails(error: string, failStreak: number): Record<string, unknown>;
  /**
   * Runs in the transaction that fails a transfer of this kind (however it failed): gives back
   * what its record took in the orderer's own tables.
   */
  released?(trx: Db, row: PayoutRow): Promise<void>;
  /**
   * What the chain says of a completed transfer beyond its row (a swap's amounts, read from its
   * receipt's logs), merged into its `completedEvent`. Awaited before the completion is recorded,
   * so it may store what it read in the orderer's own tables (idempotently: the reconciler may ask
   * again); throwing leaves the transfer processing, for the reconciler to complete later.
   */
  completion?(
    row: PayoutRow,
    mined: { txHash: string; userOpHash?: string },
  ): Promise<Record<string, unknown>>;
}

const PAYOUT: TransferKind = {
  completedEvent: "payout.completed",
  failedEvent: "payout.failed",
  view: (row) => ({ ...toPayoutView(row) }),
  announcesNeverSent: PAYOUT_TRANSITIONS.never_sent.event !== null,
  failureDetails: (error, failStreak) => ({ error, failStreak }),
};

/** The event announcing that `row` of `kind` failed, with why (and the breaker's streak). */
export function failureEvent(
  kind: TransferKind,
  row: PayoutRow,
  error: string,
  failStreak: number,
): OutboxEvent {
  return {
    workspaceId: row.workspace_id,
    environment: row.environment as Environment,
    type: kind.failedEvent,
    payload: { ...kind.view(row), ...kind.failureDetails(error, failStreak) },
  };
}

/** The kinds other modules order, each described by its orderer (app.ts composes them). */
export type OrderedKinds = Record<Exclude<TransferKindName, "payout">, TransferKind>;

export class TransferKinds {
  readonly #kinds: ReadonlyMap<string, TransferKind>;

  /** Every kind the payouts table's CHECK allows is described from the start. */
  constructor(ordered: OrderedKinds) {
    this.#kinds = new Map<string, TransferKind>([["payout", PAYOUT], ...Object.entries(ordered)]);
  }

  of(name: string): TransferKind {
    const kind = this.#kinds.get(name);
    if (!kind) throw new Error(`no transfer kind "${name}" is described`);
    return kind;
  }
}
