import { sql } from "kysely";
import type { Db } from "../../platform/db/database.ts";
import type { PaymentRow } from "../../platform/db/schema.ts";
import type { Metrics } from "../../platform/metrics/metrics.ts";
import { applyTransition } from "./transitions.ts";

// Pending payments past their expiry become `expired` with payment.expired. The partial index
// on (expires_at) WHERE status = 'pending' keeps each batch a range scan however many payments
// are pending; SKIP LOCKED lets several instances share the work.

const BATCH = 500;

export async function expireDuePayments(db: Db, now: Date, metrics?: Metrics): Promise<number> {
  let total = 0;
  for (;;) {
    const expired = await db.transaction().execute(async (trx) => {
      const due = await sql<PaymentRow>`
        SELECT * FROM payments
        WHERE status = 'pending' AND expires_at <= ${now}
        ORDER BY expires_at
        LIMIT ${BATCH}
        FOR UPDATE SKIP LOCKED
      `.execute(trx);
      for (const row of due.rows) await applyTransition(trx, row, "expiry_elapsed", now);
      return due.rows;
    });
    metrics?.paymentsMoved(expired, "expired");
    total += expired.length;
    if (expired.length < BATCH) return total;
  }
}
