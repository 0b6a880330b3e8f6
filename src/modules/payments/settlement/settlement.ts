// payments/settlement: a confirmed crypto payment's money leaving its receiving wallet. The job
// (this file) orders the payment's legs (settlement-record.ts) from the transfer engine as one
// transfer of kind `settlement`, topping the wallet up with gas first when it needs it
// (gas-top-up.ts), and records how it ended on the payment (settlement-outcomes.ts); the
// settlements API reads those records (settlements-service.ts, settlements-routes.ts).

import { randomUUID } from "node:crypto";
import type { FastifyBaseLogger } from "fastify";
import type { ChainToken, Hex, Network } from "../../../chain/network.ts";
import { NATIVE_TOKEN } from "../../../domain/money.ts";
import { COMPLETED_PAYOUT, OPEN_PAYOUT } from "../../../domain/payout-state.ts";
import type { Db } from "../../../platform/db/database.ts";
import { type Fence, FenceRefused } from "../../../platform/db/fences.ts";
import type { PaymentRow } from "../../../platform/db/schema.ts";
import { LEASE_FENCE } from "../../../platform/jobs/periodic-job.ts";
import type { Metrics } from "../../../platform/metrics/metrics.ts";
import type { Leg, MoveOutcome, Rail, RecordedOperation } from "../../../rails/rail.ts";
import type { TransferRow } from "../../transfers/repo.ts";
import type { TransfersService } from "../../transfers/service.ts";
import type { TopUpResult } from "./gas-top-up.ts";
import { NO_GAS, onRefusal, retriesShort } from "./refusals.ts";
import { SETTLES, type SettledLegs, SettlementOutcomes } from "./settlement-outcomes.ts";
import { MERCHANT_LEG, settlementLegs } from "./settlement-record.ts";
import * as settlementRepo from "./settlement-repo.ts";

// Settles confirmed payments from the receiving wallet. A settlement is one order to the transfer
// engine (kind `settlement`, many legs: the merchant's part of the net, the fee to the treasury,
// each split of the payment's snapshot), which checks the wallet's funds, records the transfer
// before anything is sent, sends it on the wallet's rail and finishes it, after a crash too (its
// reconciler). The engine answers with the transfer; this job records its ending on the payment:
// `forwarded` only once every leg is mined with a success receipt (D13), otherwise `failed` with
// the reason. The order is fenced (platform/db/fences.ts), in the transaction that records the
// transfer: this worker must still hold its job's lease, and the payment, still confirmed with
// nothing recorded for it, names the transfer (settlement-repo.ts claimFence); a payment has one
// settlement transfer that has not failed at most, in the schema (one that failed with nothing
// sent gives the payment back, to be settled again: kind.ts). So a worker paused past its lease,
// or two workers at once, can never settle one twice. A settlement recorded before migration 030
// (its legs under the payment) is finished from what its rail recorded, never sent again.

const SETTLE_PER_TICK = 50;

/** What the job asks of the transfer engine. */
type Transfers = Pick<TransfersService, "run" | "byId" | "legsOf">;

export interface SettlementOptions {
  /** Funds a receiving wallet with gas on demand (gas-top-up.ts). */
  topUp?: (address: Hex, neededWei: bigint) => Promise<TopUpResult>;
  /** The job's lease (PeriodicJob.leaseFence): refuses a record once this worker may no longer send. */
  lease?: Fence;
  metrics?: Metrics;
}

export class Settlement {
  readonly #db: Db;
  readonly #network: Network;
  /** The environment's rails, by the kind of receiving wallet: their gas, and settlements recorded before 030. */
  readonly #rails: { eoa: Rail; smart_wallet?: Rail | undefined };
  readonly #transfers: Transfers;
  readonly #log: FastifyBaseLogger;
  readonly #topUp: (address: Hex, neededWei: bigint) => Promise<TopUpResult>;
  readonly #lease: Fence[];
  readonly #outcomes: SettlementOutcomes;

  constructor(
    db: Db,
    network: Network,
    rails: { eoa: Rail; smart_wallet?: Rail | undefined },
    transfers: Transfers,
    log: FastifyBaseLogger,
    now: () => Date,
    options: SettlementOptions = {},
  ) {
    this.#lease = options.lease ? [options.lease] : [];
    this.#topUp = options.topUp ?? (async () => "unavailable");
    this.#db = db;
    this.#network = network;
    this.#rails = rails;
    this.#transfers = transfers;
    this.#log = log;
    this.#outcomes = new SettlementOutcomes(db, network, log, now, options.metrics);
  }

  /** Settles the confirmed payments; run after the engine's reconcile (the chain job's order). */
  async tick(): Promise<void> {
    const confirmed = await settlementRepo.due(this.#db, this.#network, SETTLES.from, SETTLE_PER_TICK);
    // Every payment at once: the engine paces a wallet's settlements (transfers/run.ts).
    await Promise.all(
      confirmed.map((payment) =>
        this.#settle(payment).catch((err: unknown) => {
          if (err instanceof FenceRefused && err.fence === LEASE_FENCE) {
            // Paused past the lease (a top-up refused): another instance settles from now on.
            this.#log.warn(
              { paymentId: payment.id, reason: err.message },
              "settlement left to the new leader",
            );
          } else {
            this.#log.error({ err, paymentId: payment.id }, "settlement attempt failed; retried next tick");
          }
        }),
      ),
    );
  }

  async #settle(payment: settlementRepo.DuePayment): Promise<void> {
    if (payment.settlement_transfer_id) return this.#finish(payment, payment.settlement_transfer_id);
    const rail = this.#railOf(payment);
    if (!rail)
      return this.#failUnsent(payment, "smart wallets are not configured on this network (no bundler)");
    const legs = settlementLegs(payment, this.#network.treasuryAddress);
    // Recorded before migration 030: finished from the rail's records, never sent again (a
    // recorded operation is sent again: a no-op once included, reverted if it never can be).
    const operation = operationOf(payment, legs);
    if (payment.legs_recorded || operation) {
      const recorded = await rail.recorded({ paymentId: payment.id }, operation);
      if (recorded.state === "open") return; // the rail's reconcile, or the next tick, finishes it
      if (recorded.state === "ended") return this.#ended(payment, recorded.outcome);
    }
    if (legs.length === 0) return this.#outcomes.forward(payment, []); // every part rounds to 0
    return this.#order(payment, legs, rail);
  }

  /**
   * The settlement as an order to the engine; its ending, once it has one, on the payment. A
   * wallet the engine finds short of gas is topped up first (`topUp`: once more at most).
   */
  async #order(payment: PaymentRow, legs: Leg[], rail: Rail, topUp = true): Promise<void> {
    const id = randomUUID();
    const outcome = await this.#transfers.run({
      id,
      kind: "settlement",
      scope: { workspaceId: payment.workspace_id, environment: this.#network.environment },
      tokenSymbol: payment.token_symbol,
      // What the wallet received for it: the gross, or what an attached transfer paid (D19).
      amount: BigInt(payment.amount_received ?? payment.gross_amount),
      destinationAddress: (legs.find((leg) => leg.purpose === MERCHANT_LEG) ?? legs[0])?.to ?? "",
      walletType: payment.wallet_type === "smart_wallet" ? "smart_wallet" : "eoa",
      network: this.#network.id,
      paymentId: payment.id,
      legs: { from: payment.receiving_address ?? "", legs },
      fences: [...this.#lease, settlementRepo.claimFence(this.#db, payment.id, SETTLES.from, id)],
    });
    switch (outcome.status) {
      case "completed":
        return this.#concluded(payment, outcome.transfer, outcome.legs);
      case "failed":
        return this.#concluded(payment, outcome.transfer);
      case "pending":
        return; // the engine ends it (its sender, or its reconciler); a later tick records it here
      case "refused": {
        const refusal = onRefusal(outcome.reason, topUp);
        if (refusal.step === "short") return this.#short(payment, rail, refusal.reason);
        if (refusal.step === "wait") {
          this.#log.warn(
            { paymentId: payment.id, network: this.#network.id },
            "settlement waits for its network",
          );
          return;
        }
        if (refusal.step === "top_up")
          return this.#toppedUp(payment, rail, refusal.shortWei, () =>
            this.#order(payment, legs, rail, false),
          );
        return this.#failUnsent(payment, refusal.reason);
      }
      case "fenced":
        // Another worker recorded it (and sends it), or this one lost its lease: nothing was sent.
        this.#log.warn({ paymentId: payment.id, fence: outcome.fence }, "settlement not sent");
        return;
      case "duplicate":
        throw new Error(`settlement ${id} was answered as a repeat of key ${outcome.idempotencyKey}`);
    }
  }

  /**
   * Tops the receiving wallet up by `shortWei` (gas-top-up.ts), then `again`; while the top-up is
   * on its way, the next tick orders again; with no gas to be had, the settlement fails.
   */
  async #toppedUp(
    payment: PaymentRow,
    rail: Rail,
    shortWei: bigint,
    again: () => Promise<void>,
  ): Promise<void> {
    const from = payment.receiving_address as Hex;
    const needed = (await rail.balance(from, NATIVE_TOKEN)) + shortWei;
    const topUp = await this.#topUp(from, needed);
    if (topUp === "funded") return again();
    if (topUp === "pending") {
      this.#log.warn({ paymentId: payment.id }, "settlement waits for its wallet's gas top-up to be mined");
      return;
    }
    return this.#failUnsent(payment, NO_GAS);
  }

  /** The engine found the wallet short of the settlement's money: again next tick, or failed (refusals.ts). */
  async #short(payment: PaymentRow, rail: Rail, reason: string): Promise<void> {
    const held = await rail.balance(payment.receiving_address as Hex, payment.token_symbol as ChainToken);
    if (!retriesShort(held, BigInt(payment.amount_received ?? payment.gross_amount)))
      return this.#failUnsent(payment, reason);
    this.#log.warn({ paymentId: payment.id, reason }, "settlement retried next tick");
  }

  /** The rail of the payment's receiving wallet, if this network has one. */
  #railOf(payment: PaymentRow): Rail | undefined {
    return this.#rails[payment.wallet_type === "smart_wallet" ? "smart_wallet" : "eoa"];
  }

  async #finish(payment: PaymentRow, transferId: string): Promise<void> {
    const transfer = await this.#transfers.byId(transferId);
    if (!transfer)
      throw new Error(`payment ${payment.id} names settlement transfer ${transferId}, not recorded`);
    return this.#concluded(payment, transfer);
  }

  /**
   * A settlement transfer's ending, recorded on its payment (nothing while it is on its way), with
   * each leg's transaction: as its rail answered them (`answered`), else from what it recorded.
   */
  async #concluded(payment: PaymentRow, transfer: TransferRow, answered?: SettledLegs): Promise<void> {
    if (transfer.status === OPEN_PAYOUT) return;
    const purposes = settlementLegs(payment, this.#network.treasuryAddress).map((leg) => leg.purpose);
    const legs = answered ?? (await this.#transfers.legsOf(transfer, purposes));
    const by = { transferId: transfer.id, userOpHash: transfer.user_op_hash };
    if (transfer.status === COMPLETED_PAYOUT) return this.#outcomes.forward(payment, legs, by);
    // One that failed with nothing sent gave its payment back (kind.ts): fail() then changes nothing.
    const error = transfer.error ?? "settlement failed";
    const outcome = { txHash: transfer.tx_hash ?? "", legs };
    return this.#outcomes.fail(payment, reasonOf(payment, transfer.tx_hash, error), outcome, by);
  }

  /** A settlement recorded before migration 030, ended: its outcome on the payment. */
  async #ended(payment: PaymentRow, outcome: MoveOutcome): Promise<void> {
    if (outcome.status === "success") return this.#outcomes.forward(payment, outcome.legs);
    return this.#outcomes.fail(
      payment,
      reasonOf(payment, outcome.txHash, outcome.error ?? "reverted"),
      outcome,
    );
  }

  #failUnsent(payment: PaymentRow, reason: string): Promise<void> {
    const fences = [...this.#lease, settlementRepo.dueFence(this.#db, payment.id, SETTLES.from)];
    return this.#outcomes.failUnsent(payment, reason, fences);
  }
}

/** Why a settlement failed: an EOA leg's transaction is named; a user operation's error says which call. */
function reasonOf(payment: PaymentRow, txHash: string | null, error: string): string {
  if (payment.wallet_type === "smart_wallet" || !txHash) return error;
  return `settlement transaction ${txHash} failed: ${error}`;
}

/** The user operation recorded on the payment before migration 030, if one is, with its legs' purposes. */
function operationOf(payment: PaymentRow, legs: readonly Leg[]): RecordedOperation | null {
  if (!payment.settlement_user_operation || !payment.settlement_user_op_hash) return null;
  return {
    userOpHash: payment.settlement_user_op_hash as Hex,
    serialized: payment.settlement_user_operation,
    purposes: legs.map((leg) => leg.purpose),
  };
}
