import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import {
  type BreakerState,
  type FailureOutcome,
  PAUSE_AFTER_FAILURES,
  recordFailure,
  recordSuccess,
  uncountedFailure,
} from "../../domain/circuit-breaker.ts";
import { CircuitBreakerOpen } from "../../domain/errors.ts";
import {
  COMPLETED_PAYOUT,
  type FailureCause,
  failureTrigger,
  PAYOUT_TRANSITIONS,
  type TransferKindName,
} from "../../domain/payout-state.ts";
import { coalescedCall } from "../../platform/db/coalesced-write.ts";
import type { Mailer } from "../../platform/mail/mailer.ts";
import { recordEvents } from "../webhooks/outbox.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import { completedAnswer, type PayoutAnswers, type PayoutResponse, payoutFailed } from "./answers.ts";
import { failureEvent, type TransferKinds } from "./kinds.ts";
import * as repo from "./repo.ts";

// How a payout ends, for the caller waiting on it and for the reconciler that finishes it later:
// completed (its event, and a streak reset), failed (its event, counted by the circuit breaker,
// the administrator mailed when it trips), and the answer each gives. Every ending is a
// compare-and-set on `processing`: whoever ends a payout second (its sender after the reconciler
// took it over, or the other way round) changes nothing, counts nothing, and answers what the
// first one stored (answers.ts).

export type { PayoutResponse } from "./answers.ts";
export type Scope = { workspaceId: string; environment: Environment };
/** The transaction that completed a transfer, and a smart wallet's user operation it carried. */
export type Mined = { txHash: string; userOpHash?: string | undefined };

export const RESUME_ACTION = "POST /api/v1/workspaces/{id}/resume, or wait 30 minutes after pausedAt";

export class PayoutOutcomes {
  readonly #ctx: AppContext;
  readonly #workspaces: WorkspacesService;
  readonly #mailer: Mailer;
  readonly #answers: PayoutAnswers;
  readonly #kinds: TransferKinds;
  /** Completions made together share one statement. */
  readonly #completePayout: (
    completion: repo.PayoutCompletion,
  ) => Promise<{ row: repo.PayoutRow | undefined; breaker: BreakerState }>;

  constructor(
    ctx: AppContext,
    parts: { workspaces: WorkspacesService; mailer: Mailer; answers: PayoutAnswers; kinds: TransferKinds },
  ) {
    const { workspaces, mailer, answers } = parts;
    this.#ctx = ctx;
    this.#answers = answers;
    this.#kinds = parts.kinds;
    this.#workspaces = workspaces;
    this.#mailer = mailer;
    this.#completePayout = coalescedCall((completions: readonly repo.PayoutCompletion[]) =>
      repo.completePayouts(ctx.db, completions),
    );
  }

  async complete(scope: Scope, payout: repo.PayoutRow, mined: Mined): Promise<PayoutResponse> {
    const row = await this.recordCompletion(scope, payout, mined);
    if (!row) return this.#answers.stored(scope, payout.id);
    return completedAnswer(row, row.completed_at ?? this.#ctx.now());
  }

  /**
   * Completes a processing payout with its `payout.completed` event (its kind's); undefined when it was no
   * longer processing. The payout and its event are one statement (shared with the completions
   * made together). Most successes follow successes: only a streak to reset (a failure came
   * first) takes the breaker's lock, right after; a crash between the two leaves that streak as
   * it was, which the next success resets.
   */
  async recordCompletion(
    scope: Scope,
    payout: repo.PayoutRow,
    mined: Mined,
  ): Promise<repo.PayoutRow | undefined> {
    const { txHash } = mined;
    const kind = this.#kinds.of(payout.kind);
    // The row the sender holds may predate its user operation's record: the outcome names it.
    const userOpHash = mined.userOpHash ?? payout.user_op_hash ?? undefined;
    const details = kind.completion
      ? await kind.completion(payout, { txHash, ...(userOpHash ? { userOpHash } : {}) })
      : {};
    const at = this.#ctx.now();
    // The event shows the transfer as it stands once completed (the statement adds the status,
    // hashes it stores).
    const completed = { ...payout, status: COMPLETED_PAYOUT, tx_hash: txHash, completed_at: at, error: null };
    const { row, breaker } = await this.#completePayout({
      id: payout.id,
      txHash,
      at,
      event: kind.completedEvent,
      payload: { ...kind.view(completed), ...details },
    });
    if (row) {
      this.#ctx.metrics.payoutEnded("completed", row);
      await this.#resetStreak(scope, breaker);
    }
    return row;
  }

  /** The answer for a completed payout; resets the breaker's streak where a failure came first. */
  async completed(
    scope: Scope,
    row: repo.PayoutRow,
    breaker: BreakerState,
    at: Date,
  ): Promise<PayoutResponse> {
    this.#ctx.metrics.payoutEnded("completed", row);
    await this.#resetStreak(scope, breaker);
    return completedAnswer(row, at);
  }

  async #resetStreak(scope: Scope, breaker: BreakerState): Promise<void> {
    if (recordSuccess(breaker) === breaker) return;
    await this.#ctx.db.transaction().execute(async (trx) => {
      const state = await repo.lockBreaker(trx, scope);
      await repo.writeBreaker(trx, scope, recordSuccess(state));
    });
  }

  /**
   * Fails a payout whose transfer can never happen, counted by the breaker unless its recipient
   * refused a refund or a return (and mailed when it trips); throws the answer. A payout that was
   * no longer processing answers as it is stored.
   */
  async fail(
    scope: Scope,
    payout: repo.PayoutRow,
    txHash: string | null,
    detail: string,
    cause: FailureCause = "sending",
  ): Promise<never> {
    const result = await this.recordFailure(scope, payout, txHash, detail, cause);
    if (!result) throw await this.#answers.storedError(scope, payout.id);
    if (result.tripped) {
      throw new CircuitBreakerOpen("Payouts paused by the circuit breaker", {
        circuitBreaker: true,
        detail,
        failStreak: result.state.failStreak,
        remainingBeforePause: 0,
        pausedAt: result.state.pausedAt?.toISOString() ?? null,
        resumeAction: RESUME_ACTION,
      });
    }
    throw payoutFailed(detail, result.state.failStreak, result.remainingBeforePause);
  }

  /**
   * The failure, its event and the breaker's count (where its trigger counts: payout-state.ts),
   * in one transaction; undefined if not processing.
   */
  async recordFailure(
    scope: Scope,
    payout: repo.PayoutRow,
    txHash: string | null,
    detail: string,
    cause: FailureCause = "sending",
  ) {
    const at = this.#ctx.now();
    const transition = PAYOUT_TRANSITIONS[failureTrigger(payout.kind as TransferKindName, cause)];
    const result = await this.#ctx.db.transaction().execute(async (trx) => {
      const done = await repo.finishPayout(trx, payout.id, {
        status: transition.to,
        txHash,
        error: detail,
        at,
      });
      if (!done) return undefined;
      const kind = this.#kinds.of(done.kind);
      await kind.released?.(trx, done);
      let failure: FailureOutcome;
      if (transition.counted) {
        failure = recordFailure(await repo.lockBreaker(trx, scope), detail, at);
        await repo.writeBreaker(trx, scope, failure.state);
      } else {
        failure = uncountedFailure(await repo.readBreaker(trx, scope));
        this.#ctx.log.warn(
          { payoutId: done.id, kind: done.kind, error: detail },
          "a transfer's recipient refused it; not counted by the circuit breaker",
        );
      }
      await recordEvents(trx, [failureEvent(kind, done, detail, failure.state.failStreak)]);
      return { ...failure, row: done };
    });
    if (result) this.#ctx.metrics.payoutEnded("failed", result.row);
    if (result?.tripped) {
      this.#ctx.metrics.breakerTripped(scope.environment);
      await this.#notifyPaused(scope, result.state);
    }
    return result;
  }

  async #notifyPaused(scope: Scope, state: BreakerState): Promise<void> {
    try {
      const workspace = await this.#workspaces.get(scope.workspaceId, scope.environment);
      if (!workspace.adminEmail) {
        this.#ctx.log.warn(
          { workspaceId: scope.workspaceId },
          "payouts paused; the workspace has no adminEmail to notify",
        );
        return;
      }
      await this.#mailer.send({
        to: workspace.adminEmail,
        subject: `Payouts paused for ${workspace.name} (${scope.environment})`,
        text: [
          `Payouts of workspace "${workspace.name}" (${scope.workspaceId}) in ${scope.environment} were paused at ${state.pausedAt?.toISOString()}`,
          `after ${PAUSE_AFTER_FAILURES} consecutive failed payouts.`,
          "",
          `Last failure: ${state.reason ?? "unknown"}`,
          "",
          "Payouts resume automatically 30 minutes after the pause, or at once with",
          `POST /api/v1/workspaces/${scope.workspaceId}/resume using a ${scope.environment} API key.`,
        ].join("\n"),
      });
    } catch (err) {
      this.#ctx.log.error(
        { err, workspaceId: scope.workspaceId },
        "could not send the circuit-breaker e-mail",
      );
    }
  }
}
