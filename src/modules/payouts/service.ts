import { randomUUID } from "node:crypto";
import type { ChainToken } from "../../chain/network.ts";
import type { AppContext } from "../../context.ts";
import { badRequest, notFound } from "../../domain/errors.ts";
import { formatAmount, NATIVE_TOKEN, TOKEN_DECIMALS } from "../../domain/money.ts";
import { validatePayoutRequest } from "../../domain/payout-request.ts";
import { Notices } from "../../platform/db/notices.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import type { NetworkDirectory } from "../networks/directory.ts";
import type { TransfersService } from "../transfers/service.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import { PayoutAnswers, type PayoutResponse } from "./answers.ts";
import { browsePayouts, type PayoutFilter, type PayoutRecord, payoutOf, payoutsForExport } from "./browse.ts";
import { type PayoutView, toPayoutView } from "./view.ts";

export { type PayoutView, toPayoutView };

// Synchronous payouts (part 4.10, D6) guarded by the circuit breaker (part 3): the payouts
// module is an orderer of the transfer engine (modules/transfers). A payout request becomes an
// order, `transfers.run` moves it, and its outcome is answered here (answers.ts: 200, 202, the
// breaker-counted failure, the repeat of an idempotencyKey). Beside it: the history, the list and
// export, and the breaker's state and resume.

export class PayoutsService {
  readonly #directory: NetworkDirectory;
  readonly #workspaces: WorkspacesService;
  readonly #transfers: TransfersService;
  readonly #answers: PayoutAnswers;
  readonly #endings: Notices;

  constructor(ctx: AppContext, deps: { workspaces: WorkspacesService; transfers: TransfersService }) {
    this.#directory = ctx.directory;
    this.#workspaces = deps.workspaces;
    this.#transfers = deps.transfers;
    this.#endings = new Notices(ctx.db, "payout_ended", ctx.log);
    this.#answers = new PayoutAnswers(ctx, this.#endings, deps.transfers);
  }

  /** Stops listening for the endings of payouts (the app's close). */
  close(): Promise<void> {
    return this.#endings.close();
  }

  /** POST /api/v1/payouts: validate, answer a repeated key from its original, else order it. */
  async create(principal: Tenant, body: unknown): Promise<PayoutResponse> {
    const validated = validatePayoutRequest(body);
    if (!validated.ok) throw badRequest(validated.message);
    const request = validated.value;
    const network = this.#directory.resolveIn(principal.environment, body);
    const scope = { workspaceId: principal.workspaceId, environment: principal.environment };
    this.#transfers.assertConfigured(scope);
    if (request.idempotencyKey) {
      const existing = await this.#answers.original(scope, request.idempotencyKey);
      if (existing) return this.#answers.duplicate(existing);
    }
    const outcome = await this.#transfers.run({
      id: randomUUID(),
      kind: "payout",
      scope,
      tokenSymbol: request.tokenSymbol,
      amount: request.amount,
      destinationAddress: request.destinationAddress,
      walletType: request.walletType,
      network,
      idempotencyKey: request.idempotencyKey,
      description: request.description,
      metadata: request.metadata,
    });
    return this.#answers.of(scope, outcome);
  }

  async history(principal: Tenant, page: { limit: number; offset: number }) {
    const { rows, total } = await this.#transfers.completed(principal, "payout", page);
    return {
      payouts: rows.map((row) => ({
        txHash: row.tx_hash,
        type: row.token_symbol === NATIVE_TOKEN ? ("ETH" as const) : ("ERC20" as const),
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
    return payoutsForExport(this.#transfers, tenant, filter);
  }

  /** A keyset page of the tenant's payouts matching `filter`, newest first (the dashboard's list). */
  browse(
    tenant: Tenant,
    filter: PayoutFilter,
    page: { after?: string | undefined; limit: number },
  ): Promise<{ payouts: PayoutRecord[]; next: string | null }> {
    return browsePayouts(this.#transfers, tenant, filter, page);
  }

  /** One payout of the tenant, by id; 404 for anyone else's. */
  async get(tenant: Tenant, id: string): Promise<PayoutRecord> {
    const found = await payoutOf(this.#transfers, tenant, id);
    if (!found) throw notFound("Payout not found");
    return found;
  }

  async resumePayouts(principal: Tenant) {
    const scope = { workspaceId: principal.workspaceId, environment: principal.environment };
    const outcome = await this.#transfers.resumeBreaker(scope);
    const workspace = await this.#workspaces.profile(principal.workspaceId);
    return {
      resumed: outcome.resumed,
      workspace: workspace.name,
      previousStreak: outcome.previousStreak,
      previousReason: outcome.previousReason ?? "",
    };
  }

  async state(principal: Tenant) {
    const state = await this.#transfers.breaker(principal);
    return {
      status: state.status,
      failStreak: state.failStreak,
      pausedAt: state.pausedAt?.toISOString() ?? null,
      reason: state.reason,
    };
  }
}
