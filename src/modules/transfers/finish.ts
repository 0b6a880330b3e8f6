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
import { InternalError } from "../../domain/errors.ts";
import {
  COMPLETED_PAYOUT,
  FAILED_PAYOUT,
  type FailureCause,
  failureTrigger,
  OPEN_PAYOUT,
  PAYOUT_TRANSITIONS,
  type TransferKindName,
} from "../../domain/payout-state.ts";
import { coalescedCall } from "../../platform/db/coalesced-write.ts";
import type { Mailer } from "../../platform/mail/mailer.ts";
import type { Rails } from "../../rails/index.ts";
import type { MoveOutcome } from "../../rails/rail.ts";
import { recordEvents } from "../webhooks/outbox.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import * as breakers from "./breaker-repo.ts";
import { failureEvents, releasesOf, type TransferKind, type TransferKinds } from "./kinds.ts";
import type { TransferOutcome } from "./order.ts";
import * as repo from "./repo.ts";

// The finish step: how a transfer ends, for the orderer waiting on it and for the reconciler
// that finishes it later: completed (its kind's event, and a streak reset), failed (its event,
// counted by the circuit breaker, the administrator mailed when it trips), and the outcome each
// gives. Every ending is a compare-and-set on `processing`: whoever ends a transfer second (its
// sender after the reconciler took it over, or the other way round) changes nothing, counts
// nothing, and answers what the first one stored (`stored`).

export type Scope = { workspaceId: string; environment: Environment };
/**
 * A transfer's move mined with success: the transaction that completed it, the user operation it
 * carried (a smart wallet's), and each leg's transaction where its rail answered them.
 */
export type Mined = { txHash: string; userOpHash?: string | undefined; legs?: MoveOutcome["legs"] };

export const RESUME_ACTION = "POST /api/v1/workspaces/{id}/resume, or wait 30 minutes after pausedAt";

export class TransferEndings {
  readonly #ctx: AppContext;
  readonly #workspaces: WorkspacesService;
  readonly #mailer: Mailer;
  readonly #kinds: TransferKinds;
  readonly #rails: Rails;
  /** Completions made together share one statement. */
  readonly #completePayout: (
    completion: repo.PayoutCompletion,
  ) => Promise<{ row: repo.TransferRow | undefined; breaker: BreakerState }>;

  constructor(
    ctx: AppContext,
    parts: { workspaces: WorkspacesService; mailer: Mailer; kinds: TransferKinds; rails: Rails },
  ) {
    const { workspaces, mailer } = parts;
    this.#rails = parts.rails;
    this.#ctx = ctx;
    this.#kinds = parts.kinds;
    this.#workspaces = workspaces;
    this.#mailer = mailer;
    this.#completePayout = coalescedCall((completions: readonly repo.PayoutCompletion[]) =>
      repo.completePayouts(ctx.db, completions),
    );
  }

  async complete(scope: Scope, payout: repo.TransferRow, mined: Mined): Promise<TransferOutcome> {
    const row = await this.recordCompletion(scope, payout, mined);
    if (!row) return this.stored(scope, payout.id);
    return { status: "completed", transfer: row, ...(mined.legs ? { legs: mined.legs } : {}) };
  }

  /** The outcome of a transfer as it is stored now (another instance, or the reconciler, ended it). */
  async stored(scope: Scope, id: string): Promise<TransferOutcome> {
    const row = await repo.findById(this.#ctx.db, id);
    if (row?.status === COMPLETED_PAYOUT) return { status: "completed", transfer: row };
    if (row?.status === OPEN_PAYOUT) {
      const userOpHash = row.user_op_hash ?? undefined;
      return { status: "pending", transfer: row, txHash: row.tx_hash, ...(userOpHash ? { userOpHash } : {}) };
    }
    if (row?.status !== FAILED_PAYOUT) throw new InternalError("Payout failed");
    const breaker = await breakers.readBreaker(this.#ctx.db, scope);
    return {
      status: "failed",
      transfer: row,
      error: row.error ?? "transfer failed",
      breaker: {
        failStreak: breaker.failStreak,
        remainingBeforePause: Math.max(0, PAUSE_AFTER_FAILURES - breaker.failStreak),
        tripped: false,
        pausedAt: breaker.pausedAt,
      },
    };
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
    payout: repo.TransferRow,
    mined: Mined,
  ): Promise<repo.TransferRow | undefined> {
    const { txHash } = mined;
    const kind = this.#kinds.of(payout.kind);
    // The row the sender holds may predate its user operation's record: the outcome names it.
    const userOpHash = mined.userOpHash ?? payout.user_op_hash ?? undefined;
    const details = kind.measure ? await this.#measured(kind, payout, { txHash, userOpHash }) : {};
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
      this.#ended("completed", row);
      await this.#resetStreak(scope, breaker);
    }
    return row;
  }

  /**
   * What `kind` reads of a completed transfer from the events its move emitted, asked of the
   * transfer's rail; the kind's statements that store it are run first (idempotent).
   */
  async #measured(
    kind: TransferKind,
    payout: repo.TransferRow,
    mined: { txHash: string; userOpHash: string | undefined },
  ): Promise<Record<string, unknown>> {
    const walletType = payout.wallet_type === "smart_wallet" ? "smart_wallet" : "eoa";
    const rail = this.#rails.of(payout.environment as Environment, payout.network)?.[walletType];
    if (!rail)
      throw new Error(`no ${walletType} rail in ${payout.environment} to read transfer ${payout.id} from`);
    const logs = await rail.logsOf({
      txHash: mined.txHash,
      ...(mined.userOpHash ? { userOpHash: mined.userOpHash } : {}),
    });
    const measured = kind.measure?.(payout, logs) ?? { details: {}, statements: [] };
    for (const statement of measured.statements) await this.#ctx.db.executeQuery(statement);
    return measured.details;
  }

  /** A transfer completed in its record's statement (the ledger's); resets a streak a failure began. */
  async completed(scope: Scope, row: repo.TransferRow, breaker: BreakerState): Promise<TransferOutcome> {
    this.#ended("completed", row);
    await this.#resetStreak(scope, breaker);
    return { status: "completed", transfer: row };
  }

  /** Counts an ending under its kind (transfers_total), and a payout's in payouts_total. */
  #ended(outcome: "completed" | "failed", row: repo.TransferRow): void {
    this.#ctx.metrics.transferEnded(outcome, row);
  }

  async #resetStreak(scope: Scope, breaker: BreakerState): Promise<void> {
    if (recordSuccess(breaker) === breaker) return;
    await this.#ctx.db.transaction().execute(async (trx) => {
      const state = await breakers.lockBreaker(trx, scope);
      await breakers.writeBreaker(trx, scope, recordSuccess(state));
    });
  }

  /**
   * Fails a transfer that can never happen, counted by the breaker unless its recipient refused a
   * refund or a return (and mailed when it trips). One no longer processing answers as stored.
   */
  async fail(
    scope: Scope,
    payout: repo.TransferRow,
    txHash: string | null,
    detail: string,
    cause: FailureCause = "sending",
  ): Promise<TransferOutcome> {
    const result = await this.recordFailure(scope, payout, txHash, detail, cause);
    if (!result) return this.stored(scope, payout.id);
    return {
      status: "failed",
      transfer: result.row,
      error: detail,
      breaker: {
        failStreak: result.state.failStreak,
        remainingBeforePause: result.remainingBeforePause,
        tripped: result.tripped,
        pausedAt: result.state.pausedAt,
      },
    };
  }

  /**
   * The failure, its event and the breaker's count (where its trigger counts: payout-state.ts),
   * in one transaction; undefined if not processing.
   */
  async recordFailure(
    scope: Scope,
    payout: repo.TransferRow,
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
      for (const statement of releasesOf(kind, done, cause === "unsent")) await trx.executeQuery(statement);
      let failure: FailureOutcome;
      if (transition.counted) {
        failure = recordFailure(await breakers.lockBreaker(trx, scope), detail, at);
        await breakers.writeBreaker(trx, scope, failure.state);
      } else {
        failure = uncountedFailure(await breakers.readBreaker(trx, scope));
        this.#ctx.log.warn(
          { payoutId: done.id, kind: done.kind, error: detail },
          transition === PAYOUT_TRANSITIONS.settlement_failed
            ? "a settlement failed; the circuit breaker does not count settlements"
            : "a transfer's recipient refused it; not counted by the circuit breaker",
        );
      }
      await recordEvents(trx, failureEvents(kind, done, detail, failure.state.failStreak));
      return { ...failure, row: done };
    });
    if (result) this.#ended("failed", result.row);
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
