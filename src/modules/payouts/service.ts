import { randomUUID } from "node:crypto";
import type { Kysely } from "kysely";
import type { OperationOutcome, PreparedOperation } from "../../chain/evm/smart-accounts.ts";
import type { ChainToken, Hex } from "../../chain/network.ts";
import { SimulatedLedger, sandboxTxHash } from "../../chain/simulated/ledger.ts";
import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import {
  type BreakerState,
  decideAttempt,
  PAUSE_AFTER_FAILURES,
  recordFailure,
  recordSuccess,
  resume,
} from "../../domain/circuit-breaker.ts";
import { formatAmount, TOKEN_DECIMALS } from "../../domain/money.ts";
import { type PayoutRequest, validatePayoutRequest } from "../../domain/payout-request.ts";
import { stillToSettle } from "../../domain/unsettled-payments.ts";
import { KeyedQueue } from "../../platform/concurrency/keyed-queue.ts";
import { coalescedLookup } from "../../platform/db/coalesced-lookup.ts";
import { coalescedCall } from "../../platform/db/coalesced-write.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";
import type { KeyPrincipal } from "../../platform/http/auth.ts";
import { ApiError, badRequest, conflict, serviceUnavailable } from "../../platform/http/errors.ts";
import type { Mailer } from "../../platform/mail/mailer.ts";
import type { PaymentsService } from "../payments/service.ts";
import { recordEvents } from "../webhooks/outbox.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import type { LedgerChannel, PayoutChannel, SendingChannel, SendOutcome } from "./channels.ts";
import { type InFlightPayout, InFlightPayouts, stillToTake } from "./in-flight.ts";
import * as repo from "./repo.ts";

// Synchronous payouts (part 4.10, D6) guarded by the circuit breaker (part 3). One workspace
// and environment starts one payout at a time in this process, in nonce order; different
// workspaces run in parallel. A live EOA payout holds that turn only until its transaction is
// broadcast, then waits for its receipt while the next one is signed (a nonce pipeline), as long
// as the breaker has seen no failure; after a failure each payout waits for the one before it,
// so the breaker sees every outcome before the next attempt. The payout row
// is written (processing) before anything is sent, and its transaction is recorded before
// broadcast, so a crash can be reconciled and an idempotent repeat never sends twice.

/**
 * Payouts of one wallet broadcast and not yet mined, at most. Bounds how many can fail after the
 * breaker's third failure: they were all sent before it was seen.
 */
const MAX_IN_FLIGHT_PER_WALLET = 16;

type PayoutResponse = { status: number; body: Record<string, unknown> };

const RESUME_ACTION = "POST /api/v1/workspaces/{id}/resume, or wait 30 minutes after pausedAt";
const WAIT_FOR_ORIGINAL_MS = 60_000;

export interface PayoutView {
  txHash: string | null;
  userOpHash?: string;
  amount: string;
  tokenSymbol: string;
  destinationAddress: string;
  fromAddress: string;
  environment: string;
  status: string;
  description: string | null;
  metadata: Record<string, string>;
}

export function toPayoutView(row: repo.PayoutRow): PayoutView {
  return {
    txHash: row.tx_hash,
    amount: formatAmount(BigInt(row.amount), TOKEN_DECIMALS[row.token_symbol as ChainToken]),
    tokenSymbol: row.token_symbol,
    destinationAddress: row.destination_address,
    fromAddress: row.from_address,
    environment: row.environment,
    status: row.status,
    description: row.description,
    metadata: row.metadata,
    // Smart wallet payouts: txHash is the bundle transaction that carried the operation (D13).
    ...(row.user_op_hash ? { userOpHash: row.user_op_hash } : {}),
  };
}

export class PayoutsService {
  readonly #ctx: AppContext;
  readonly #workspaces: WorkspacesService;
  readonly #payments: Pick<PaymentsService, "unsettledOn">;
  readonly #channels: Partial<Record<Environment, PayoutChannel>>;
  readonly #smartChannels: Partial<Record<Environment, PayoutChannel>>;
  readonly #resend:
    | ((environment: Environment, prepared: PreparedOperation) => Promise<OperationOutcome>)
    | undefined;
  readonly #mailer: Mailer;
  readonly #queue = new KeyedQueue();
  /** Broadcast payouts waiting for their receipts, per workspace and environment. */
  readonly #pipeline = new InFlightPayouts();
  /** Payouts this process is sending right now; the reconciler leaves them alone. */
  readonly #inFlight = new Set<string>();
  /** Breaker reads of payouts arriving together share one query. */
  readonly #breakers: (key: string) => Promise<BreakerState | undefined>;
  /** Payouts recorded together, and completions made together, share one statement each. */
  readonly #insertPayout: (payout: repo.NewPayout) => Promise<repo.PayoutRow | undefined>;
  /** Sandbox payouts asked for together share one statement (see #payFromLedger). */
  readonly #sandboxPayout: (payout: repo.SandboxPayout) => Promise<repo.SandboxPayoutResult | Error>;
  readonly #completePayout: (
    completion: repo.PayoutCompletion,
  ) => Promise<{ row: repo.PayoutRow | undefined; breaker: BreakerState }>;

  constructor(
    ctx: AppContext,
    workspaces: WorkspacesService,
    payments: Pick<PaymentsService, "unsettledOn">,
    channels: Partial<Record<Environment, PayoutChannel>>,
    mailer: Mailer,
    smartChannels: Partial<Record<Environment, PayoutChannel>> = {},
    resend?: (environment: Environment, prepared: PreparedOperation) => Promise<OperationOutcome>,
  ) {
    this.#smartChannels = smartChannels;
    this.#resend = resend;
    this.#ctx = ctx;
    this.#workspaces = workspaces;
    this.#payments = payments;
    this.#channels = channels;
    this.#mailer = mailer;
    this.#breakers = coalescedLookup((keys: readonly string[]) => repo.readBreakers(ctx.db, keys));
    this.#insertPayout = coalescedCall((payouts: readonly repo.NewPayout[]) =>
      repo.insertPayouts(ctx.db, payouts),
    );
    this.#sandboxPayout = coalescedCall((payouts: readonly repo.SandboxPayout[]) =>
      SimulatedLedger.inDebitRounds(
        payouts,
        (payout) => payout.transfer,
        (round) => repo.recordSandboxPayouts(ctx.db, round),
      ),
    );
    this.#completePayout = coalescedCall((completions: readonly repo.PayoutCompletion[]) =>
      repo.completePayouts(ctx.db, completions),
    );
  }

  async create(principal: KeyPrincipal, body: unknown): Promise<PayoutResponse> {
    const validated = validatePayoutRequest(body);
    if (!validated.ok) throw badRequest(validated.message);
    const request = validated.value;
    if (!this.#channels[principal.environment]) throw serviceUnavailable("Live network is not configured");

    if (request.idempotencyKey) {
      const existing = await repo.findByIdempotencyKey(this.#ctx.db, principal, request.idempotencyKey);
      if (existing) return this.#duplicate(principal, existing);
    }

    const scopeKey = `${principal.workspaceId}:${principal.environment}`;
    // The queue's task hands back the payout's result wrapped, never as a bare promise: a promise
    // returned from it would be adopted, and the wallet's turn would last until the receipt.
    const queued = await this.#queue.run(scopeKey, async (): Promise<{ result: Promise<PayoutResponse> }> => {
      const scope = { workspaceId: principal.workspaceId, environment: principal.environment };
      const now = this.#ctx.now();

      // The breaker decides first: while paused no balance is read and nothing is sent. After a
      // failure, the payouts still in flight finish first (they may fail too), so that the
      // breaker has counted every earlier outcome when it decides on this one.
      await this.#pipeline.below(scopeKey, MAX_IN_FLIGHT_PER_WALLET);
      // The workspace is read meanwhile (a read; nothing is decided on it while paused).
      const profile = this.#workspaces.profile(principal.workspaceId);
      profile.catch(() => undefined); // awaited below; not an unhandled rejection meanwhile
      let breaker = await this.#decide(scope, now);
      if (breaker.allowed && breaker.failStreak > 0 && this.#pipeline.size(scopeKey) > 0) {
        await this.#pipeline.drain(scopeKey);
        breaker = await this.#decide(scope, now);
      }
      if (!breaker.allowed) throw this.#pausedError(breaker.state);

      const workspace = await profile;
      if (!workspace.eoaAddress) throw badRequest("No workspace wallet found. Provision a wallet first.");
      const walletType =
        request.walletType ?? (workspace.defaultWalletType === "smart_wallet" ? "smart_wallet" : "eoa");
      const channel =
        walletType === "smart_wallet"
          ? this.#smartChannels[principal.environment]
          : this.#channels[principal.environment];
      if (!channel) {
        throw serviceUnavailable(`Smart wallets are not configured for ${principal.environment}: no bundler`);
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
      const token = request.tokenSymbol;
      const decimals = TOKEN_DECIMALS[token];

      if (channel.kind === "ledger") {
        // Sandbox: nothing to send; the balance is checked where the money moves.
        const paid = this.#payFromLedger(principal, channel, from, walletType, request, now);
        await paid.catch(() => undefined);
        return { result: paid };
      }

      const signingKey = () => this.#workspaces.signingKey(scope.workspaceId, owner);
      // Prepared while the balance is checked and the payout recorded; sent only after both.
      const prepared = channel.prepare?.(
        signingKey,
        request.destinationAddress as Hex,
        token,
        request.amount,
      );
      prepared?.catch(() => undefined); // handed to submit, which reports its failure
      // Payouts in flight are on the balance the chain reports until their transactions are
      // mined; the snapshot is taken before the balance is read (InFlightPayouts.snapshot).
      const inFlight = this.#pipeline.snapshot(scopeKey);
      const gasInEth = channel.gasRequired !== undefined && token !== "ETH";
      const gasNeeded = channel.gasRequired ? channel.gasRequired(token) : null;
      gasNeeded?.catch(() => undefined); // awaited below; not an unhandled rejection meanwhile
      // The money of payments received on the wallet and not settled yet is on the balance too,
      // and leaves for the merchant and the treasury. Read before the balance as well, so that a
      // settlement mined meanwhile is at worst subtracted twice (a refusal), never not at all.
      // So is what earlier payouts not in a nonce pipeline (smart wallet payouts) may still take:
      // one answered 202 (sent, its outcome unknown) can be included at any time.
      const [unsettled, processing] = await Promise.all([
        this.#payments.unsettledOn(principal.environment, from),
        channel.pipelined ? undefined : repo.processingTotals(this.#ctx.db, principal.environment, from),
      ]);
      const [funds, gas] = await Promise.all([
        channel.funds(from, gasInEth ? [token, "ETH"] : [token]),
        gasNeeded,
      ]);
      const stillToLeave = (of: ChainToken) =>
        stillToTake(inFlight, of, funds.minedNonce) +
        stillToSettle(unsettled, of, funds.minedNonce) +
        (processing?.get(of) ?? 0n);
      const balance = (funds.balances[token] ?? 0n) - stillToLeave(token);
      if (balance < request.amount) {
        throw badRequest("Insufficient balance", {
          available: formatAmount(balance < 0n ? 0n : balance, decimals),
          requested: formatAmount(request.amount, decimals),
          tokenSymbol: token,
        });
      }
      if (gas !== null) {
        const ethBalance = gasInEth
          ? (funds.balances.ETH ?? 0n) - stillToLeave("ETH")
          : balance - request.amount;
        if (ethBalance < gas) {
          const shown = ethBalance < 0n ? 0n : ethBalance;
          throw badRequest("Insufficient ETH for gas", {
            code: "INSUFFICIENT_GAS",
            ethBalance: formatAmount(shown, 18),
            required: formatAmount(gas, 18),
            action: `Send at least ${formatAmount(gas - shown, 18)} ETH to ${from}, or wait for the automatic gas top-up`,
          });
        }
      }
      const payout = await this.#insertPayout({
        scope,
        idempotencyKey: request.idempotencyKey,
        tokenSymbol: token,
        amount: request.amount,
        destinationAddress: request.destinationAddress,
        fromAddress: from,
        walletType,
        description: request.description,
        metadata: request.metadata,
        createdAt: now,
      });
      if (!payout) {
        // A concurrent request with the same idempotencyKey got there first.
        const existing = await repo.findByIdempotencyKey(this.#ctx.db, scope, request.idempotencyKey ?? "");
        if (!existing) throw new ApiError(500, "Payout failed");
        return { result: this.#duplicate(principal, existing) };
      }
      let reservation: InFlightPayout | undefined;
      // The callback runs after `submit` resolves, so after `reservation` is set below.
      const sent = this.#send(scope, payout, channel, signingKey, now, prepared, (nonce) => {
        if (reservation) reservation.nonce = nonce;
      });
      if (channel.pipelined && breaker.failStreak === 0) {
        // The wallet's next payout may be checked and signed (the next nonce) while this one is
        // signed, broadcast and mined: a nonce pipeline. What it will take from the wallet stays
        // reserved until its transaction is mined.
        const amounts: Partial<Record<ChainToken, bigint>> = { [token]: request.amount };
        if (gas !== null) amounts.ETH = (amounts.ETH ?? 0n) + gas;
        reservation = { amounts, done: sent };
        this.#pipeline.add(scopeKey, reservation);
        return { result: sent };
      }
      // After a failure (and where there is no receipt to wait for) the next payout waits for
      // this one's outcome.
      await sent.catch(() => undefined);
      return { result: sent };
    });
    return queued.result;
  }

  /**
   * A sandbox payout: recorded, paid from the simulated ledger and completed (with its event) in
   * one statement, shared with the sandbox payouts asked for in the same round of I/O.
   */
  async #payFromLedger(
    principal: KeyPrincipal,
    channel: LedgerChannel,
    from: Hex,
    walletType: string,
    request: PayoutRequest,
    now: Date,
  ): Promise<PayoutResponse> {
    const scope = { workspaceId: principal.workspaceId, environment: principal.environment };
    const id = randomUUID();
    const token = request.tokenSymbol;
    const { transfer, userOpHash } = channel.transferOf(
      id,
      from,
      request.destinationAddress as Hex,
      token,
      request.amount,
    );
    const completedAt = this.#ctx.now();
    const fields = {
      scope,
      idempotencyKey: request.idempotencyKey,
      tokenSymbol: token,
      amount: request.amount,
      destinationAddress: request.destinationAddress,
      fromAddress: from,
      walletType,
      description: request.description,
      metadata: request.metadata,
      createdAt: now,
    };
    // The event's data: the payout as it stands once completed.
    const completed: repo.PayoutRow = {
      id,
      workspace_id: scope.workspaceId,
      environment: scope.environment,
      idempotency_key: fields.idempotencyKey,
      status: "completed",
      token_symbol: token,
      amount: request.amount.toString(),
      destination_address: fields.destinationAddress,
      from_address: from,
      wallet_type: fields.walletType,
      description: fields.description,
      metadata: fields.metadata,
      tx_hash: sandboxTxHash(transfer.reference),
      user_op_hash: userOpHash,
      user_operation: userOpHash ? "" : null,
      error: null,
      created_at: now,
      completed_at: completedAt,
    };
    const result = await this.#sandboxPayout({
      ...fields,
      id,
      transfer,
      userOpHash,
      completedAt,
      payload: { ...toPayoutView(completed) },
    });
    if (result instanceof Error) throw result;
    switch (result.outcome) {
      case "insufficient": {
        const decimals = TOKEN_DECIMALS[token];
        throw badRequest("Insufficient balance", {
          available: formatAmount(result.balance < 0n ? 0n : result.balance, decimals),
          requested: formatAmount(request.amount, decimals),
          tokenSymbol: token,
        });
      }
      case "duplicate": {
        // A concurrent request with the same idempotencyKey got there first.
        const existing = await repo.findByIdempotencyKey(this.#ctx.db, scope, request.idempotencyKey ?? "");
        if (!existing) throw new ApiError(500, "Payout failed");
        return this.#duplicate(principal, existing);
      }
      case "failure_address": {
        const reverted = SimulatedLedger.resultOf(transfer.reference, "failure_address");
        return this.#fail(
          scope,
          result.row,
          reverted.txHash,
          "error" in reverted ? reverted.error : "reverted",
        );
      }
      case "success":
        return this.#completed(scope, result.row, result.breaker, completedAt);
    }
  }

  /** Signs and sends a recorded payout, waits for its outcome and records it. */
  async #send(
    scope: { workspaceId: string; environment: Environment },
    payout: repo.PayoutRow,
    channel: SendingChannel,
    signingKey: () => Promise<Hex>,
    now: Date,
    prepared: Promise<PreparedOperation> | undefined,
    /** Told the nonce of the payout's transaction once it is broadcast. */
    onBroadcast?: (nonce: number | undefined) => void,
  ): Promise<PayoutResponse> {
    this.#inFlight.add(payout.id);
    try {
      let outcome: SendOutcome;
      try {
        const submission = await channel.submit(
          payout.id,
          signingKey,
          payout.from_address as Hex,
          payout.destination_address as Hex,
          payout.token_symbol as ChainToken,
          BigInt(payout.amount),
          (userOpHash, operation) => repo.recordUserOperation(this.#ctx.db, payout.id, userOpHash, operation),
          prepared,
        );
        onBroadcast?.(submission.nonce);
        try {
          outcome = await submission.outcome;
        } catch (err) {
          // Broadcast, outcome unknown: the reconciler finishes it from the chain.
          this.#ctx.log.error({ err, payoutId: payout.id }, "waiting for the payout's receipt failed");
          outcome = { txHash: "", status: "pending", error: null };
        }
      } catch (err) {
        this.#ctx.log.error({ err, payoutId: payout.id }, "payout send failed");
        outcome = {
          txHash: "",
          status: "reverted",
          error: (err as Error).message.split("\n")[0] ?? "send failed",
        };
      }
      return await this.#finish(scope, payout, outcome, now);
    } finally {
      this.#inFlight.delete(payout.id);
    }
  }

  async #decide(
    scope: { workspaceId: string; environment: Environment },
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

  #finish(
    scope: { workspaceId: string; environment: Environment },
    payout: repo.PayoutRow,
    outcome: SendOutcome,
    now: Date,
  ): Promise<PayoutResponse> {
    if (outcome.status === "pending") {
      // Broadcast but not mined in time: the reconciler finishes it; the caller sees it in flight.
      return Promise.resolve({
        status: 202,
        body: {
          payout: {
            ...toPayoutView(payout),
            txHash: outcome.txHash || null,
            ...(outcome.userOpHash ? { userOpHash: outcome.userOpHash } : {}),
          },
          timestamp: now.toISOString(),
        },
      });
    }
    return outcome.status === "success"
      ? this.#complete(scope, payout, outcome.txHash)
      : this.#fail(scope, payout, outcome.txHash || null, outcome.error ?? "transfer failed");
  }

  async #complete(
    scope: { workspaceId: string; environment: Environment },
    payout: repo.PayoutRow,
    txHash: string,
  ) {
    const at = this.#ctx.now();
    // The payout and its event in one statement (shared with the completions made together).
    // Most successes follow successes: only a streak to reset (a failure came first) takes the
    // breaker's lock, right after; a crash between the two leaves that streak as it was, which
    // the next success resets.
    const { row, breaker } = await this.#completePayout({
      id: payout.id,
      txHash,
      at,
      payload: { ...toPayoutView(payout) },
    });
    if (!row) {
      return {
        status: 200,
        body: {
          payout: { ...toPayoutView(payout), txHash, status: "completed" },
          timestamp: at.toISOString(),
        },
      };
    }
    return this.#completed(scope, row, breaker, at);
  }

  /** The answer for a completed payout; resets the breaker's streak where a failure came first. */
  async #completed(
    scope: { workspaceId: string; environment: Environment },
    row: repo.PayoutRow,
    breaker: BreakerState,
    at: Date,
  ): Promise<PayoutResponse> {
    if (recordSuccess(breaker) !== breaker) {
      await this.#ctx.db.transaction().execute(async (trx) => {
        const state = await repo.lockBreaker(trx, scope);
        await repo.writeBreaker(trx, scope, recordSuccess(state));
      });
    }
    return {
      status: 200,
      body: {
        payout: { ...toPayoutView(row), txHash: row.tx_hash, status: "completed" },
        timestamp: at.toISOString(),
      },
    };
  }

  async #fail(
    scope: { workspaceId: string; environment: Environment },
    payout: repo.PayoutRow,
    txHash: string | null,
    detail: string,
  ): Promise<never> {
    const at = this.#ctx.now();
    const result = await this.#ctx.db.transaction().execute(async (trx) => {
      const done = await repo.finishPayout(trx, payout.id, { status: "failed", txHash, error: detail, at });
      const state = await repo.lockBreaker(trx, scope);
      const failure = recordFailure(state, detail, at);
      await repo.writeBreaker(trx, scope, failure.state);
      if (done)
        await this.#event(trx, done, "payout.failed", {
          error: detail,
          failStreak: failure.state.failStreak,
        });
      return failure;
    });
    if (result.tripped) {
      await this.#notifyPaused(scope, result.state);
      throw new ApiError(503, "Payouts paused by the circuit breaker", {
        code: "CIRCUIT_BREAKER_OPEN",
        circuitBreaker: true,
        detail,
        failStreak: result.state.failStreak,
        remainingBeforePause: 0,
        pausedAt: result.state.pausedAt?.toISOString() ?? null,
        resumeAction: RESUME_ACTION,
      });
    }
    throw new ApiError(500, "Payout failed", {
      code: "PAYOUT_FAILED",
      detail,
      failStreak: result.state.failStreak,
      remainingBeforePause: result.remainingBeforePause,
      circuitBreaker: false,
    });
  }

  async #duplicate(principal: KeyPrincipal, existing: repo.PayoutRow): Promise<PayoutResponse> {
    let row = existing;
    const deadline = Date.now() + WAIT_FOR_ORIGINAL_MS;
    while (row.status === "processing" && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      row = (await repo.findByIdempotencyKey(this.#ctx.db, principal, existing.idempotency_key ?? "")) ?? row;
    }
    if (row.status === "completed") {
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
    if (row.status === "processing") throw conflict("A payout with this idempotencyKey is still in progress");
    throw conflict("idempotencyKey already used by a payout that failed", {
      payout: { ...toPayoutView(row), error: row.error },
    });
  }

  #pausedError(state: BreakerState): ApiError {
    return new ApiError(503, "Payouts are paused for this workspace by the circuit breaker", {
      code: "CIRCUIT_BREAKER_OPEN",
      circuitBreaker: true,
      failStreak: state.failStreak,
      pausedAt: state.pausedAt?.toISOString() ?? null,
      resumeAction: RESUME_ACTION,
    });
  }

  async #notifyPaused(
    scope: { workspaceId: string; environment: Environment },
    state: BreakerState,
  ): Promise<void> {
    try {
      const workspace = await this.#workspaces.get(scope.workspaceId);
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

  async #event(
    trx: Kysely<DatabaseSchema>,
    row: repo.PayoutRow,
    type: string,
    extra: Record<string, unknown>,
  ) {
    await recordEvents(trx, [
      {
        workspaceId: row.workspace_id,
        environment: row.environment as Environment,
        type,
        payload: { ...toPayoutView(row), ...extra },
      },
    ]);
  }

  /**
   * Finishes payouts left `processing` by a stopped process, from what the chain says about their
   * recorded transaction (the sender has already rebroadcast any that were never mined). A payout
   * with no recorded transaction was never sent: it fails without counting toward the breaker.
   */
  async reconcile(environment: Environment): Promise<number> {
    const open = await repo.processingPayouts(this.#ctx.db, environment, this.#ctx.now());
    let finished = 0;
    for (const payout of open) {
      if (this.#inFlight.has(payout.id)) continue;
      const tx = await this.#ctx.db
        .selectFrom("chain_transactions")
        .select(["tx_hash", "status", "error"])
        .where("payout_id", "=", payout.id)
        .executeTakeFirst();
      const scope = { workspaceId: payout.workspace_id, environment };
      if (payout.user_operation && this.#resend) {
        // A smart wallet payout: send the recorded operation again (a no-op if it was included).
        const outcome = await this.#resend(environment, {
          userOpHash: payout.user_op_hash as Hex,
          serialized: payout.user_operation,
        });
        if (outcome.status === "success") await this.#complete(scope, payout, outcome.txHash);
        else if (outcome.status === "reverted") {
          await this.#fail(scope, payout, outcome.txHash, outcome.error).catch(() => undefined);
        }
        finished += outcome.status === "pending" ? 0 : 1;
        continue;
      }
      if (tx?.status === "signed") continue; // still waiting for its receipt
      if (tx?.status === "mined") {
        await this.#complete(scope, payout, tx.tx_hash);
      } else if (tx?.status === "failed" || tx?.status === "rejected") {
        await this.#fail(scope, payout, tx.tx_hash, tx.error ?? "transaction reverted").catch(
          () => undefined,
        );
      } else {
        await repo.finishPayout(this.#ctx.db, payout.id, {
          status: "failed",
          txHash: null,
          error: "not sent: the process stopped before broadcasting",
          at: this.#ctx.now(),
        });
      }
      finished++;
    }
    return finished;
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
