import type { AppContext } from "../../context.ts";
import { PAUSE_AFTER_FAILURES } from "../../domain/circuit-breaker.ts";
import { type AppError, conflict, InternalError, PayoutFailed } from "../../domain/errors.ts";
import { COMPLETED_PAYOUT, FAILED_PAYOUT, OPEN_PAYOUT } from "../../domain/payout-state.ts";
import { idempotentResource } from "../../platform/db/idempotency.ts";
import type { Notices } from "../../platform/db/notices.ts";
import type { MoveOutcome } from "../../rails/rail.ts";
import { payoutKeyScope } from "./keys.ts";
import * as repo from "./repo.ts";
import { toPayoutView } from "./view.ts";

// What a payout request is answered (part 4.10, part 7, D6): 200 with the payout once it
// completed, the breaker-counted failure, 202 while the chain has not told yet, and the answer
// of a repeated idempotencyKey — its original's, waited for while that one is in flight.

export type PayoutResponse = { status: number; body: Record<string, unknown> };

/** How long a repeated idempotencyKey waits for its original to end before answering 409. */
const WAIT_FOR_ORIGINAL_MS = 60_000;

export class PayoutAnswers {
  readonly #ctx: AppContext;
  /** Notices of payouts that ended (processing → completed or failed), from any instance. */
  readonly #endings: Notices;

  constructor(ctx: AppContext, endings: Notices) {
    this.#ctx = ctx;
    this.#endings = endings;
  }

  /** The answer for a payout as it is stored now: 200, 202 while processing, or its failure. */
  async stored(scope: repo.Scope, id: string): Promise<PayoutResponse> {
    const row = await repo.findById(this.#ctx.db, id);
    if (row?.status === COMPLETED_PAYOUT) return completedAnswer(row, row.completed_at ?? this.#ctx.now());
    if (row?.status === OPEN_PAYOUT) {
      return { status: 202, body: { payout: toPayoutView(row), timestamp: this.#ctx.now().toISOString() } };
    }
    throw await this.storedError(scope, id);
  }

  /** The failure of a payout as it is stored, with the breaker's count as it stands. */
  async storedError(scope: repo.Scope, id: string): Promise<AppError> {
    const [row, breaker] = await Promise.all([
      repo.findById(this.#ctx.db, id),
      repo.readBreaker(this.#ctx.db, scope),
    ]);
    if (row?.status !== FAILED_PAYOUT) return new InternalError("Payout failed");
    return payoutFailed(
      row.error ?? "transfer failed",
      breaker.failStreak,
      Math.max(0, PAUSE_AFTER_FAILURES - breaker.failStreak),
    );
  }

  /** The payout recorded under idempotencyKey `key`, if any. */
  async original(scope: repo.Scope, key: string): Promise<repo.PayoutRow | undefined> {
    const id = await idempotentResource(this.#ctx.db, payoutKeyScope(scope, key));
    if (id !== null) return repo.findById(this.#ctx.db, id);
    // During a rolling upgrade an instance older than migration 018 records its payouts' keys on
    // the payout only: such a payout is the original too (a new claim would meet the payouts'
    // unique key).
    return repo.findByIdempotencyKey(this.#ctx.db, scope, key);
  }

  /** The payout recorded under `key` meanwhile (a concurrent request got there first), answered as a repeat. */
  async repeatOf(scope: repo.Scope, key: string | null): Promise<PayoutResponse> {
    const existing = key === null ? undefined : await this.original(scope, key);
    if (!existing) throw new InternalError("Payout failed");
    return this.duplicate(existing);
  }

  /**
   * A repeated idempotencyKey: the original's result, waiting a while for one in flight (on any
   * instance: its ending is noticed, migration 017).
   */
  async duplicate(existing: repo.PayoutRow): Promise<PayoutResponse> {
    let row = existing;
    if (row.status === OPEN_PAYOUT) {
      await this.#endings.waitFor(existing.id, WAIT_FOR_ORIGINAL_MS, async () => {
        row = (await repo.findById(this.#ctx.db, existing.id)) ?? row;
        return row.status !== OPEN_PAYOUT;
      });
      row = (await repo.findById(this.#ctx.db, existing.id)) ?? row;
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

/** 202: the payout's outcome is the reconciler's to record, from the chain. */
export function inFlightAnswer(payout: repo.PayoutRow, outcome: MoveOutcome, now: Date): PayoutResponse {
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

export function completedAnswer(row: repo.PayoutRow, at: Date): PayoutResponse {
  return {
    status: 200,
    body: {
      payout: { ...toPayoutView(row), txHash: row.tx_hash, status: "completed" },
      timestamp: at.toISOString(),
    },
  };
}

export function payoutFailed(detail: string, failStreak: number, remainingBeforePause: number): PayoutFailed {
  return new PayoutFailed({ detail, failStreak, remainingBeforePause, circuitBreaker: false });
}
