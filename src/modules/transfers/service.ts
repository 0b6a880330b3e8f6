import type { Hex, OnNetwork } from "../../chain/network.ts";
import type { AppContext } from "../../context.ts";
import { type BreakerState, resume } from "../../domain/circuit-breaker.ts";
import type { PayoutStatus, TransferKindName } from "../../domain/payout-state.ts";
import { SessionTurns } from "../../platform/db/wallet-lock.ts";
import type { Mailer } from "../../platform/mail/mailer.ts";
import type { Rails } from "../../rails/index.ts";
import type { MoveOutcome } from "../../rails/rail.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import * as breakers from "./breaker-repo.ts";
import { TransferDecisions } from "./decide.ts";
import { TransferEndings } from "./finish.ts";
import type { HeldMoney } from "./funds.ts";
import { type OrderedKinds, TransferKinds } from "./kinds.ts";
import { TransferLeases } from "./leases.ts";
import * as lists from "./list-repo.ts";
import type { TransferOrder, TransferOutcome, WalletType } from "./order.ts";
import { TransferPersistence } from "./persist.ts";
import { TransferReconciler } from "./reconciler.ts";
import * as repo from "./repo.ts";
import { TransferRuns } from "./run.ts";
import { SandboxTransferRecords } from "./sandbox-records.ts";
import { TransferSends } from "./send.ts";

// The one engine that moves money out of a workspace wallet (payouts, refunds, returns, swaps,
// settlements):
// `run(order)` takes an order through validate → decide → persist → send → finish (run.ts) and
// resolves with a transfer outcome (order.ts), never an HTTP answer; each orderer maps it to its
// own resource at its edge. Guarded by the circuit breaker (part 3) for every kind a merchant
// orders (not settlements: domain/payout-state.ts). Across
// instances, a wallet's balance check and the recording of a transfer take turns on a lock in the
// database, which also holds what is already on its way out (funds.ts), and its transactions are
// sent in nonce order (the EOA rail). A transfer is recorded before anything is sent, and its
// transaction or user operation before it is broadcast, so a crash can be reconciled
// (reconciler.ts) and an idempotent repeat never sends twice.

export type Scope = repo.Scope;

export interface TransfersDependencies {
  workspaces: WorkspacesService;
  payments: HeldMoney;
  rails: Rails;
  mailer: Mailer;
  /** The kinds other modules order (kinds.ts), described by their orderers. */
  kinds: OrderedKinds;
}

export class TransfersService {
  readonly #ctx: AppContext;
  readonly #runs: TransferRuns;
  readonly #reconciler: TransferReconciler;

  constructor(ctx: AppContext, deps: TransfersDependencies) {
    this.#ctx = ctx;
    const kinds = new TransferKinds(deps.kinds);
    const endings = new TransferEndings(ctx, {
      workspaces: deps.workspaces,
      mailer: deps.mailer,
      kinds,
      rails: deps.rails,
    });
    // Transfers this process is sending, leased to it; the reconciler leaves them alone.
    const leases = new TransferLeases(ctx.db, ctx.log, ctx.config.transferLeaseSeconds);
    const sends = new TransferSends(ctx, {
      outcomes: endings,
      leases,
      persistence: new TransferPersistence(ctx, {
        sandbox: new SandboxTransferRecords(ctx, kinds, deps.payments),
        fundsTurns: new SessionTurns(ctx.db, ctx.log),
        payments: deps.payments,
      }),
    });
    this.#runs = new TransferRuns(ctx, {
      workspaces: deps.workspaces,
      decisions: new TransferDecisions(ctx, deps.rails),
      sends,
      endings,
      payments: deps.payments,
    });
    this.#reconciler = new TransferReconciler(ctx, { outcomes: endings, leases, rails: deps.rails, kinds });
  }

  /** Moves what `order` asks for; resolves with how it ended (or that it is on its way). */
  run(order: TransferOrder): Promise<TransferOutcome> {
    return this.#runs.run(order);
  }

  /** The wallet a transfer would leave (walletType, else the workspace's default), or the refusal. */
  walletFor(
    scope: Scope,
    network: string | null,
    walletType: WalletType | null,
  ): Promise<{ walletType: WalletType; from: Hex }> {
    return this.#runs.walletFor(scope, network, walletType);
  }

  /** Throws the refusal when the scope's environment has no rail at all (no live network). */
  assertConfigured(scope: Scope): void {
    this.#runs.assertConfigured(scope);
  }

  /**
   * What each leg of an ended transfer came to (its transaction, whether mined), as its rail
   * recorded them (a settlement's legs, for its payment's record); `purposes` name the legs of
   * a user operation.
   */
  legsOf(row: repo.TransferRow, purposes: readonly string[]): Promise<MoveOutcome["legs"]> {
    return this.#reconciler.legsOf(row, purposes);
  }

  /** One transfer by id, whatever its scope (its orderer found its id under its own key). */
  byId(id: string): Promise<repo.TransferRow | undefined> {
    return repo.findById(this.#ctx.db, id);
  }

  /** Transfers of the scope by id (any kind); anyone else's are left out. */
  transfersIn(scope: Scope, ids: readonly string[]): Promise<repo.TransferRow[]> {
    return repo.findAllInScope(this.#ctx.db, scope, ids);
  }

  /** The transfers ordered for a payment (its refunds), oldest first. */
  transfersFor(
    scope: Scope,
    paymentId: string,
    kind: TransferKindName,
    page: { limit: number; offset: number },
  ): Promise<{ rows: repo.TransferRow[]; total: number }> {
    return repo.transfersFor(this.#ctx.db, scope, paymentId, kind, page);
  }

  /** One transfer of the scope by id (any kind); undefined for anyone else's. */
  findTransfer(scope: Scope, id: string): Promise<repo.TransferRow | undefined> {
    return repo.findInScope(this.#ctx.db, scope, id);
  }

  /** A payout recorded by an instance older than migration 018, under the key on its row. */
  byIdempotencyKey(scope: Scope, key: string): Promise<repo.TransferRow | undefined> {
    return repo.findByIdempotencyKey(this.#ctx.db, scope, key);
  }

  /**
   * Up to `limit` transfers of `kind` of the scope (of `status` and on `network`, when given),
   * newest first, after the keyset position `after`: an orderer's lists and exports (payouts').
   */
  listed(
    scope: Scope,
    kind: TransferKindName,
    only: { status?: PayoutStatus | undefined; network?: string | undefined },
    after: { createdAt: string; id: string } | null,
    limit: number,
  ): Promise<lists.KeyedTransferRow[]> {
    return lists.transfersAfter(this.#ctx.db, scope, kind, only, after, limit);
  }

  /** One transfer of `kind` of the scope by id (lower-case UUID), with its keyset position. */
  listedById(scope: Scope, kind: TransferKindName, id: string): Promise<lists.KeyedTransferRow | undefined> {
    return lists.transferById(this.#ctx.db, scope, kind, id);
  }

  /** Completed transfers of `kind` of the scope, newest first, by offset. */
  completed(scope: Scope, kind: TransferKindName, page: { limit: number; offset: number }) {
    return lists.listCompleted(this.#ctx.db, scope, kind, page);
  }

  /**
   * Which of `hashes` (EOA transactions, smart-wallet operations; lower-case) carried transfers of
   * `kind` that this engine recorded: the chain watcher's way to know its own swaps' proceeds.
   */
  recordedOfKind(
    on: OnNetwork,
    kind: TransferKindName,
    hashes: { txHashes: readonly string[]; userOpHashes: readonly string[] },
  ): Promise<Set<string>> {
    return repo.recordedOfKind(this.#ctx.db, on, kind, hashes);
  }

  /** Finishes transfers no live instance owns any more, from what the chain says (reconciler.ts). */
  reconcile(on: OnNetwork): Promise<number> {
    return this.#reconciler.reconcile(on);
  }

  /** The scope's circuit breaker as it stands. */
  breaker(scope: Scope): Promise<BreakerState> {
    return breakers.readBreaker(this.#ctx.db, scope);
  }

  /** Resumes the scope's transfers paused by the breaker (a no-op while active). */
  resumeBreaker(scope: Scope): Promise<ReturnType<typeof resume>> {
    return this.#ctx.db.transaction().execute(async (trx) => {
      const state = await breakers.lockBreaker(trx, scope);
      const resumed = resume(state);
      await breakers.writeBreaker(trx, scope, resumed.state);
      return resumed;
    });
  }

  /** Paused workspaces per environment, for the metrics. */
  pausedWorkspaces(): Promise<Array<{ environment: string; count: number }>> {
    return breakers.pausedCounts(this.#ctx.db);
  }
}
