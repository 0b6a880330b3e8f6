import { randomUUID } from "node:crypto";
import type { ChainToken, Hex } from "../../chain/network.ts";
import type { AppContext } from "../../context.ts";
import type { BreakerState } from "../../domain/circuit-breaker.ts";
import { badRequest, CircuitBreakerOpen } from "../../domain/errors.ts";
import { validatePayoutRequest } from "../../domain/payout-request.ts";
import { isZeroAddress, zeroAddressMessage } from "../../domain/validation.ts";
import { KeyedQueue } from "../../platform/concurrency/keyed-queue.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import type { Move } from "../../rails/rail.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import type { PayoutAnswers, PayoutResponse } from "./answers.ts";
import type { PayoutDecisions, WalletChoice } from "./decide.ts";
import { InFlightPayouts } from "./in-flight.ts";
import { RESUME_ACTION, type Scope } from "./outcomes.ts";
import * as repo from "./repo.ts";
import type { PayoutSends } from "./send.ts";
import { newTransfer, type TransferOrder } from "./transfer-order.ts";

// A payout (part 4.10, D6) as an operation: validate → decide (the breaker, the wallet and its
// rail) → persist → send → finish (send.ts). One workspace and environment decides one payout at
// a time in this process; different workspaces run in parallel. On a pipelined rail (an EOA) the
// turn ends once the payout is recorded: its transaction is signed, broadcast and mined while the
// next one is checked (a nonce pipeline), as long as the breaker has seen no failure; after a
// failure each payout waits for the one before it, so the breaker has counted every outcome.

/**
 * Payouts of one wallet broadcast and not yet mined, at most, per instance. Bounds how many can
 * fail after the breaker's third failure: they were all sent before it was seen.
 */
const MAX_IN_FLIGHT_PER_WALLET = 16;

export class PayoutCreation {
  readonly #ctx: AppContext;
  readonly #workspaces: WorkspacesService;
  readonly #decisions: PayoutDecisions;
  readonly #sends: PayoutSends;
  readonly #answers: PayoutAnswers;
  readonly #queue = new KeyedQueue();
  /** Recorded payouts waiting for their outcomes, per workspace and environment. */
  readonly #pipeline = new InFlightPayouts();

  constructor(
    ctx: AppContext,
    parts: {
      workspaces: WorkspacesService;
      decisions: PayoutDecisions;
      sends: PayoutSends;
      answers: PayoutAnswers;
    },
  ) {
    this.#ctx = ctx;
    this.#workspaces = parts.workspaces;
    this.#decisions = parts.decisions;
    this.#sends = parts.sends;
    this.#answers = parts.answers;
  }

  async create(principal: Tenant, body: unknown): Promise<PayoutResponse> {
    const validated = validatePayoutRequest(body);
    if (!validated.ok) throw badRequest(validated.message);
    const request = validated.value;
    const scope: Scope = { workspaceId: principal.workspaceId, environment: principal.environment };
    this.#decisions.assertConfigured(scope);

    if (request.idempotencyKey) {
      const existing = await this.#answers.original(scope, request.idempotencyKey);
      if (existing) return this.#answers.duplicate(existing);
    }
    return this.#run(scope, request.walletType, (wallet, now) =>
      repo.newPayout(randomUUID(), scope, request, wallet.from, wallet.walletType, now),
    );
  }

  /**
   * A transfer another module orders (a refund, a return: kinds.ts) through the same steps and
   * rules as a payout. Resolves with its row once it ended, or once it was left to the reconciler
   * (still processing); rejects with why nothing was recorded (the breaker, the balance, the
   * orderer's guard).
   */
  async transfer(scope: Scope, order: TransferOrder): Promise<repo.PayoutRow> {
    // Whatever orders it: money sent to the zero address is burnt (its orderer says why first).
    if (isZeroAddress(order.destinationAddress)) throw badRequest(zeroAddressMessage("destinationAddress"));
    this.#decisions.assertConfigured(scope);
    try {
      await this.#run(scope, order.walletType, (wallet, now) =>
        newTransfer(scope, order, wallet.from, wallet.walletType, now),
      );
    } catch (err) {
      // A transfer that failed answers as its row (a failure its breaker counted): only one that
      // was never recorded is the orderer's error.
      const row = await repo.findById(this.#ctx.db, order.id);
      if (row) return row;
      throw err;
    }
    const row = await repo.findById(this.#ctx.db, order.id);
    if (!row) throw new Error(`transfer ${order.id} answered without its record`);
    return row;
  }

  /** The wallet a transfer with `walletType` would leave (else the default), or the 400/503 saying why none. */
  async walletFor(
    scope: Scope,
    walletType: "eoa" | "smart_wallet" | null,
  ): Promise<{ walletType: "eoa" | "smart_wallet"; from: Hex }> {
    this.#decisions.assertConfigured(scope);
    const wallet = this.#decisions.wallet(
      scope,
      walletType,
      await this.#workspaces.profile(scope.workspaceId),
    );
    return { walletType: wallet.walletType, from: wallet.from };
  }

  async #run(
    scope: Scope,
    walletType: "eoa" | "smart_wallet" | null,
    build: (wallet: WalletChoice, now: Date) => repo.NewPayout,
  ): Promise<PayoutResponse> {
    const scopeKey = `${scope.workspaceId}:${scope.environment}`;
    // The queue's task hands back the payout's result wrapped, never as a bare promise: a promise
    // returned from it would be adopted, and the turn would last until the outcome.
    const queued = await this.#queue.run(scopeKey, async (): Promise<{ result: Promise<PayoutResponse> }> => {
      const now = this.#ctx.now();
      // The breaker decides first: while paused no balance is read and nothing is sent. After a
      // failure, the payouts still in flight finish first (they may fail too), so that the
      // breaker has counted every earlier outcome when it decides on this one.
      await this.#pipeline.below(scopeKey, MAX_IN_FLIGHT_PER_WALLET);
      // The workspace is read meanwhile (a read; nothing is decided on it while paused).
      const profile = this.#workspaces.profile(scope.workspaceId);
      profile.catch(() => undefined); // awaited below; not an unhandled rejection meanwhile
      let breaker = await this.#decisions.breaker(scope, now);
      if (breaker.allowed && breaker.failStreak > 0 && this.#pipeline.size(scopeKey) > 0) {
        await this.#pipeline.drain(scopeKey);
        breaker = await this.#decisions.breaker(scope, now);
      }
      if (!breaker.allowed) throw pausedError(breaker.state);

      const wallet = this.#decisions.wallet(scope, walletType, await profile);
      const signingKey = () => this.#workspaces.signingKey(scope.workspaceId, wallet.owner);
      const payout = build(wallet, now);
      const move: Move = {
        from: wallet.from,
        signingKey,
        legs: payout.legs ?? [
          {
            token: payout.tokenSymbol as ChainToken,
            to: payout.destinationAddress as Hex,
            amount: payout.amount,
            purpose: payout.kind,
          },
        ],
        payoutId: payout.id,
      };
      // Prepared (where the rail prepares) while the balance is checked and the payout recorded.
      const prepared = wallet.rail.prepare(move);
      prepared?.catch(() => undefined); // handed to submit, which reports its failure
      const { persisted, result } = this.#sends.start({ scope, payout, wallet, move, prepared, now });
      if (wallet.rail.pipelined && breaker.failStreak === 0) {
        // The wallet's next payout may be checked and signed (the next nonce) once this one is
        // recorded, while it is signed, broadcast and mined.
        await persisted;
        this.#pipeline.add(scopeKey, result);
        return { result };
      }
      // After a failure (and where there is nothing to overlap) the next payout waits for this
      // one's outcome.
      await result.catch(() => undefined);
      return { result };
    });
    return queued.result;
  }
}

export function pausedError(state: BreakerState): CircuitBreakerOpen {
  return new CircuitBreakerOpen("Payouts are paused for this workspace by the circuit breaker", {
    circuitBreaker: true,
    failStreak: state.failStreak,
    pausedAt: state.pausedAt?.toISOString() ?? null,
    resumeAction: RESUME_ACTION,
  });
}
