import type { Kysely } from "kysely";
import type { Environment } from "../../config.ts";
import { ConcurrentChange, TransitionRefused } from "../../domain/errors.ts";
import {
  type PaymentEventType,
  type PaymentStatus,
  type PaymentTrigger,
  TRANSITIONS,
  transition,
} from "../../domain/payment-state.ts";
import type { DatabaseSchema, PaymentRow } from "../../platform/db/schema.ts";
import { recordEvents } from "../webhooks/outbox.ts";
import * as repo from "./repo.ts";
import { toPaymentView } from "./view.ts";

// The one way a payment changes status: the domain table decides, the row moves only if it is
// still where the decision started (compare-and-set), and the event is written with it. One row:
// applyTransition; many rows in one statement (the chain watcher): batchTransition gives the
// statement its rule and emitPaymentEvents writes the events of the rows it moved.

export async function applyTransition(
  trx: Kysely<DatabaseSchema>,
  row: PaymentRow,
  trigger: PaymentTrigger,
  at: Date,
  changes: repo.PaymentChanges = {},
): Promise<PaymentRow> {
  const decided = transition(row.status as PaymentStatus, trigger);
  if (!decided.ok) throw new TransitionRefused(row.status, trigger);
  const updated = await repo.moveStatus(trx, row.id, decided, at, changes);
  if (!updated) throw new ConcurrentChange("Payment changed concurrently; retry");
  if (decided.event) await emitPaymentEvents(trx, [updated], decided.event);
  return updated;
}

/** A trigger's rule, for a statement that moves many payments at once. */
export interface BatchTransition {
  /** The statement's compare-and-set: it only touches rows still in this status. */
  from: PaymentStatus;
  to: PaymentStatus;
  /** Emitted (emitPaymentEvents) for every row the statement moved, in the same transaction. */
  event: PaymentEventType | null;
}

/**
 * The same table decides for set-based statements (the chain watcher's): the statement filters on
 * `from`, sets `to`, and returns the rows it moved for their events. A batch starts from exactly
 * one status so that its filter is a plain equality the partial indexes on status can serve.
 */
export function batchTransition(trigger: PaymentTrigger): BatchTransition {
  const rule = TRANSITIONS[trigger];
  const [from, ...others] = rule.from;
  if (from === undefined || others.length > 0)
    throw new Error(`${trigger} does not start from exactly one status`);
  return { from, to: rule.to, event: rule.event };
}

/** Events are written this many per statement (each takes 4 bind parameters of the 65,535). */
const EVENTS_PER_STATEMENT = 1_000;

export async function emitPaymentEvents(
  trx: Kysely<DatabaseSchema>,
  rows: readonly PaymentRow[],
  type: string,
): Promise<void> {
  for (let i = 0; i < rows.length; i += EVENTS_PER_STATEMENT) {
    await recordEvents(
      trx,
      rows.slice(i, i + EVENTS_PER_STATEMENT).map((row) => ({
        workspaceId: row.workspace_id,
        environment: row.environment as Environment,
        type,
        payload: { ...toPaymentView(row) },
      })),
    );
  }
}
