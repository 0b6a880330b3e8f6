import type { AppContext } from "../../context.ts";
import { CircuitBreakerOpen, conflict, InternalError, PayoutFailed } from "../../domain/errors.ts";
import { COMPLETED_PAYOUT, OPEN_PAYOUT } from "../../domain/payout-state.ts";
import { idempotentResource } from "../../platform/db/idempotency.ts";
import type { Notices } from "../../platform/db/notices.ts";
import { RESUME_ACTION } from "../transfers/finish.ts";
import { payoutKeyScope } from "../transfers/keys.ts";
import type { TransferOutcome } from "../transfers/order.ts";
import type { Scope, TransferRow } from "../transfers/repo.ts";
import type { TransfersService } from "../transfers/service.ts";
import { toPayoutView } from "./view.ts";

// What a payout request is answered (part 4.10, part 7, D6), from the transfer engine's outcome:
// 200 with the payout once it completed, the breaker-counted failure, 202 while the chain has not
// told yet, and the answer of a repeated idempotencyKey — its original's, waited for while that
// one is in flight.

export type PayoutResponse = { status: number; body: Record<string, unknown> };

/** How long a repeated idempotencyKey waits for its original to end before answering 409. */
const WAIT_FOR_ORIGINAL_MS = 60_000;

export class PayoutAnswers {
  readonly #ctx: AppContext;
  /** Notices of payouts that ended (processing → completed or failed), from any instance. */
  readonly #endings: Notices;
  readonly #transfers: TransfersService;

  constructor(ctx: AppContext, endings: Notices, transfers: TransfersService) {
    this.#ctx = ctx;
    this.#endings = endings;
    this.#transfers = transfers;
  }

  /** The answer to a payout's outcome: its body, or the error it is answered with. */
  async of(scope: Scope, outcome: TransferOutcome): Promise<PayoutResponse> {
    switch (outcome.status) {
      case "completed":
        return completedAnswer(outcome.transfer, outcome.transfer.completed_at ?? this.#ctx.now());
      case "pending":
        return {
          status: 202,
          body: {
            payout: {
              ...toPayoutView(outcome.transfer),
              txHash: outcome.txHash,
              ...(outcome.userOpHash ? { userOpHash: outcome.userOpHash } : {}),
            },
            timestamp: this.#ctx.now().toISOString(),
          },
        };
      case "failed": {
        const { breaker, error } = outcome;
        if (breaker.tripped) {
          throw new CircuitBreakerOpen("Payouts paused by the circuit breaker", {
            circuitBreaker: true,
            detail: error,
            failStreak: breaker.failStreak,
            remainingBeforePause: 0,
            pausedAt: breaker.pausedAt?.toISOString() ?? null,
            resumeAction: RESUME_ACTION,
          });
        }
        throw payoutFailed(error, breaker.failStreak, breaker.remainingBeforePause);
      }
      case "refused":
        throw outcome.reason;
      case "duplicate":
        return this.#repeatOf(scope, outcome.idempotencyKey);
      case "fenced":
        throw new Error(`a payout has no fences, yet "${outcome.fence}" refused it`);
    }
  }

  /** The payout recorded under idempotencyKey `key`, if any. */
  async original(scope: Scope, key: string): Promise<TransferRow | undefined> {
    const id = await idempotentResource(this.#ctx.db, payoutKeyScope(scope, key));
    if (id !== null) return this.#transfers.byId(id);
    // During a rolling upgrade an instance older than migration 018 records its payouts' keys on
    // the payout only: such a payout is the original too (a new claim would meet the payouts'
    // unique key).
    return this.#transfers.byIdempotencyKey(scope, key);
  }

  /** The payout recorded under `key` meanwhile (a concurrent request got there first), answered as a repeat. */
  async #repeatOf(scope: Scope, key: string): Promise<PayoutResponse> {
    const existing = await this.original(scope, key);
    if (!existing) throw new InternalError("Payout failed");
    return this.duplicate(existing);
  }

  /**
   * A repeated idempotencyKey: the original's result, waiting a while for one in flight (on any
   * instance: its ending is noticed, migration 017).
   */
  async duplicate(existing: TransferRow): Promise<PayoutResponse> {
    let row = existing;
    if (row.status === OPEN_PAYOUT) {
      await this.#endings.waitFor(existing.id, WAIT_FOR_ORIGINAL_MS, async () => {
        row = (await this.#transfers.byId(existing.id)) ?? row;
        return row.status !== OPEN_PAYOUT;
      });
      row = (await this.#transfers.byId(existing.id)) ?? row;
    }
    if (row.status === COMPLETED_PAYOUT) {
      return {
        status: 200,
        body: {
          payout: {
            txHash: row.tx_hash,
            status: "completed",
            note: "Duplicate idempotencyKey; original result returned",
          },
        },
      };
    }
    if (row.status === OPEN_PAYOUT) throw conflict("A payout with this idempotencyKey is still in progress");
    throw conflict("idempotencyKey already used by a payout that failed", {
      payout: { ...toPayoutView(row), error: row.error },
    });
  }
}

function completedAnswer(row: TransferRow, at: Date): PayoutResponse {
  return {
    status: 200,
    body: {
      payout: { ...toPayoutView(row), txHash: row.tx_hash, status: "completed" },
      timestamp: at.toISOString(),
    },
  };
}

function payoutFailed(detail: string, failStreak: number, remainingBeforePause: number): PayoutFailed {
  return new PayoutFailed({ detail, failStreak, remainingBeforePause, circuitBreaker: false });
}
