import { randomUUID } from "node:crypto";
import type { Hex } from "../../chain/network.ts";
import { SimulatedLedger, sandboxTxHash } from "../../chain/simulated/ledger.ts";
import type { AppContext } from "../../context.ts";
import { formatAmount, TOKEN_DECIMALS } from "../../domain/money.ts";
import type { PayoutRequest } from "../../domain/payout-request.ts";
import { coalescedCall } from "../../platform/db/coalesced-write.ts";
import { ApiError, badRequest } from "../../platform/http/errors.ts";
import type { LedgerChannel } from "./channels.ts";
import type { PayoutOutcomes, PayoutResponse, Scope } from "./outcomes.ts";
import * as repo from "./repo.ts";
import { toPayoutView } from "./view.ts";

// Sandbox payouts (D3): recorded, paid from the simulated ledger and completed (with its event)
// in one statement, shared with the sandbox payouts asked for in the same round of I/O. The
// ledger's balance is checked where the money moves (repo.recordSandboxPayouts).

export class SandboxPayouts {
  readonly #ctx: AppContext;
  readonly #outcomes: PayoutOutcomes;
  readonly #record: (payout: repo.SandboxPayout) => Promise<repo.SandboxPayoutResult | Error>;

  constructor(ctx: AppContext, outcomes: PayoutOutcomes) {
    this.#ctx = ctx;
    this.#outcomes = outcomes;
    this.#record = coalescedCall((payouts: readonly repo.SandboxPayout[]) =>
      SimulatedLedger.inDebitRounds(
        payouts,
        (payout) => payout.transfer,
        (round) => repo.recordSandboxPayouts(ctx.db, round),
      ),
    );
  }

  async pay(
    scope: Scope,
    channel: LedgerChannel,
    from: Hex,
    walletType: string,
    request: PayoutRequest,
    now: Date,
  ): Promise<PayoutResponse> {
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
    const fields = repo.newPayout(scope, request, from, walletType, now);
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
      lease_expires_at: null,
      send_claimed_at: null,
    };
    const result = await this.#record({
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
        return this.#outcomes.duplicate(scope, existing);
      }
      case "failure_address": {
        const reverted = SimulatedLedger.resultOf(transfer.reference, "failure_address");
        return this.#outcomes.fail(
          scope,
          result.row,
          reverted.txHash,
          "error" in reverted ? reverted.error : "reverted",
        );
      }
      case "success":
        return this.#outcomes.completed(scope, result.row, result.breaker, completedAt);
    }
  }
}
