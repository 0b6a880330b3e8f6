import type { ChainToken } from "../../chain/network.ts";
import type { AppContext } from "../../context.ts";
import { firstLineOf, InsufficientBalance } from "../../domain/errors.ts";
import { formatAmount, TOKEN_DECIMALS } from "../../domain/money.ts";
import type { FailureCause } from "../../domain/payout-state.ts";
import {
  type Move,
  type MoveHooks,
  type MoveOutcome,
  MoveRefused,
  type Prepared,
  type Submission,
} from "../../rails/rail.ts";
import type { WalletChoice } from "./decide.ts";
import type { Scope, TransferEndings } from "./finish.ts";
import type { FundsAhead } from "./funds.ts";
import type { TransferLeases } from "./leases.ts";
import type { TransferOutcome } from "./order.ts";
import type { Recorded, TransferPersistence } from "./persist.ts";
import * as repo from "./repo.ts";
import * as sending from "./sending-repo.ts";

// The send step: a transfer goes through its rail, which calls the persist hooks it needs
// (persist.ts) before it sends anything. Its outcome then ends it (finish.ts): completed, failed
// (counted by the breaker unless a refund's or return's recipient refused it), or pending, left to
// the reconciler when the chain has not told yet. Nothing is ever failed while its transfer may
// still happen.

export interface PayoutAttempt {
  scope: Scope;
  payout: repo.NewTransfer;
  wallet: WalletChoice;
  move: Move;
  prepared: Promise<Prepared> | undefined;
  now: Date;
  /** Its wallet's funds, read before its turn (run.ts). */
  fundsAhead?: FundsAhead;
}

export class TransferSends {
  readonly #ctx: AppContext;
  readonly #outcomes: TransferEndings;
  readonly #leases: TransferLeases;
  readonly #persistence: TransferPersistence;

  constructor(
    ctx: AppContext,
    parts: {
      outcomes: TransferEndings;
      leases: TransferLeases;
      persistence: TransferPersistence;
    },
  ) {
    this.#ctx = ctx;
    this.#outcomes = parts.outcomes;
    this.#leases = parts.leases;
    this.#persistence = parts.persistence;
  }

  /**
   * Starts the transfer: `persisted` settles once its record is written (or refused), `result`
   * with its outcome. The caller's turn may end at `persisted`: the next transfer's checks see it.
   */
  start(attempt: PayoutAttempt): { persisted: Promise<void>; result: Promise<TransferOutcome> } {
    const { scope, payout, wallet } = attempt;
    const recorded: Recorded = {};
    let persisted!: () => void;
    const whenPersisted = new Promise<void>((resolve) => {
      persisted = resolve;
    });
    const hooks = this.#persistence.hooks(payout, wallet.rail, recorded, persisted, attempt.fundsAhead);
    this.#leases.hold(payout.id);
    const result = this.#send(scope, payout, hooks, recorded, attempt).finally(() => {
      persisted(); // a refusal before any record
      this.#leases.release(payout.id);
    });
    return { persisted: whenPersisted, result };
  }

  async #send(
    scope: Scope,
    payout: repo.NewTransfer,
    hooks: MoveHooks,
    recorded: Recorded,
    attempt: PayoutAttempt,
  ): Promise<TransferOutcome> {
    let submission: Submission;
    try {
      submission = await attempt.wallet.rail.submit(attempt.move, hooks, attempt.prepared);
    } catch (err) {
      return this.#unsent(scope, payout, recorded, err);
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
    return this.#finish(scope, row, outcome, recorded);
  }

  /** The rail recorded or sent nothing, or failed on the way: why, as the outcome. */
  async #unsent(
    scope: Scope,
    payout: repo.NewTransfer,
    recorded: Recorded,
    err: unknown,
  ): Promise<TransferOutcome> {
    const { ledger, row } = recorded;
    if (ledger?.outcome === "insufficient") {
      const decimals = TOKEN_DECIMALS[payout.tokenSymbol as ChainToken];
      const reason = new InsufficientBalance({
        available: formatAmount(ledger.balance < 0n ? 0n : ledger.balance, decimals),
        requested: formatAmount(payout.amount, decimals),
        tokenSymbol: payout.tokenSymbol,
        network: payout.network,
      });
      return { status: "refused", reason };
    }
    if (err instanceof MoveRefused) {
      // Not recorded: a concurrent request with the same idempotencyKey got there first.
      if (!row) {
        if (payout.idempotencyKey === null) throw err; // nothing else refuses an unkeyed record
        return { status: "duplicate", idempotencyKey: payout.idempotencyKey };
      }
      // The reconciler ended it while this instance was stopped: nothing was sent; its outcome is
      // what the reconciler stored.
      return this.#outcomes.stored(scope, payout.id);
    }
    if (!row) throw err; // refused by the checks (400), or nothing could be recorded
    this.#ctx.log.error({ err, payoutId: payout.id }, "payout send failed");
    // Once its transaction or user operation is recorded it may be sent, and only the chain can
    // tell: the reconciler finishes it. Failed here only when nothing was recorded (so nothing
    // left the wallet: its orderer may order it again, kinds.ts releasesUnsent).
    if (await this.#mayBeSent(payout.id))
      return this.#finish(scope, row, { status: "pending", txHash: "", legs: [], error: null }, recorded);
    const error = firstLineOf(err) || "send failed";
    return this.#finish(scope, row, { status: "reverted", txHash: "", legs: [], error }, recorded, "unsent");
  }

  async #finish(
    scope: Scope,
    row: repo.TransferRow,
    outcome: MoveOutcome,
    recorded: Recorded,
    cause: FailureCause | undefined = outcome.cause,
  ): Promise<TransferOutcome> {
    if (outcome.status === "pending") return this.#inFlight(row, outcome);
    try {
      if (outcome.status === "reverted") {
        return await this.#outcomes.fail(
          scope,
          row,
          outcome.txHash || null,
          outcome.error ?? "transfer failed",
          cause ?? "sending",
        );
      }
      // The sandbox statement completed it (with its event) already.
      const { ledger } = recorded;
      if (ledger?.outcome === "success") {
        return await this.#outcomes.completed(scope, ledger.row, ledger.breaker);
      }
      return await this.#outcomes.complete(scope, row, outcome);
    } catch (err) {
      // Its outcome is known but could not be stored: the reconciler stores it from the chain.
      this.#ctx.log.error({ err, payoutId: row.id }, "recording a payout's outcome failed");
      return this.#inFlight(row, outcome);
    }
  }

  /** Pending, the transfer given up to the reconciler (its outcome is not known yet). */
  async #inFlight(payout: repo.TransferRow, outcome: MoveOutcome): Promise<TransferOutcome> {
    this.#leases.release(payout.id);
    try {
      await sending.releaseLease(this.#ctx.db, payout.id);
    } catch (err) {
      // Its lease then runs out by itself (TRANSFER_LEASE_SECONDS) before the reconciler takes it.
      this.#ctx.log.error({ err, payoutId: payout.id }, "releasing a payout's lease failed");
    }
    return {
      status: "pending",
      transfer: payout,
      txHash: outcome.txHash || null,
      ...(outcome.userOpHash ? { userOpHash: outcome.userOpHash } : {}),
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
