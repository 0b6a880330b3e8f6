import type { CompiledQuery } from "kysely";
import type { EventLog } from "../../chain/network.ts";
import type { Environment } from "../../config.ts";
import type { TransferKindName } from "../../domain/payout-state.ts";
import type { OutboxEvent } from "../webhooks/outbox.ts";
import type { TransferRow } from "./repo.ts";

// The kinds of transfer out of a workspace wallet (migration 022): a payout, a refund, the return
// of an unmatched transfer, a swap, a payment's settlement (migration 030). They share every rule
// of the engine — the balance and gas checks, the record before broadcast, the reconciler (the
// breaker guards all but settlements) — and differ only in what they announce and in what their
// record took elsewhere, which a failure gives back. The module that orders a kind describes it;
// app.ts hands every description to the engine when it makes it.

export type { TransferKindName };

export interface TransferKind {
  /**
   * The event of a completed transfer, and of a failed one; null where the orderer announces the
   * ending on its own resource (a settlement: its payment's forwarded or failed, with its events).
   */
  completedEvent: string | null;
  failedEvent: string | null;

  /** The event's data for the transfer as its row stands (status and txHash are the row's). */
  view(row: TransferRow): Record<string, unknown>;
  /**
   * Whether a transfer that failed before anything was sent (its instance stopped first) is
   * announced with `failedEvent`. A payout's is not (PAYOUT_TRANSITIONS.never_sent); a refund's
   * is, since the merchant who asked for it may never have had an answer.
   */
  announcesNeverSent: boolean;
  /** A failed transfer's event data beyond its view. */
  failureDetails(error: string, failStreak: number): Record<string, unknown>;
  /**
   * What the transaction that fails a transfer of this kind (however it failed) writes to give
   * back what its record took in the orderer's own tables: statements built from the row, run by
   * the engine (a pure function: nothing of the orderer runs in that transaction).
   */
  releases?(row: TransferRow): CompiledQuery[];
  /**
   * What the transaction that fails a transfer of this kind with nothing sent writes beyond
   * `releases` (its instance stopped before its rail recorded anything, or its sending threw
   * first): the orderer's claim given back, so it may order the same money again (a settlement:
   * its payment names no transfer, and the next tick settles it). Pure, like `releases`.
   */
  releasesUnsent?(row: TransferRow): CompiledQuery[];
  /**
   * What the events of a completed transfer's move say beyond its row (a swap's amounts), read
   * from `logs` (which the engine asks the transfer's rail for): details merged into its
   * `completedEvent`, and statements that store them in the orderer's own tables, run by the
   * engine before the completion is recorded (idempotent: the reconciler may read them again).
   * Pure: nothing is read or written here. Throwing leaves the transfer processing, for the
   * reconciler to complete later.
   */
  measure?(
    row: TransferRow,
    logs: readonly EventLog[],
  ): { details: Record<string, unknown>; statements: CompiledQuery[] };
}

/** The events announcing that `row` of `kind` failed, with why (and the breaker's streak): none or one. */
export function failureEvents(
  kind: TransferKind,
  row: TransferRow,
  error: string,
  failStreak: number,
): OutboxEvent[] {
  if (kind.failedEvent === null) return [];
  return [
    {
      workspaceId: row.workspace_id,
      environment: row.environment as Environment,
      type: kind.failedEvent,
      payload: { ...kind.view(row), ...kind.failureDetails(error, failStreak) },
    },
  ];
}

/** What the transaction failing `row` of `kind` writes: its releases, and its claim back when nothing was sent. */
export function releasesOf(kind: TransferKind, row: TransferRow, unsent: boolean): CompiledQuery[] {
  return [...(kind.releases?.(row) ?? []), ...(unsent ? (kind.releasesUnsent?.(row) ?? []) : [])];
}

/** Every kind, each described by the module that orders it (app.ts composes them). */
export type OrderedKinds = Record<TransferKindName, TransferKind>;

export class TransferKinds {
  readonly #kinds: ReadonlyMap<string, TransferKind>;

  /** Every kind the payouts table's CHECK allows is described from the start. */
  constructor(ordered: OrderedKinds) {
    this.#kinds = new Map<string, TransferKind>(Object.entries(ordered));
  }

  of(name: string): TransferKind {
    const kind = this.#kinds.get(name);
    if (!kind) throw new Error(`no transfer kind "${name}" is described`);
    return kind;
  }
}
