import pLimit, { type LimitFunction } from "p-limit";
import type { ChainToken, Hex } from "../../chain/network.ts";
import type { AppContext } from "../../context.ts";
import type { BreakerState } from "../../domain/circuit-breaker.ts";
import { AppError, CircuitBreakerOpen } from "../../domain/errors.ts";
import { guardedByBreaker, spendsItsPayment } from "../../domain/payout-state.ts";
import { KeyedQueue } from "../../platform/concurrency/keyed-queue.ts";
import { FenceRefused } from "../../platform/db/fences.ts";
import type { Move } from "../../rails/rail.ts";
import type { WorkspaceProfile, WorkspacesService } from "../workspaces/service.ts";
import type { TransferDecisions, WalletChoice } from "./decide.ts";
import { RESUME_ACTION, type Scope, type TransferEndings } from "./finish.ts";
import { type FundsAhead, type HeldMoney, readAhead } from "./funds.ts";
import { InFlightTransfers } from "./in-flight.ts";
import { newTransfer, type TransferOrder, type TransferOutcome, type WalletType } from "./order.ts";
import * as repo from "./repo.ts";
import type { TransferSends } from "./send.ts";
import { assertWellFormed, orderProblem } from "./validate.ts";

// The engine's pipeline, written once for every kind: validate (validate.ts) → decide (the
// breaker, the wallet and its rail: decide.ts) → persist (persist.ts, funds.ts) → send (send.ts)
// → finish (finish.ts). One workspace and environment decides one transfer the breaker guards at
// a time in this process; different workspaces run in parallel, and so do settlements (nothing is
// decided on their outcomes). On a pipelined rail (an EOA) the turn ends once the transfer is
// handed to its rail, as long as the breaker has seen no failure: its balance check and record
// take a turn of the wallet's funds (funds.ts) and its transaction a turn of the wallet
// (nonce order), while the next ones are decided, checked and recorded (a pipeline). After a
// failure each transfer waits for the one before it, so the breaker has counted every outcome.

/**
 * Transfers of one workspace handed to their pipelined rail and not ended yet, at most, per
 * instance. Bounds how many can fail after the breaker's third failure: they were all decided
 * before it was seen.
 */
const MAX_IN_FLIGHT_PER_WALLET = 16;

/** Unguarded transfers (settlements) of one wallet on a pipelined rail checked and recorded at once. */
const RECORDING_AT_ONCE = 4;

export class TransferRuns {
  readonly #ctx: AppContext;
  readonly #workspaces: WorkspacesService;
  readonly #decisions: TransferDecisions;
  readonly #sends: TransferSends;
  readonly #endings: TransferEndings;
  readonly #payments: HeldMoney;
  readonly #queue = new KeyedQueue();
  /** Per wallet on a pipelined rail: the unguarded transfers being checked and recorded. */
  readonly #recording = new Map<string, LimitFunction>();
  /** Recorded transfers waiting for their outcomes, per workspace and environment. */
  readonly #pipeline = new InFlightTransfers();

  constructor(
    ctx: AppContext,
    parts: {
      workspaces: WorkspacesService;
      decisions: TransferDecisions;
      sends: TransferSends;
      endings: TransferEndings;
      /** The money held on a wallet, read ahead with its balance (#fundsAhead). */
      payments: HeldMoney;
    },
  ) {
    this.#ctx = ctx;
    this.#workspaces = parts.workspaces;
    this.#decisions = parts.decisions;
    this.#sends = parts.sends;
    this.#endings = parts.endings;
    this.#payments = parts.payments;
  }

  /**
   * Runs `order` through the steps; resolves with its outcome. Rejects only with a fault before
   * anything was recorded.
   */
  async run(order: TransferOrder): Promise<TransferOutcome> {
    assertWellFormed(order);
    const problem = orderProblem(order);
    if (problem) return { status: "refused", reason: problem };
    try {
      this.#decisions.assertConfigured(order.scope);
      // A network whose node does not answer is refused before anything is recorded (503 naming
      // it), not sent into and counted by the breaker as a failure of the workspace.
      await this.#decisions.assertAnswers(order.scope, order.network);
      return await this.#run(order.scope, order, (wallet, now) =>
        newTransfer(
          order,
          { fromAddress: wallet.from, walletType: wallet.walletType, network: wallet.rail.network.id },
          now,
        ),
      );
    } catch (err) {
      // Recorded, then something failed on the way: the transfer answers as it is stored (a
      // failure its breaker counted); only one never recorded is refused or the orderer's error.
      const row = await repo.findById(this.#ctx.db, order.id);
      if (row) return this.#endings.stored(order.scope, row.id);
      if (err instanceof FenceRefused) return { status: "fenced", fence: err.fence };
      if (err instanceof AppError) return { status: "refused", reason: err };
      throw err;
    }
  }

  /** The wallet a transfer with `walletType` would leave (else the default), or the refusal saying why none. */
  async walletFor(
    scope: Scope,
    network: string | null,
    walletType: WalletType | null,
  ): Promise<{ walletType: WalletType; from: Hex }> {
    this.#decisions.assertConfigured(scope);
    const wallet = this.#decisions.wallet(
      scope,
      network,
      walletType,
      await this.#workspaces.profile(scope.workspaceId),
    );
    return { walletType: wallet.walletType, from: wallet.from };
  }

  /** Throws the refusal when the scope's environment has no rail at all (no live network). */
  assertConfigured(scope: Scope): void {
    this.#decisions.assertConfigured(scope);
  }

  async #run(
    scope: Scope,
    order: Pick<TransferOrder, "kind" | "walletType" | "network" | "tokenSymbol">,
    build: (wallet: WalletChoice, now: Date) => repo.NewTransfer,
  ): Promise<TransferOutcome> {
    // A kind the breaker does not guard (a settlement) has nothing to decide on the outcomes
    // before it: it takes no turn of the workspace, and the next transfer does not wait for it
    // (nor does its balance check take the wallet's turn: funds.ts).
    if (!guardedByBreaker(order.kind)) return this.#unguarded(scope, order, build);
    const scopeKey = `${scope.workspaceId}:${scope.environment}`;
    // The workspace is read as the order arrives (a read; nothing is decided on it while paused),
    // and its wallet's funds with it (#fundsAhead).
    const profile = this.#workspaces.profile(scope.workspaceId);
    profile.catch(() => undefined); // awaited below; not an unhandled rejection meanwhile
    const ahead = this.#fundsAhead(scope, order, profile);
    // The queue's task hands back the payout's result wrapped, never as a bare promise: a promise
    // returned from it would be adopted, and the turn would last until the outcome.
    const queued = await this.#queue.run(
      scopeKey,
      async (): Promise<{ result: Promise<TransferOutcome> }> => {
        const now = this.#ctx.now();
        // The breaker decides first: while paused nothing is checked or sent. After a
        // failure, the payouts still in flight finish first (they may fail too), so that the
        // breaker has counted every earlier outcome when it decides on this one.
        await this.#pipeline.below(scopeKey, MAX_IN_FLIGHT_PER_WALLET);
        let breaker = await this.#decisions.breaker(scope, now);
        if (breaker.allowed && breaker.failStreak > 0 && this.#pipeline.size(scopeKey) > 0) {
          await this.#pipeline.drain(scopeKey);
          breaker = await this.#decisions.breaker(scope, now);
        }
        if (!breaker.allowed) throw pausedError(breaker.state);
        const wallet = this.#decisions.wallet(scope, order.network, order.walletType, await profile);
        const { result } = this.#start(scope, wallet, build, now, await ahead);
        if (wallet.rail.pipelined && breaker.failStreak === 0) {
          // The next payout may be decided now: the wallet's funds turn checks the payouts one at
          // a time, each seeing those recorded before it, and the wallet's turn gives them their
          // nonces (those that reach it while it is held share the next).
          this.#pipeline.add(scopeKey, result);
          return { result };
        }
        // After a failure (and where there is nothing to overlap) the next payout waits for this
        // one's outcome.
        await result.catch(() => undefined);
        return { result };
      },
    );
    return queued.result;
  }

  /**
   * A transfer nothing is decided on the outcomes before. A pipelined rail sends a wallet's
   * transactions one nonce at a time: a few of them checked and recorded at once keep it fed,
   * where all at once would queue every check ahead of the wallet's first send.
   */
  async #unguarded(
    scope: Scope,
    order: Pick<TransferOrder, "walletType" | "network">,
    build: (wallet: WalletChoice, now: Date) => repo.NewTransfer,
  ): Promise<TransferOutcome> {
    const profile = await this.#workspaces.profile(scope.workspaceId);
    const wallet = this.#decisions.wallet(scope, order.network, order.walletType, profile);
    if (!wallet.rail.pipelined) return this.#start(scope, wallet, build, this.#ctx.now()).result;
    const key = `${scope.environment}:${wallet.from.toLowerCase()}`;
    const limit = this.#recording.get(key) ?? pLimit(RECORDING_AT_ONCE);
    this.#recording.set(key, limit);
    let started: { result: Promise<TransferOutcome> };
    try {
      started = await limit(async () => {
        const { persisted, result } = this.#start(scope, wallet, build, this.#ctx.now());
        await persisted;
        return { result }; // wrapped: the slot ends once it is recorded, not at its outcome
      });
    } finally {
      const idle = limit.activeCount === 0 && limit.pendingCount === 0;
      if (idle && this.#recording.get(key) === limit) this.#recording.delete(key);
    }
    return started.result;
  }

  /**
   * The wallet's funds, read as the order arrives rather than in its turn (funds.ts FundsAhead):
   * the orders of a burst share one read (the rail joins a read in flight) instead of each
   * waiting in its turn for the node. Undefined where nothing is read so: not a pipelined rail,
   * or no wallet to decide yet (the turn decides again, and answers why).
   */
  async #fundsAhead(
    scope: Scope,
    order: Pick<TransferOrder, "walletType" | "network" | "tokenSymbol">,
    profile: Promise<WorkspaceProfile>,
  ): Promise<FundsAhead | undefined> {
    let wallet: WalletChoice;
    try {
      wallet = this.#decisions.wallet(scope, order.network, order.walletType, await profile);
    } catch {
      return undefined; // the same decision in the turn throws it to the orderer
    }
    if (!wallet.rail.pipelined) return undefined;
    return readAhead(wallet.rail, wallet.from, order.tokenSymbol as ChainToken, this.#payments);
  }

  /** The transfer built for `wallet`, handed to its rail: once recorded (`persisted`), and its outcome. */
  #start(
    scope: Scope,
    wallet: WalletChoice,
    build: (wallet: WalletChoice, now: Date) => repo.NewTransfer,
    now: Date,
    fundsAhead?: FundsAhead,
  ): { persisted: Promise<void>; result: Promise<TransferOutcome> } {
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
      // A settlement's legs are its payment's too (what the payment's money is held for), and
      // nobody waits on it.
      ...(spendsItsPayment(payout.kind) && payout.paymentId
        ? { paymentId: payout.paymentId, background: true }
        : {}),
    };
    // Prepared (where the rail prepares) while the balance is checked and the payout recorded.
    const prepared = wallet.rail.prepare(move);
    prepared?.catch(() => undefined); // handed to submit, which reports its failure
    return this.#sends.start({
      scope,
      payout,
      wallet,
      move,
      prepared,
      now,
      ...(fundsAhead ? { fundsAhead } : {}),
    });
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
