import { sql } from "kysely";
import type { OnNetwork } from "../../../chain/network.ts";
import { splitFee } from "../../../domain/money.ts";
import { columnList } from "../../../platform/db/columns.ts";
import type { Db } from "../../../platform/db/database.ts";
import type { PaymentRow } from "../../../platform/db/schema.ts";
import { PAYMENT_COLUMNS } from "../columns.ts";
import * as unmatchedRepo from "../inbox/unmatched-repo.ts";
import type { BatchTransition } from "../transitions.ts";
import * as claims from "./claims-repo.ts";

// What a reorganisation undoes (D5, D19): detections whose transfer left the chain before it was
// confirmed, in one transaction of the chain watcher's confirmation step.

type UnmatchedRow = unmatchedRepo.UnmatchedRow;

/** A detection whose transfer left the chain, with the amount the payment asked for. */
export interface RevertedDetection {
  paymentId: string;
  txHash: string;
  logIndex: number;
  /** The payment's gross amount: its fee and net are computed on it again. */
  gross: bigint;
}

/**
 * The detecting transfers left the chain: moves the payments by `rule` (back to waiting) and
 * forgets the detections. A payment the merchant had attached an inbox transfer to (D19) also
 * forgets what that transfer carried (amountReceived; its fee and net are the gross's again), and
 * the transfer is dropped in the inbox, still claimed as the inbox's, so that once it is mined
 * again it is open again (the watcher's inbox check) rather than recorded twice. The other transfers' claims are given
 * back, so that one mined again is matched again. Same compare-and-set as confirmDetections; in
 * this order: payments, inbox items, claims. Returns the payments moved and the dropped transfers.
 */
export async function revertDetections(
  trx: Db,
  on: OnNetwork,
  detections: readonly RevertedDetection[],
  rule: BatchTransition,
  at: Date,
): Promise<{ payments: PaymentRow[]; dropped: UnmatchedRow[] }> {
  if (detections.length === 0) return { payments: [], dropped: [] };
  const amounts = detections.map((d) => splitFee(d.gross));
  const result = await sql<PaymentRow & { released_tx_hash: string; released_log_index: number }>`
    UPDATE payments p
    SET status = ${sql.lit(rule.to)},
        detected_tx_hash = NULL,
        detected_log_index = NULL,
        detected_block = NULL,
        detected_block_hash = NULL,
        payer_address = NULL,
        detected_at = NULL,
        amount_received = NULL,
        fee_amount = r.fee,
        net_amount = r.net,
        updated_at = ${at}
    FROM unnest(
      ${detections.map((d) => d.paymentId)}::uuid[],
      ${detections.map((d) => d.txHash)}::text[],
      ${detections.map((d) => d.logIndex)}::int[],
      ${amounts.map((a) => a.fee.toString())}::numeric[],
      ${amounts.map((a) => a.net.toString())}::numeric[]
    ) AS r(payment_id, tx_hash, log_index, fee, net)
    WHERE p.id = r.payment_id AND p.status = ${sql.lit(rule.from)}
      AND p.detected_tx_hash = r.tx_hash AND p.detected_log_index = r.log_index
    RETURNING ${columnList(PAYMENT_COLUMNS, "p")}, r.tx_hash AS released_tx_hash,
              r.log_index AS released_log_index
  `.execute(trx);
  const reverted = result.rows.map(({ released_tx_hash, released_log_index, ...payment }) => ({
    payment,
    place: { txHash: released_tx_hash, logIndex: released_log_index },
  }));
  const dropped = await unmatchedRepo.dropAttached(
    trx,
    reverted.map((r) => r.payment.id),
  );
  // An attached payment's detection is its transfer's first-seen place.
  const placeOf = (p: { txHash: string; logIndex: number }) => `${p.txHash}|${p.logIndex}`;
  const attached = new Set(dropped.map((u) => placeOf({ txHash: u.tx_hash, logIndex: u.log_index })));
  const places = reverted.map((r) => r.place);
  await claims.moveClaimsAt(
    trx,
    on,
    places.filter((p) => attached.has(placeOf(p))),
    "attachment_reverted",
  );
  await claims.releaseClaimsAt(
    trx,
    on,
    places.filter((p) => !attached.has(placeOf(p))),
  );
  return { payments: reverted.map((r) => r.payment), dropped };
}
