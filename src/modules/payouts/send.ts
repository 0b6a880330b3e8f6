import type { ChainToken } from "../../chain/network.ts";
import type { AppContext } from "../../context.ts";
import { AppError, firstLineOf, InsufficientBalance } from "../../domain/errors.ts";
import { formatAmount, TOKEN_DECIMALS } from "../../domain/money.ts";
import {
  type Move,
  type MoveHooks,
  type MoveOutcome,
  MoveRefused,
  type Prepared,
  type Submission,
} from "../../rails/rail.ts";
import { inFlightAnswer, type PayoutAnswers, type PayoutResponse } from "./answers.ts";
import type { WalletChoice } from "./decide.ts";
import type { PayoutLeases } from "./leases.ts";
import type { PayoutOutcomes, Scope } from "./outcomes.ts";
import type { PayoutPersistence, Recorded } from "./persist.ts";
import * as repo from "./repo.ts";
import * as sending from "./sending-repo.ts";

// A payout's send → finish, through its rail, which calls the persist hooks it needs (persist.ts)
// before it sends anything. Its outcome then ends it:
// completed, failed (counted by the breaker unless a refund's or return's recipient refused it),
// or 202 left to the reconciler when the chain has not told yet. Nothing is ever failed while its
// transfer may still happen.

export interface PayoutAttempt {
  scope: Scope;
  payout: repo.NewPayout;
  wallet: WalletChoice;
  move: Move;
  prepared: Promise<Prepared> | undefined;
  now: Date;
}

export class PayoutSends {
  readonly #ctx: AppContext;
  readonly #outcomes: PayoutOutcomes;
  readonly #answers: PayoutAnswers;
  readonly #leases: PayoutLeases;
  readonly #persistence: PayoutPersistence;

  constructor(
    ctx: AppContext,
    parts: {
      outcomes: PayoutOutcomes;
      answers: PayoutAnswers;
      leases: PayoutLeases;
      persistence: PayoutPersistence;
    },
  ) {
    this.#ctx = ctx;
    this.#outcomes = parts.outcomes;
    this.#answers = parts.answers;
    this.#leases = parts.leases;
    this.#persistence = parts.persistence;
  }

  /**
   * Starts the payout: `persisted` settles once its record is written (or refused), `result` with
   * its answer. The caller's turn may end at `persisted`: the next payout's checks see this one.
   */
  start(attempt: PayoutAttempt): { persisted: Promise<void>; result: Promise<PayoutResponse> } {
    const { scope, payout, wallet } = attempt;
    const recorded: Recorded = {};
    let persisted!: () => void;
    const whenPersisted = new Promise<void>((resolve) => {
      persisted = resolve;
    });
    const hooks = this.#persistence.hooks(payout, wallet.rail, recorded, persisted);
    this.#leases.hold(payout.id);
    const result = this.#send(scope, payout, hooks, recorded, attempt).finally(() => {
      persisted(); // a refusal before any record
      this.#leases.release(payout.id);
    });
    return { persisted: whenPersisted, result };
  }

  async #send(
    scope: Scope,
    payout: repo.NewPayout,
    hooks: MoveHooks,
    recorded: Recorded,
    attempt: PayoutAttempt,
  ): Promise<PayoutResponse> {
    let submission: Submission;
    try {
      submission = await attempt.wallet.rail.submit(attempt.move, hooks, attempt.prepared);
    } catch (err) {
      return this.#unsent(scope, payout, recorded, err, attempt.now);
    }
    let outcome: MoveOutcome;
    try {
      outcome = await submission.outcome;
    } catch (err) {
      // Sent, outcome unknown: the reconciler finishes it from the chain.
      this.#ctx.log.error({ err, payoutId: payout.id }, "waiting for the payout's receipt failed");
      outcome = { status: "pending", txHash: "", legs: [], error: null };
    }
    const row = recorded.row;
    if (!row) throw new Error("a payout was sent without its record");
    return this.#finish(scope, row, outcome, recorded, attempt.now);
  }

  /** The rail recorded or sent nothing, or failed on the way: why, as the answer. */
  async #unsent(
    scope: Scope,
    payout: repo.NewPayout,
    recorded: Recorded,
    err: unknown,
    now: Date,
  ): Promise<PayoutResponse> {
    const { ledger, row } = recorded;
    if (ledger?.outcome === "insufficient") {
      const decimals = TOKEN_DECIMALS[payout.tokenSymbol as ChainToken];
      throw new InsufficientBalance({
        available: formatAmount(ledger.balance < 0n ? 0n : ledger.balance, decimals),
        requested: formatAmount(payout.amount, decimals),
        tokenSymbol: payout.tokenSymbol,
      });
    }
    if (err instanceof MoveRefused) {
      // Not recorded: a concurrent request with the same idempotencyKey got there first.
      if (!row) return this.#answers.repeatOf(scope, payout.idempotencyKey);
      // The reconciler ended it while this instance was stopped: nothing was sent; its answer is
      // what the reconciler stored.
      return this.#answers.stored(scope, payout.id);
    }
    if (!row) throw err; // refused by the checks (400), or nothing could be recorded
    this.#ctx.log.error({ err, payoutId: payout.id }, "payout send failed");
    // Once its transaction or user operation is recorded it may be sent, and only the chain can
    // tell: the reconciler finishes it. Failed here only when nothing was recorded.
    const outcome: MoveOutcome = (await this.#mayBeSent(payout.id))
      ? { status: "pending", txHash: "", legs: [], error: null }
      : { status: "reverted", txHash: "", legs: [], error: firstLineOf(err) || "send failed" };
    return this.#finish(scope, row, outcome, recorded, now);
  }

  async #finish(
    scope: Scope,
    row: repo.PayoutRow,
    outcome: MoveOutcome,
    recorded: Recorded,
    now: Date,
  ): Promise<PayoutResponse> {
    if (outcome.status === "pending") return this.#inFlight(row, outcome, now);
    try {
      if (outcome.status === "reverted") {
        return await this.#outcomes.fail(
          scope,
          row,
          outcome.txHash || null,
          outcome.error ?? "transfer failed",
          outcome.cause ?? "sending",
        );
      }
      // The sandbox statement completed it (with its event) already.
      const { ledger } = recorded;
      if (ledger?.outcome === "success") {
        return await this.#outcomes.completed(
          scope,
          ledger.row,
          ledger.breaker,
          ledger.row.completed_at ?? now,
        );
      }
      return await this.#outcomes.complete(scope, row, outcome);
    } catch (err) {
      if (err instanceof AppError) throw err; // the answer of a failed payout
      // Its outcome is known but could not be stored: the reconciler stores it from the chain.
      this.#ctx.log.error({ err, payoutId: row.id }, "recording a payout's outcome failed");
      return this.#inFlight(row, outcome, now);
    }
  }

  /** 202, the payout given up to the reconciler (its outcome is not known yet). */
  async #inFlight(payout: repo.PayoutRow, outcome: MoveOutcome, now: Date): Promise<PayoutResponse> {
    this.#leases.release(payout.id);
    try {
      await sending.releaseLease(this.#ctx.db, payout.id);
    } catch (err) {
      // Its lease then runs out by itself (20 s) before the reconciler takes it.
      this.#ctx.log.error({ err, payoutId: payout.id }, "releasing a payout's lease failed");
    }
    return inFlightAnswer(payout, outcome, now);
  }

  /** Whether a payout's sender has recorded something that may be sent (or cannot tell). */
  async #mayBeSent(id: string): Promise<boolean> {
    try {
      const row = await repo.findById(this.#ctx.db, id);
      return row?.send_claimed_at !== null || row.user_operation !== null;
    } catch (err) {
      this.#ctx.log.error(
        { err, payoutId: id },
        "reading whether a payout was sent failed; left to the reconciler",
      );
      return true;
    }
  }
}
