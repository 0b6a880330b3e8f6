// payments/settlement: a confirmed crypto payment's money leaving its receiving wallet. The job
// (this file) sends the payment's legs (settlement-record.ts), topping the wallet up with gas first
// when it needs it (gas-top-up.ts), and records the outcome on the payment (settlement-repo.ts);
// the settlements API reads those records (settlements-service.ts, settlements-routes.ts).

import type { FastifyBaseLogger } from "fastify";
import type { ChainToken, Hex, Network } from "../../../chain/network.ts";
import { NATIVE_TOKEN } from "../../../domain/money.ts";
import { stillToSettle } from "../../../domain/unsettled-payments.ts";
import type { Db } from "../../../platform/db/database.ts";
import { type Fence, FenceRefused, runFences } from "../../../platform/db/fences.ts";
import type { PaymentRow } from "../../../platform/db/schema.ts";
import { LEASE_FENCE } from "../../../platform/jobs/periodic-job.ts";
import type { Metrics } from "../../../platform/metrics/metrics.ts";
import {
  type Move,
  type MoveOutcome,
  MoveRefused,
  type Rail,
  type RecordedOperation,
} from "../../../rails/rail.ts";
import { recordEvents } from "../../webhooks/outbox.ts";
import type { WorkspacesService } from "../../workspaces/service.ts";
import * as chainRepo from "../incoming/chain-repo.ts";
import { applyTransition, batchTransition } from "../transitions.ts";
import type { TopUpResult } from "./gas-top-up.ts";
import {
  FEE_LEG,
  type LegOutcomes,
  MERCHANT_LEG,
  settlementColumns,
  settlementEvents,
  settlementLegs,
} from "./settlement-record.ts";
import * as settlementRepo from "./settlement-repo.ts";

// Settles confirmed payments from the receiving wallet as one move on the wallet's rail: its legs
// (the merchant's part of the net, the fee to the treasury, each split of the payment's snapshot:
// settlement-record.ts) are data, recorded before they are sent (an EOA's transactions, or a
// smart account's one user operation carrying every leg). The settlement is recorded on the
// payment with its forwarded or failed transition, with its settlement.recorded and
// split.recorded events, in one transaction. `forwarded` only once every leg is
// mined with a success receipt (D13); a failure is `failed` with the reason. A payment whose
// legs were already recorded (a restart mid-settlement) is finished from what the rail says of
// them (Rail.recorded: a recorded operation is sent again), never sent again as a new move.
// Recording is fenced (platform/db/fences.ts): this worker must still hold its job's lease, and
// the payment, locked, must still be confirmed with nothing recorded for it (settlement-repo.ts
// dueFence), both checked in the transaction that records the transfers; and a payment's legs are
// unique in the schema. So a worker that was paused past its lease, or two workers at once, can
// never settle one twice.

const SETTLE_PER_TICK = 50;
/** The status a payment settles from (the transition table's, for both of settlement's outcomes). */
const SETTLES = batchTransition("settlement_completed");

export interface SettlementOptions {
  /** Funds a receiving wallet with gas on demand (gas-top-up.ts). */
  topUp?: (address: Hex, neededWei: bigint) => Promise<TopUpResult>;
  /** The job's lease (PeriodicJob.leaseFence): refuses a record once this worker may no longer send. */
  lease?: Fence;
  metrics?: Metrics;
}

const TOP_UP_PENDING = Symbol("gas top-up pending");

export class Settlement {
  readonly #db: Db;
  readonly #network: Network;
  /** The environment's rails, by the kind of receiving wallet. */
  readonly #rails: { eoa: Rail; smart_wallet?: Rail | undefined };
  readonly #workspaces: WorkspacesService;
  readonly #log: FastifyBaseLogger;
  readonly #now: () => Date;
  readonly #topUp: (address: Hex, neededWei: bigint) => Promise<TopUpResult>;
  readonly #lease: Fence[];
  readonly #metrics: Metrics | undefined;

  constructor(
    db: Db,
    network: Network,
    rails: { eoa: Rail; smart_wallet?: Rail | undefined },
    workspaces: WorkspacesService,
    log: FastifyBaseLogger,
    now: () => Date,
    options: SettlementOptions = {},
  ) {
    this.#lease = options.lease ? [options.lease] : [];
    this.#topUp = options.topUp ?? (async () => "unavailable");
    this.#metrics = options.metrics;
    this.#db = db;
    this.#network = network;
    this.#rails = rails;
    this.#workspaces = workspaces;
    this.#log = log;
    this.#now = now;
  }

  async tick(): Promise<void> {
    await this.#rails.eoa.reconcile();
    const confirmed = await chainRepo.paymentsInStatus(
      this.#db,
      this.#network.environment,
      SETTLES.from,
      SETTLE_PER_TICK,
    );
    // Different wallets settle in parallel; one wallet's settlements queue on its rail.
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

  async #settle(payment: PaymentRow): Promise<void> {
    const rail = this.#rails[payment.wallet_type === "smart_wallet" ? "smart_wallet" : "eoa"];
    if (!rail)
      return this.#failUnsent(payment, "smart wallets are not configured on this network (no bundler)");
    const move = await this.#move(payment);
    // Recorded before a restart: finished from the rail's records, never sent as a new move (a
    // second would be a second settlement); a recorded operation is sent again (a no-op once
    // included, reverted if it never can be).
    const recorded = await rail.recorded({ paymentId: payment.id }, operationOf(payment, move));
    if (recorded.state === "open") return; // the rail's reconcile, or the next tick, finishes it
    let outcome: MoveOutcome;
    if (recorded.state === "ended") {
      outcome = recorded.outcome;
    } else {
      if (move.legs.length === 0) return this.#forward(payment, []); // every part rounds to 0
      const unfunded = await this.#unfunded(payment, rail, move);
      if (unfunded === TOP_UP_PENDING) {
        this.#log.warn({ paymentId: payment.id }, "settlement waits for its wallet's gas top-up to be mined");
        return;
      }
      if (unfunded) return this.#failUnsent(payment, unfunded);
      const submitted = await this.#submit(payment, rail, move);
      if (!submitted) return;
      outcome = submitted;
    }
    if (outcome.status === "pending") {
      // The next tick finishes it; one that failed on the way says why (it is tried again).
      if (outcome.error)
        this.#log.warn({ paymentId: payment.id, reason: outcome.error }, "settlement retried next tick");
      return;
    }
    if (outcome.unsent) return this.#failUnsent(payment, outcome.error ?? "not sent");
    if (outcome.status === "reverted") {
      // A user operation's error says which call failed; an EOA leg's is its transaction's.
      const reason =
        payment.wallet_type === "smart_wallet"
          ? (outcome.error ?? "reverted")
          : `settlement transaction ${outcome.txHash} failed: ${outcome.error ?? "reverted"}`;
      return this.#fail(payment, reason, outcome);
    }
    return this.#forward(payment, outcome.legs);
  }

  /** The settlement as a move: its legs as data (settlement-record.ts). */
  async #move(payment: PaymentRow): Promise<Move> {
    const from = payment.receiving_address as Hex;
    const legs = settlementLegs(payment, this.#network.treasuryAddress);
    // A smart wallet's operations are signed by its owner, the workspace EOA.
    const signer =
      payment.wallet_type === "smart_wallet"
        ? async () => (await this.#workspaces.profile(payment.workspace_id)).eoaAddress as Hex
        : async () => from;
    return {
      from,
      signingKey: async () => this.#workspaces.signingKey(payment.workspace_id, await signer()),
      legs,
      paymentId: payment.id,
      background: true,
    };
  }

  /**
   * Why the receiving wallet cannot pay the settlement (after topping its gas up), if it cannot;
   * TOP_UP_PENDING while its top-up is sent and not mined yet (the next tick looks again).
   */
  async #unfunded(
    payment: PaymentRow,
    rail: Rail,
    move: Move,
  ): Promise<string | typeof TOP_UP_PENDING | undefined> {
    const token = payment.token_symbol as ChainToken;
    // What the wallet received for it: the gross, or what an attached transfer paid (D19).
    const gross = BigInt(payment.amount_received ?? payment.gross_amount);
    const gasPerTransfer = rail.gasRequired(token);
    const [tokenBalance, ethBalance, gas, othersEth] = await Promise.all([
      rail.balance(move.from, token),
      gasPerTransfer ? rail.balance(move.from, NATIVE_TOKEN) : undefined,
      gasPerTransfer,
      gasPerTransfer ? this.#ethOfOthers(payment) : 0n,
    ]);
    const where = payment.wallet_type === "smart_wallet" ? "the smart wallet" : "the receiving wallet";
    if (tokenBalance < gross) return `insufficient ${token} balance in ${where}`;
    if (gas === undefined || ethBalance === undefined) return undefined; // sponsored
    // ETH the wallet received for other payments it has not settled yet is theirs: this
    // settlement's gas never comes out of it (or their settlement would find it short), so
    // without enough ETH besides it, the wallet is topped up.
    const ethNeeded = gas * BigInt(move.legs.length) + (token === NATIVE_TOKEN ? gross : 0n) + othersEth;
    if (ethBalance >= ethNeeded) return undefined;
    const topUp = await this.#topUp(move.from, ethNeeded);
    if (topUp === "pending") return TOP_UP_PENDING;
    return topUp === "funded" ? undefined : "insufficient ETH for gas in the receiving wallet";
  }

  /** ETH received on the payment's wallet for other payments whose settlement is not recorded. */
  async #ethOfOthers(payment: PaymentRow): Promise<bigint> {
    const unsettled = await chainRepo.unsettledOn(
      this.#db,
      this.#network.environment,
      payment.receiving_address ?? "",
    );
    const others = unsettled.filter((other) => other.id !== payment.id);
    return stillToSettle(others).get(NATIVE_TOKEN)?.amount ?? 0n;
  }

  /** The fences of a settlement's record: the job's lease, and the payment still due. */
  #fences(paymentId: string): Fence[] {
    return [...this.#lease, settlementRepo.dueFence(this.#db, paymentId, SETTLES.from)];
  }

  /**
   * Records and sends the settlement under its fences (the lease, the payment still confirmed
   * with nothing recorded); undefined when nothing was sent (another worker settles it).
   */
  async #submit(payment: PaymentRow, rail: Rail, move: Move): Promise<MoveOutcome | undefined> {
    try {
      const submission = await rail.submit(move, {
        fences: this.#fences(payment.id),
        // Recorded only if no operation is recorded yet, by a worker that still holds the lease:
        // a second worker's operation would be a second settlement (another nonce key).
        recordOperation: (userOpHash, operation) =>
          this.#db.transaction().execute(async (trx) => {
            await runFences(trx, this.#lease);
            return settlementRepo.recordSettlementOperation(
              trx,
              payment.id,
              SETTLES.from,
              userOpHash,
              operation,
            );
          }),
      });
      return await submission.outcome;
    } catch (err) {
      // Nothing recorded means nothing was sent; recorded transfers are reconciled next tick.
      if (err instanceof MoveRefused) return undefined; // another worker recorded one, and sends it
      if (err instanceof FenceRefused) {
        this.#log.warn({ paymentId: payment.id, reason: err.message }, "settlement not sent");
      } else {
        this.#log.error({ err, paymentId: payment.id }, "settlement send failed");
      }
      return undefined;
    }
  }

  async #forward(payment: PaymentRow, txs: MoveOutcome["legs"]): Promise<void> {
    const legs: LegOutcomes = new Map(txs.map((t) => [t.purpose, { txHash: t.txHash, sent: true }]));
    const now = this.#now();
    const moved = await this.#db.transaction().execute(async (trx) => {
      const current = await settlementRepo.lockPayment(trx, payment.id);
      if (current?.status !== SETTLES.from) return [];
      const forwarded = await applyTransition(trx, current, "settlement_completed", now, {
        settlement_net_tx_hash: legs.get(MERCHANT_LEG)?.txHash ?? null,
        settlement_fee_tx_hash: legs.get(FEE_LEG)?.txHash ?? null,
        forwarded_at: now,
        ...settlementColumns(current, legs, now),
      });
      await recordEvents(trx, settlementEvents(forwarded));
      return [forwarded];
    });
    this.#metrics?.paymentsMoved(moved, "forwarded");
  }

  /**
   * Fails a settlement on what the chain or the bundler said of its recorded transfers: a leg
   * mined with a success receipt is reported sent, every other one failed (a smart account's
   * legs all share the transaction that carried its reverted operation).
   */
  async #fail(
    payment: PaymentRow,
    reason: string,
    outcome: Pick<MoveOutcome, "txHash" | "legs">,
  ): Promise<void> {
    this.#log.warn({ paymentId: payment.id, reason }, "settlement failed");
    const now = this.#now();
    const moved = await this.#db.transaction().execute(async (trx) => {
      const current = await settlementRepo.lockPayment(trx, payment.id);
      if (current?.status !== SETTLES.from) return [];
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

  /**
   * Fails a settlement before anything was sent (a check on the wallet, the bundler's refusal to
   * prepare it), under the fences of a record: a worker that lost its lease, or that another
   * worker overtook (it recorded the transfers or the operation meanwhile, and sends them),
   * changes nothing.
   */
  async #failUnsent(payment: PaymentRow, reason: string): Promise<void> {
    try {
      const failed = await this.#db.transaction().execute(async (trx) => {
        await runFences(trx, this.#fences(payment.id));
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
}

/** The user operation recorded for the payment's settlement, if one is, with its legs' purposes. */
function operationOf(payment: PaymentRow, move: Move): RecordedOperation | null {
  if (!payment.settlement_user_operation || !payment.settlement_user_op_hash) return null;
  return {
    userOpHash: payment.settlement_user_op_hash as Hex,
    serialized: payment.settlement_user_operation,
    purposes: move.legs.map((leg) => leg.purpose),
  };
}
