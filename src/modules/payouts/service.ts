import type { PreparedOperation } from "../../chain/evm/smart-accounts.ts";
import type { ChainToken, Hex } from "../../chain/network.ts";
import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { type BreakerState, decideAttempt, resume } from "../../domain/circuit-breaker.ts";
import { formatAmount, TOKEN_DECIMALS } from "../../domain/money.ts";
import { validatePayoutRequest } from "../../domain/payout-request.ts";
import { KeyedQueue } from "../../platform/concurrency/keyed-queue.ts";
import { coalescedLookup } from "../../platform/db/coalesced-lookup.ts";
import { SessionTurns } from "../../platform/db/wallet-lock.ts";
import type { KeyPrincipal } from "../../platform/http/auth.ts";
import { ApiError, badRequest, serviceUnavailable } from "../../platform/http/errors.ts";
import type { Mailer } from "../../platform/mail/mailer.ts";
import type { PaymentsService } from "../payments/service.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import { type PayoutChannel, PayoutNotSendable, type SendingChannel, type SendOutcome } from "./channels.ts";
import { recordIfFunded } from "./funds.ts";
import { InFlightPayouts } from "./in-flight.ts";
import { PayoutLeases } from "./leases.ts";
import { PayoutOutcomes, type PayoutResponse, RESUME_ACTION, type Scope } from "./outcomes.ts";
import { PayoutReconciler, type ResendOperation } from "./reconciler.ts";
import * as repo from "./repo.ts";
import { SandboxPayouts } from "./sandbox-payouts.ts";
import * as sending from "./sending-repo.ts";
import { toPayoutView } from "./view.ts";

export { type PayoutView, toPayoutView } from "./view.ts";

// Synchronous payouts (part 4.10, D6) guarded by the circuit breaker (part 3). One workspace
// and environment starts one payout at a time in this process; different workspaces run in
// parallel. Across instances, a wallet's balance check and the recording of the payout take
// turns on a lock in the database, which also holds what is already on its way out (funds.ts),
// and its transactions are signed and broadcast in nonce order (TransactionSender). A live EOA
// payout holds this process's turn only until its transaction is broadcast, then waits for its
// receipt while the next one is signed (a nonce pipeline), as long as the breaker has seen no
// failure; after a failure each payout waits for the one before it, so the breaker sees every
// outcome before the next attempt. The payout row is written (processing, leased to this
// instance) before anything is sent, and its transaction is recorded before broadcast, so a
// crash can be reconciled and an idempotent repeat never sends twice.

/**
 * Payouts of one wallet broadcast and not yet mined, at most, per instance. Bounds how many can
 * fail after the breaker's third failure: they were all sent before it was seen.
 */
const MAX_IN_FLIGHT_PER_WALLET = 16;

export class PayoutsService {
  readonly #ctx: AppContext;
  readonly #workspaces: WorkspacesService;
  readonly #payments: Pick<PaymentsService, "unsettledOn">;
  readonly #channels: Partial<Record<Environment, PayoutChannel>>;
  readonly #smartChannels: Partial<Record<Environment, PayoutChannel>>;
  readonly #queue = new KeyedQueue();
  /** A wallet's balance checks take turns across instances (funds.ts). */
  readonly #fundsTurns: SessionTurns;
  /** Broadcast payouts waiting for their receipts, per workspace and environment. */
  readonly #pipeline = new InFlightPayouts();
  /** Payouts this process is sending right now, leased to it; the reconciler leaves them alone. */
  readonly #leases: PayoutLeases;
  readonly #outcomes: PayoutOutcomes;
  readonly #sandbox: SandboxPayouts;
  readonly #reconciler: PayoutReconciler;
  /** Breaker reads of payouts arriving together share one query. */
  readonly #breakers: (key: string) => Promise<BreakerState | undefined>;

  constructor(
    ctx: AppContext,
    workspaces: WorkspacesService,
    payments: Pick<PaymentsService, "unsettledOn">,
    channels: Partial<Record<Environment, PayoutChannel>>,
    mailer: Mailer,
    smartChannels: Partial<Record<Environment, PayoutChannel>> = {},
    resend?: ResendOperation,
  ) {
    this.#ctx = ctx;
    this.#workspaces = workspaces;
    this.#payments = payments;
    this.#channels = channels;
    this.#smartChannels = smartChannels;
    this.#leases = new PayoutLeases(ctx.db, ctx.log);
    this.#fundsTurns = new SessionTurns(ctx.db, ctx.log);
    this.#outcomes = new PayoutOutcomes(ctx, workspaces, mailer);
    this.#sandbox = new SandboxPayouts(ctx, this.#outcomes);
    this.#reconciler = new PayoutReconciler(ctx, this.#outcomes, this.#leases, resend);
    this.#breakers = coalescedLookup((keys: readonly string[]) => repo.readBreakers(ctx.db, keys));
  }

  async create(principal: KeyPrincipal, body: unknown): Promise<PayoutResponse> {
    const validated = validatePayoutRequest(body);
    if (!validated.ok) throw badRequest(validated.message);
    const request = validated.value;
    if (!this.#channels[principal.environment]) throw serviceUnavailable("Live network is not configured");
    const scope: Scope = { workspaceId: principal.workspaceId, environment: principal.environment };

    if (request.idempotencyKey) {
      const existing = await repo.findByIdempotencyKey(this.#ctx.db, scope, request.idempotencyKey);
      if (existing) return this.#outcomes.duplicate(scope, existing);
    }

    const scopeKey = `${scope.workspaceId}:${scope.environment}`;
    // The queue's task hands back the payout's result wrapped, never as a bare promise: a promise
    // returned from it would be adopted, and the wallet's turn would last until the receipt.
    const queued = await this.#queue.run(scopeKey, async (): Promise<{ result: Promise<PayoutResponse> }> => {
      const now = this.#ctx.now();

      // The breaker decides first: while paused no balance is read and nothing is sent. After a
      // failure, the payouts still in flight finish first (they may fail too), so that the
      // breaker has counted every earlier outcome when it decides on this one.
      await this.#pipeline.below(scopeKey, MAX_IN_FLIGHT_PER_WALLET);
      // The workspace is read meanwhile (a read; nothing is decided on it while paused).
      const profile = this.#workspaces.profile(scope.workspaceId);
      profile.catch(() => undefined); // awaited below; not an unhandled rejection meanwhile
      let breaker = await this.#decide(scope, now);
      if (breaker.allowed && breaker.failStreak > 0 && this.#pipeline.size(scopeKey) > 0) {
        await this.#pipeline.drain(scopeKey);
        breaker = await this.#decide(scope, now);
      }
      if (!breaker.allowed) throw pausedError(breaker.state);

      const workspace = await profile;
      if (!workspace.eoaAddress) throw badRequest("No workspace wallet found. Provision a wallet first.");
      const walletType =
        request.walletType ?? (workspace.defaultWalletType === "smart_wallet" ? "smart_wallet" : "eoa");
      const channel =
        walletType === "smart_wallet"
          ? this.#smartChannels[scope.environment]
          : this.#channels[scope.environment];
      if (!channel) {
        throw serviceUnavailable(`Smart wallets are not configured for ${scope.environment}: no bundler`);
      }
      if (walletType === "smart_wallet" && !workspace.smartWalletAddress) {
        throw badRequest(
          "No smart wallet for this workspace: create one with POST /api/v1/workspaces/{id}/smart-wallet",
        );
      }
      const owner = workspace.eoaAddress as Hex;
      const from = (
        walletType === "smart_wallet" ? workspace.smartWalletAddress : workspace.eoaAddress
      ) as Hex;

      if (channel.kind === "ledger") {
        // Sandbox: nothing to send; the balance is checked where the money moves.
        const paid = this.#sandbox.pay(scope, channel, from, walletType, request, now);
        await paid.catch(() => undefined);
        return { result: paid };
      }

      const signingKey = () => this.#workspaces.signingKey(scope.workspaceId, owner);
      // Prepared while the balance is checked and the payout recorded; sent only after both.
      const prepared = channel.prepare?.(
        signingKey,
        request.destinationAddress as Hex,
        request.tokenSymbol,
        request.amount,
      );
      prepared?.catch(() => undefined); // handed to submit, which reports its failure
      const payout = await recordIfFunded(
        this.#ctx,
        this.#fundsTurns,
        this.#payments,
        channel,
        repo.newPayout(scope, request, from, walletType, now),
      );
      if (!payout) {
        // A concurrent request with the same idempotencyKey got there first.
        const existing = await repo.findByIdempotencyKey(this.#ctx.db, scope, request.idempotencyKey ?? "");
        if (!existing) throw new ApiError(500, "Payout failed");
        return { result: this.#outcomes.duplicate(scope, existing) };
      }
      const sent = this.#send(scope, payout, channel, signingKey, now, prepared);
      if (channel.pipelined && breaker.failStreak === 0) {
        // The wallet's next payout may be checked and signed (the next nonce) while this one is
        // signed, broadcast and mined: a nonce pipeline.
        this.#pipeline.add(scopeKey, sent);
        return { result: sent };
      }
      // After a failure (and where there is no receipt to wait for) the next payout waits for
      // this one's outcome.
      await sent.catch(() => undefined);
      return { result: sent };
    });
    return queued.result;
  }

  /** Signs and sends a recorded payout, waits for its outcome and records it. */
  async #send(
    scope: Scope,
    payout: repo.PayoutRow,
    channel: SendingChannel,
    signingKey: () => Promise<Hex>,
    now: Date,
    prepared: Promise<PreparedOperation> | undefined,
  ): Promise<PayoutResponse> {
    this.#leases.hold(payout.id);
    let outcome: SendOutcome;
    try {
      try {
        const submission = await channel.submit(
          payout.id,
          signingKey,
          payout.from_address as Hex,
          payout.destination_address as Hex,
          payout.token_symbol as ChainToken,
          BigInt(payout.amount),
          {
            claim: sending.claimForSending(payout.id),
            recordOperation: async (userOpHash, operation) => {
              if (!(await sending.recordUserOperation(this.#ctx.db, payout.id, userOpHash, operation)))
                throw notSendable(payout.id);
            },
          },
          prepared,
        );
        try {
          outcome = await submission.outcome;
        } catch (err) {
          // Broadcast, outcome unknown: the reconciler finishes it from the chain.
          this.#ctx.log.error({ err, payoutId: payout.id }, "waiting for the payout's receipt failed");
          outcome = { txHash: "", status: "pending", error: null };
        }
      } catch (err) {
        // The reconciler ended it while this instance was stopped: nothing was sent; its answer
        // is what the reconciler stored.
        if (err instanceof PayoutNotSendable) return await this.#outcomes.stored(scope, payout.id);
        this.#ctx.log.error({ err, payoutId: payout.id }, "payout send failed");
        // Once its transaction or user operation is recorded it may be sent, and only the chain
        // can tell: the reconciler finishes it. Failed here only when nothing was recorded.
        outcome = (await this.#mayBeSent(payout.id))
          ? { txHash: "", status: "pending", error: null }
          : { txHash: "", status: "reverted", error: (err as Error).message.split("\n")[0] ?? "send failed" };
      }
      if (outcome.status === "pending") return await this.#inFlight(payout, outcome, now);
      try {
        return await (outcome.status === "success"
          ? this.#outcomes.complete(scope, payout, outcome.txHash)
          : this.#outcomes.fail(scope, payout, outcome.txHash || null, outcome.error ?? "transfer failed"));
      } catch (err) {
        if (err instanceof ApiError) throw err; // the answer of a failed payout
        // Its outcome is known but could not be stored: the reconciler stores it from the chain.
        this.#ctx.log.error({ err, payoutId: payout.id }, "recording a payout's outcome failed");
        return await this.#inFlight(payout, outcome, now);
      }
    } finally {
      this.#leases.release(payout.id);
    }
  }

  /** The answer of a payout whose outcome the reconciler is left to finish (202), given up to it. */
  async #inFlight(payout: repo.PayoutRow, outcome: SendOutcome, now: Date): Promise<PayoutResponse> {
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

  async #decide(
    scope: Scope,
    now: Date,
  ): Promise<{ allowed: true; failStreak: number } | { allowed: false; state: BreakerState }> {
    // A read decides for an active breaker (stage one of a workspace's payouts is serialized
    // here, and failures are written under the breaker's lock); an auto-resume writes, locked.
    const seen = (await this.#breakers(`${scope.workspaceId} ${scope.environment}`)) ?? repo.INITIAL_BREAKER;
    const first = decideAttempt(seen, now);
    if (first.allowed && !first.autoResumed) return { allowed: true, failStreak: seen.failStreak };
    if (!first.allowed) return first;
    return this.#ctx.db.transaction().execute(async (trx) => {
      const state = await repo.lockBreaker(trx, scope);
      const decision = decideAttempt(state, now);
      if (!decision.allowed) return decision;
      if (decision.autoResumed) await repo.writeBreaker(trx, scope, resume(state).state);
      return { allowed: true as const, failStreak: decision.autoResumed ? 0 : state.failStreak };
    });
  }

  /** Finishes payouts no live instance owns any more, from what the chain says (reconciler.ts). */
  reconcile(environment: Environment): Promise<number> {
    return this.#reconciler.reconcile(environment);
  }

  async history(principal: KeyPrincipal, page: { limit: number; offset: number }) {
    const { rows, total } = await repo.listCompleted(this.#ctx.db, principal, page);
    return {
      payouts: rows.map((row) => ({
        txHash: row.tx_hash,
        type: row.token_symbol === "ETH" ? "ETH" : "ERC20",
        details: {
          amount: formatAmount(BigInt(row.amount), TOKEN_DECIMALS[row.token_symbol as ChainToken]),
          tokenSymbol: row.token_symbol,
          destinationAddress: row.destination_address,
          ...(row.description ? { description: row.description } : {}),
        },
        createdAt: row.created_at.toISOString(),
      })),
      total,
      limit: page.limit,
      offset: page.offset,
    };
  }

  /** Paused workspaces per environment, for the metrics. */
  pausedWorkspaces(): Promise<Array<{ environment: string; count: number }>> {
    return repo.pausedCounts(this.#ctx.db);
  }

  async resumePayouts(principal: KeyPrincipal) {
    const scope = { workspaceId: principal.workspaceId, environment: principal.environment };
    const outcome = await this.#ctx.db.transaction().execute(async (trx) => {
      const state = await repo.lockBreaker(trx, scope);
      const resumed = resume(state);
      await repo.writeBreaker(trx, scope, resumed.state);
      return resumed;
    });
    const workspace = await this.#workspaces.profile(principal.workspaceId);
    return {
      resumed: outcome.resumed,
      workspace: workspace.name,
      previousStreak: outcome.previousStreak,
      previousReason: outcome.previousReason ?? "",
    };
  }

  async state(principal: KeyPrincipal) {
    const state = await repo.readBreaker(this.#ctx.db, principal);
    return {
      status: state.status,
      failStreak: state.failStreak,
      pausedAt: state.pausedAt?.toISOString() ?? null,
      reason: state.reason,
    };
  }
}

function notSendable(payoutId: string): PayoutNotSendable {
  return new PayoutNotSendable(`payout ${payoutId} is no longer processing: not sent`);
}

function pausedError(state: BreakerState): ApiError {
  return new ApiError(503, "Payouts are paused for this workspace by the circuit breaker", {
    code: "CIRCUIT_BREAKER_OPEN",
    circuitBreaker: true,
    failStreak: state.failStreak,
    pausedAt: state.pausedAt?.toISOString() ?? null,
    resumeAction: RESUME_ACTION,
  });
}
