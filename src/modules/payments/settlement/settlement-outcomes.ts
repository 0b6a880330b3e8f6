import type { FastifyBaseLogger } from "fastify";
import type { Network } from "../../../chain/network.ts";
import type { Db } from "../../../platform/db/database.ts";
import { type Fence, FenceRefused, runFences } from "../../../platform/db/fences.ts";
import type { PaymentRow } from "../../../platform/db/schema.ts";
import type { Metrics } from "../../../platform/metrics/metrics.ts";
import type { MoveOutcome } from "../../../rails/rail.ts";
import { recordEvents } from "../../webhooks/outbox.ts";
import { applyTransition, batchTransition } from "../transitions.ts";
import {
  FEE_LEG,
  type LegOutcomes,
  MERCHANT_LEG,
  settlementColumns,
  settlementEvents,
  settlementLegs,
} from "./settlement-record.ts";
import * as settlementRepo from "./settlement-repo.ts";

// How a settlement ended, recorded on its payment: forwarded or failed (the payment's transition
// table decides), with its settlement record and its events (settlement.recorded, split.recorded,
// payment.forwarded or payment.failed), in one transaction. Each is a compare-and-set on the
// payment still being confirmed and naming the transfer that ended: whoever records an ending
// second changes nothing.

/** The status a payment settles from (the transition table's, for both of settlement's outcomes). */
export const SETTLES = batchTransition("settlement_completed");

/** What each leg of a settlement came to: its transaction, and whether it was mined with success. */
export type SettledLegs = MoveOutcome["legs"];

/**
 * What carried a settlement: its transfer (null for one recorded before migration 030, or with no
 * leg to send) and the user operation that carried its legs. An ending is recorded only while the
 * payment still names that transfer: one given back (kind.ts) is settled again, not ended.
 */
export interface Carrier {
  transferId: string | null;
  userOpHash?: string | null;
}

const NO_TRANSFER: Carrier = { transferId: null };

/** Whether `current` is still confirmed, settled by `by`. */
function stillSettledBy(current: PaymentRow | undefined, by: Carrier): current is PaymentRow {
  return current?.status === SETTLES.from && current.settlement_transfer_id === by.transferId;
}

export class SettlementOutcomes {
  readonly #db: Db;
  readonly #network: Network;
  readonly #log: FastifyBaseLogger;
  readonly #now: () => Date;
  readonly #metrics: Metrics | undefined;

  constructor(db: Db, network: Network, log: FastifyBaseLogger, now: () => Date, metrics?: Metrics) {
    this.#db = db;
    this.#network = network;
    this.#log = log;
    this.#now = now;
    this.#metrics = metrics;
  }

  /** Forwarded: every leg mined with success, carried `by` its transfer. */
  async forward(payment: PaymentRow, txs: SettledLegs, by: Carrier = NO_TRANSFER): Promise<void> {
    const { userOpHash } = by;
    const legs: LegOutcomes = new Map(txs.map((t) => [t.purpose, { txHash: t.txHash, sent: true }]));
    const now = this.#now();
    const moved = await this.#db.transaction().execute(async (trx) => {
      const current = await settlementRepo.lockPayment(trx, payment.id);
      if (!stillSettledBy(current, by)) return [];
      const forwarded = await applyTransition(trx, current, "settlement_completed", now, {
        settlement_net_tx_hash: legs.get(MERCHANT_LEG)?.txHash ?? null,
        settlement_fee_tx_hash: legs.get(FEE_LEG)?.txHash ?? null,
        forwarded_at: now,
        ...(userOpHash ? { settlement_user_op_hash: userOpHash } : {}),
        ...settlementColumns(current, legs, now),
      });
      await recordEvents(trx, settlementEvents(forwarded));
      return [forwarded];
    });
    this.#metrics?.paymentsMoved(moved, "forwarded");
  }

  /**
   * Failed on what the chain or the bundler said of its recorded transfers: a leg mined with a
   * success receipt is reported sent, every other one failed (a smart account's legs all share
   * the transaction that carried its reverted operation; `txHash` names it where no leg does).
   */
  async fail(
    payment: PaymentRow,
    reason: string,
    outcome: { txHash: string; legs: SettledLegs },
    by: Carrier = NO_TRANSFER,
  ): Promise<void> {
    this.#log.warn({ paymentId: payment.id, reason }, "settlement failed");
    const now = this.#now();
    const moved = await this.#db.transaction().execute(async (trx) => {
      const current = await settlementRepo.lockPayment(trx, payment.id);
      if (!stillSettledBy(current, by)) return [];
      // A rail with no transaction to name gives "" (an operation the bundler refused).
      const legs: LegOutcomes = new Map<string, { txHash: string | null; sent: boolean }>(
        outcome.legs.length > 0
          ? outcome.legs.map((leg) => [leg.purpose, { txHash: leg.txHash || null, sent: leg.mined }])
          : settlementLegs(current, this.#network.treasuryAddress).map((leg) => [
              leg.purpose,
              { txHash: outcome.txHash || null, sent: false },
            ]),
      );
      return [await this.#failed(trx, current, reason, legs, now)];
    });
    this.#metrics?.paymentsMoved(moved, "failed");
  }

  /**
   * Failed before anything was sent (a check on the wallet, no rail for it), under `fences`
   * (the job's lease, the payment still due: settlement-repo.ts): a worker that lost its lease,
   * or that another worker overtook (it recorded the settlement meanwhile), changes nothing.
   */
  async failUnsent(payment: PaymentRow, reason: string, fences: readonly Fence[]): Promise<void> {
    try {
      const failed = await this.#db.transaction().execute(async (trx) => {
        await runFences(trx, fences);
        const current = await settlementRepo.lockPayment(trx, payment.id);
        if (!current) throw new Error(`payment ${payment.id} is gone`);
        return this.#failed(trx, current, reason, new Map(), this.#now());
      });
      this.#metrics?.paymentsMoved([failed], "failed");
      this.#log.warn({ paymentId: payment.id, reason }, "settlement failed");
    } catch (err) {
      if (!(err instanceof FenceRefused)) throw err;
      this.#log.warn({ paymentId: payment.id, reason, overtaken: err.message }, "settlement not failed");
    }
  }

  /** The failed transition with its settlement record and events. */
  async #failed(
    trx: Db,
    current: PaymentRow,
    reason: string,
    legs: LegOutcomes,
    now: Date,
  ): Promise<PaymentRow> {
    const failed = await applyTransition(trx, current, "settlement_failed", now, {
      failure_reason: reason,
      ...settlementColumns(current, legs, now),
    });
    await recordEvents(trx, settlementEvents(failed));
    return failed;
  }
}
