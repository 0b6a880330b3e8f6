import type { ChainToken, Hex } from "../../chain/network.ts";
import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { resume } from "../../domain/circuit-breaker.ts";
import { notFound } from "../../domain/errors.ts";
import { formatAmount, NATIVE_TOKEN, TOKEN_DECIMALS } from "../../domain/money.ts";
import type { TransferKindName } from "../../domain/payout-state.ts";
import { Notices } from "../../platform/db/notices.ts";
import { SessionTurns } from "../../platform/db/wallet-lock.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import type { Mailer } from "../../platform/mail/mailer.ts";
import type { Rails } from "../../rails/index.ts";
import type { PaymentsService } from "../payments/service.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import { PayoutAnswers } from "./answers.ts";
import { browsePayouts, type PayoutFilter, type PayoutRecord, payoutOf, payoutsForExport } from "./browse.ts";
import { PayoutCreation } from "./create.ts";
import { PayoutDecisions } from "./decide.ts";
import { type OrderedKinds, TransferKinds } from "./kinds.ts";
import { PayoutLeases } from "./leases.ts";
import { PayoutOutcomes, type PayoutResponse } from "./outcomes.ts";
import { PayoutPersistence } from "./persist.ts";
import { PayoutReconciler } from "./reconciler.ts";
import * as repo from "./repo.ts";
import { SandboxPayoutRecords } from "./sandbox-payouts.ts";
import { PayoutSends } from "./send.ts";
import type { TransferOrder } from "./transfer-order.ts";
import { type PayoutView, toPayoutView } from "./view.ts";

export { type PayoutView, toPayoutView };

// Synchronous payouts (part 4.10, D6) guarded by the circuit breaker (part 3). The payout itself
// is an operation over the Rail port (create.ts: validate → decide → persist → send → finish);
// this service is the module's face: that operation, the history, the breaker's state and
// resume, and the reconciler that finishes payouts no instance is sending any more. Across
// instances, a wallet's balance check and the recording of a payout take turns on a lock in the
// database, which also holds what is already on its way out (funds.ts), and its transactions are
// sent in nonce order (the EOA rail). A payout is recorded before anything is sent, and its
// transaction or user operation before it is broadcast, so a crash can be reconciled and an
// idempotent repeat never sends twice.

export interface PayoutsDependencies {
  workspaces: WorkspacesService;
  payments: Pick<PaymentsService, "unsettledOn">;
  rails: Rails;
  mailer: Mailer;
  /** The transfers other modules order through the payout operation (kinds.ts). */
  kinds: OrderedKinds;
}

export class PayoutsService {
  readonly #ctx: AppContext;
  readonly #workspaces: WorkspacesService;
  readonly #creation: PayoutCreation;
  readonly #reconciler: PayoutReconciler;
  readonly #endings: Notices;
  readonly #kinds: TransferKinds;

  constructor(ctx: AppContext, deps: PayoutsDependencies) {
    this.#ctx = ctx;
    this.#kinds = new TransferKinds(deps.kinds);
    this.#workspaces = deps.workspaces;
    this.#endings = new Notices(ctx.db, "payout_ended", ctx.log);
    const answers = new PayoutAnswers(ctx, this.#endings);
    const outcomes = new PayoutOutcomes(ctx, {
      workspaces: deps.workspaces,
      mailer: deps.mailer,
      answers,
      kinds: this.#kinds,
    });
    // Payouts this process is sending, leased to it; the reconciler leaves them alone.
    const leases = new PayoutLeases(ctx.db, ctx.log);
    const sends = new PayoutSends(ctx, {
      outcomes,
      answers,
      leases,
      persistence: new PayoutPersistence(ctx, {
        sandbox: new SandboxPayoutRecords(ctx, this.#kinds),
        fundsTurns: new SessionTurns(ctx.db, ctx.log),
        payments: deps.payments,
      }),
    });
    this.#creation = new PayoutCreation(ctx, {
      workspaces: deps.workspaces,
      decisions: new PayoutDecisions(ctx, deps.rails),
      sends,
      answers,
    });
    this.#reconciler = new PayoutReconciler(ctx, { outcomes, leases, rails: deps.rails, kinds: this.#kinds });
  }

  /** Stops listening for the endings of payouts (the app's close). */
  close(): Promise<void> {
    return this.#endings.close();
  }

  create(principal: Tenant, body: unknown): Promise<PayoutResponse> {
    return this.#creation.create(principal, body);
  }

  /**
   * Sends a transfer of an ordered kind like a payout (create.ts): its row once it ended or was
   * left to the reconciler; rejects with why nothing was recorded.
   */
  transfer(scope: repo.Scope, order: TransferOrder): Promise<repo.PayoutRow> {
    return this.#creation.transfer(scope, order);
  }

  /** The wallet a transfer would leave (walletType, else the workspace's default): see create.ts. */
  walletFor(
    scope: repo.Scope,
    walletType: "eoa" | "smart_wallet" | null,
  ): Promise<{ walletType: "eoa" | "smart_wallet"; from: Hex }> {
    return this.#creation.walletFor(scope, walletType);
  }

  /** Transfers of the scope by id (any kind); anyone else's are left out. */
  transfersIn(scope: repo.Scope, ids: readonly string[]): Promise<repo.PayoutRow[]> {
    return repo.findAllInScope(this.#ctx.db, scope, ids);
  }

  /** The transfers ordered for a payment (its refunds), oldest first. */
  transfersFor(
    scope: repo.Scope,
    paymentId: string,
    page: { limit: number; offset: number },
  ): Promise<{ rows: repo.PayoutRow[]; total: number }> {
    return repo.transfersFor(this.#ctx.db, scope, paymentId, page);
  }

  /** One transfer of the scope by id (any kind); undefined for anyone else's. */
  findTransfer(scope: repo.Scope, id: string): Promise<repo.PayoutRow | undefined> {
    return repo.findInScope(this.#ctx.db, scope, id);
  }

  /**
   * Which of `hashes` (EOA transactions, smart-wallet operations; lower-case) carried transfers of
   * `kind` that this service recorded: the chain watcher's way to know its own swaps' proceeds.
   */
  recordedOfKind(
    environment: Environment,
    kind: TransferKindName,
    hashes: { txHashes: readonly string[]; userOpHashes: readonly string[] },
  ): Promise<Set<string>> {
    return repo.recordedOfKind(this.#ctx.db, environment, kind, hashes);
  }

  /** Finishes payouts no live instance owns any more, from what the chain says (reconciler.ts). */
  reconcile(environment: Environment): Promise<number> {
    return this.#reconciler.reconcile(environment);
  }

  async history(principal: Tenant, page: { limit: number; offset: number }) {
    const { rows, total } = await repo.listCompleted(this.#ctx.db, principal, page);
    return {
      payouts: rows.map((row) => ({
        txHash: row.tx_hash,
        type: row.token_symbol === NATIVE_TOKEN ? "ETH" : "ERC20",
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

  /** Every payout matching `filter`, newest first, read in keyset batches as consumed (D18). */
  exportPayouts(tenant: Tenant, filter: PayoutFilter): AsyncGenerator<PayoutRecord> {
    return payoutsForExport(this.#ctx.db, tenant, filter);
  }

  /** A keyset page of the tenant's payouts matching `filter`, newest first (the dashboard's list). */
  browse(
    tenant: Tenant,
    filter: PayoutFilter,
    page: { after?: string | undefined; limit: number },
  ): Promise<{ payouts: PayoutRecord[]; next: string | null }> {
    return browsePayouts(this.#ctx.db, tenant, filter, page);
  }

  /** One payout of the tenant, by id; 404 for anyone else's. */
  async get(tenant: Tenant, id: string): Promise<PayoutRecord> {
    const found = await payoutOf(this.#ctx.db, tenant, id);
    if (!found) throw notFound("Payout not found");
    return found;
  }

  /** Paused workspaces per environment, for the metrics. */
  pausedWorkspaces(): Promise<Array<{ environment: string; count: number }>> {
    return repo.pausedCounts(this.#ctx.db);
  }

  async resumePayouts(principal: Tenant) {
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

  async state(principal: Tenant) {
    const state = await repo.readBreaker(this.#ctx.db, principal);
    return {
      status: state.status,
      failStreak: state.failStreak,
      pausedAt: state.pausedAt?.toISOString() ?? null,
      reason: state.reason,
    };
  }
}
