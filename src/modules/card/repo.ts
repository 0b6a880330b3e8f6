import type { Kysely } from "kysely";
import type { Environment } from "../../config.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";

// SQL of card_events: each provider event id once, with what it did (its outcome).

type Db = Kysely<DatabaseSchema>;

/** Records the event as received; false when its id was recorded before (a redelivery). */
export async function claimEvent(
  trx: Db,
  event: { id: string; environment: Environment; type: string; paymentId: string | null },
): Promise<boolean> {
  const claimed = await trx
    .insertInto("card_events")
    .values({
      event_id: event.id,
      environment: event.environment,
      event_type: event.type,
      payment_id: event.paymentId,
      outcome: "received",
    })
    .onConflict((oc) => oc.column("event_id").doNothing())
    .returning("event_id")
    .executeTakeFirst();
  return claimed !== undefined;
}

export async function recordOutcome(trx: Db, eventId: string, outcome: string): Promise<void> {
  await trx.updateTable("card_events").set({ outcome }).where("event_id", "=", eventId).execute();
}
