import type { Db } from "../../platform/db/database.ts";
import type { Metrics } from "../../platform/metrics/metrics.ts";
import * as repo from "./repo.ts";
import { applyTransition, batchTransition } from "./transitions.ts";

// Pending payments past their expiry become `expired` with payment.expired. The partial index
// on (expires_at) WHERE status = 'pending' keeps each batch a range scan however many payments
// are pending; SKIP LOCKED lets several instances share the work.

const BATCH = 500;
/** The domain's expiry rule; the status it expires from is the one the partial index covers. */
const EXPIRE = batchTransition("expiry_elapsed");

export async function expireDuePayments(db: Db, now: Date, metrics?: Metrics): Promise<number> {
  let total = 0;
  for (;;) {
    const expired = await db.transaction().execute(async (trx) => {
      const due = await repo.lockExpired(trx, EXPIRE.from, now, BATCH);
      for (const row of due) await applyTransition(trx, row, "expiry_elapsed", now);
      return due;
    });
    metrics?.paymentsMoved(expired, EXPIRE.to);
    total += expired.length;
    if (expired.length < BATCH) return total;
  }
}
