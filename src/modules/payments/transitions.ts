import type { Kysely, Updateable } from "kysely";
import type { Environment } from "../../config.ts";
import { type PaymentStatus, type PaymentTrigger, transition } from "../../domain/payment-state.ts";
import type { DatabaseSchema, PaymentRow, PaymentsTable } from "../../platform/db/schema.ts";
import { ApiError } from "../../platform/http/errors.ts";
import { recordEvents } from "../webhooks/outbox.ts";
import { toPaymentView } from "./view.ts";

// The one way a payment changes status: the domain table decides, the row moves only if it is
// still where the decision started (compare-and-set), and the event is written with it.

export class TransitionRefused extends ApiError {
  constructor(status: string, trigger: PaymentTrigger) {
    super(409, `Payment is ${status}; ${trigger} does not apply`);
  }
}

export async function applyTransition(
  trx: Kysely<DatabaseSchema>,
  row: PaymentRow,
  trigger: PaymentTrigger,
  at: Date,
  changes: Omit<Updateable<PaymentsTable>, "status" | "id"> = {},
): Promise<PaymentRow> {
  const decided = transition(row.status as PaymentStatus, trigger);
  if (!decided.ok) throw new TransitionRefused(row.status, trigger);
  const updated = await trx
    .updateTable("payments")
    .set({ ...changes, status: decided.to, updated_at: at })
    .where("id", "=", row.id)
    .where("status", "=", decided.from)
    .returningAll()
    .executeTakeFirst();
  if (!updated) throw new ApiError(409, "Payment changed concurrently; retry");
  if (decided.event) await emitPaymentEvent(trx, updated, decided.event);
  return updated;
}

export async function emitPaymentEvent(
  trx: Kysely<DatabaseSchema>,
  row: PaymentRow,
  type: string,
): Promise<void> {
  await recordEvents(trx, [
    {
      workspaceId: row.workspace_id,
      environment: row.environment as Environment,
      type,
      payload: toPaymentView(row) as unknown as Record<string, unknown>,
    },
  ]);
}
