import type { ChainToken } from "../../chain/network.ts";
import type { AppContext } from "../../context.ts";
import { AppError, firstLineOf, InsufficientBalance, InternalError } from "../../domain/errors.ts";
import { formatAmount, TOKEN_DECIMALS } from "../../domain/money.ts";
import type { SessionTurns } from "../../platform/db/wallet-lock.ts";
import {
  type Move,
  type MoveHooks,
  type MoveOutcome,
  MoveRefused,
  type Prepared,
  type Submission,
} from "../../rails/rail.ts";
import type { PaymentsService } from "../payments/service.ts";
import type { WalletChoice } from "./decide.ts";
import { recordIfFunded } from "./funds.ts";
import type { PayoutLeases } from "./leases.ts";
import type { PayoutOutcomes, PayoutResponse, Scope } from "./outcomes.ts";
import * as repo from "./repo.ts";
import type { SandboxPayoutRecords } from "./sandbox-payouts.ts";
import * as sending from "./sending-repo.ts";
import { toPayoutView } from "./view.ts";

// A payout's persist → send → finish, through its rail. The rail calls the hooks it needs: a live
// payout is recorded (processing, leased) once its wallet's funds allow it, its transaction or
// user operation recorded under the fence that it is still processing, then sent; a sandbox payout
// is recorded with its ledger transfer (and completed) in one statement. Its outcome then ends it:
// completed, failed (counted by the breaker), or 202 left to the reconciler when the chain has not
// told yet. Nothing is ever failed while its transfer may still happen.

export interface PayoutAttempt {
  scope: Scope;
  payout: repo.NewPayout;
  wallet: WalletChoice;
  move: Move;
  prepared: Promise<Prepared> | undefined;
  now: Date;
}

/** What the hooks found, for the answer. */
interface Recorded {
  row?: repo.PayoutRow;
  ledger?: repo.SandboxPayoutResult;
}

export class PayoutSends {
  readonly #ctx: AppContext;
  readonly #outcomes: PayoutOutcomes;
  readonly #leases: PayoutLeases;
  readonly #sandbox: SandboxPayoutRecords;
  readonly #fundsTurns: SessionTurns;
  readonly #payments: Pick<PaymentsService, "unsettledOn">;

  constructor(
    ctx: AppContext,
    parts: {
      outcomes: PayoutOutcomes;
      leases: PayoutLeases;
      sandbox: SandboxPayoutRecords;
      fundsTurns: SessionTurns;
      payments: Pick<PaymentsService, "unsettledOn">;
    },
  ) {
    this.#ctx = ctx;
    this.#outcomes = parts.outcomes;
    this.#leases = parts.leases;
    this.#sandbox = parts.sandbox;
    this.#fundsTurns = parts.fundsTurns;
    this.#payments = parts.payments;
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
    const hooks: MoveHooks = {
      persist: async () => {
        try {
          const rail = wallet.rail;
          recorded.row = await recordIfFunded(this.#ctx, this.#fundsTurns, this.#payments, rail, payout);
          return recorded.row !== undefined;
        } finally {
          persisted();
        }
      },
      claim: sending.claimForSending(payout.id),
      recordOperation: (userOpHash, operation) =>
        sending.recordUserOperation(this.#ctx.db, payout.id, userOpHash, operation),
      recordWithTransfers: async (contribution) => {
        try {
          recorded.ledger = await this.#sandbox.record(payout, contribution);
        } finally {
          persisted();
        }
        const { ledger } = recorded;
        if (ledger.outcome !== "success" && ledger.outcome !== "failure_address")
          return { outcome: "refused" };
        recorded.row = ledger.row;
        return { outcome: ledger.outcome };
      },
    };
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
      if (!row) return this.#duplicate(scope, payout);
      // The reconciler ended it while this instance was stopped: nothing was sent; its answer is
      // what the reconciler stored.
      return this.#outcomes.stored(scope, payout.id);
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
      return await this.#outcomes.complete(scope, row, outcome.txHash);
    } catch (err) {
      if (err instanceof AppError) throw err; // the answer of a failed payout
      // Its outcome is known but could not be stored: the reconciler stores it from the chain.
      this.#ctx.log.error({ err, payoutId: row.id }, "recording a payout's outcome failed");
      return this.#inFlight(row, outcome, now);
    }
  }

  async #duplicate(scope: Scope, payout: repo.NewPayout): Promise<PayoutResponse> {
    const existing = await repo.findByIdempotencyKey(this.#ctx.db, scope, payout.idempotencyKey ?? "");
    if (!existing) throw new InternalError("Payout failed");
    return this.#outcomes.duplicate(existing);
  }

  /** The answer of a payout whose outcome the reconciler is left to finish (202), given up to it. */
  async #inFlight(payout: repo.PayoutRow, outcome: MoveOutcome, now: Date): Promise<PayoutResponse> {
    this.#leases.release(payout.id);
    try {
      await sending.releaseLease(this.#ctx.db, payout.id);
    } catch (err) {
      // Its lease then runs out by itself (20 s) before the reconciler takes it.
      this.#ctx.log.error({ err, payoutId: payout.id }, "releasing a payout's lease failed");
    }
    return {
      status: 202,
      body: {
        payout: {
          ...toPayoutView(payout),
          txHash: outcome.txHash || null,
          ...(outcome.userOpHash ? { userOpHash: outcome.userOpHash } : {}),
        },
        timestamp: now.toISOString(),
      },
    };
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
