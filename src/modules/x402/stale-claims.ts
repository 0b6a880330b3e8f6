import type { SettleResponse } from "@x402/core/types";
import type { AppContext } from "../../context.ts";
import type { X402Scheme } from "../../domain/x402.ts";
import { staleClaimVerdict, type X402SettleEnd } from "../../domain/x402-settle-state.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import type { PaymentsService } from "../payments/service.ts";
import * as repo from "./repo.ts";

// A settle whose instance stopped between its claim and its answer leaves the claim `settling`.
// A repeat of it (same workspace, same request) that finds it stale ends it from what the
// facilitator wrote before sending anything, the payments of its authorization
// (domain/x402-settle-state.ts staleClaimVerdict), or takes it over to settle afresh when nothing
// was sent. The authorization's nonce is used once on its token (or the sandbox's ledger), so
// even a stopped instance that woke up could not move the money twice.

/** x402's reason for a settlement transaction that did not pay, per scheme. */
const TRANSACTION_FAILED: Record<X402Scheme, string> = {
  exact: "invalid_exact_evm_transaction_failed",
  upto: "invalid_upto_evm_transaction_failed",
};

/** What a stale claim's authorization is, as its request named it. */
export interface StaleSettle {
  claimId: string;
  scheme: X402Scheme;
  /** Our network id, and its CAIP-2 name as the request gave it. */
  network: string;
  caip2: string;
  payer: string;
  nonce: string;
}

export type Recovery =
  /** The claim ended with this answer (a repeat gets it again). */
  | { kind: "answered"; response: SettleResponse }
  /** The claim is the caller's now: nothing was sent, it settles afresh. */
  | { kind: "taken_over" }
  /** Its transaction is on its way, or another request got there first: 409 as before. */
  | { kind: "in_progress" };

export class StaleClaims {
  readonly #ctx: AppContext;
  readonly #payments: PaymentsService;

  constructor(ctx: AppContext, payments: PaymentsService) {
    this.#ctx = ctx;
    this.#payments = payments;
  }

  async recover(tenant: Tenant, stale: StaleSettle): Promise<Recovery> {
    const { network, payer, nonce } = stale;
    const verdict = staleClaimVerdict(
      await this.#payments.x402.ofAuthorization(tenant, { network, payer, nonce }),
    );
    const answer = { payer, network: stale.caip2 as SettleResponse["network"] };
    switch (verdict.kind) {
      case "in_progress":
        return verdict;
      case "settled": {
        const { id, txHash } = verdict.payment;
        const response = { ...answer, success: true, transaction: txHash ?? "", extra: { paymentId: id } };
        return this.#end(stale.claimId, "succeeded", response, id);
      }
      case "failed": {
        const { id, txHash, status } = verdict.payment;
        const response = {
          ...answer,
          success: false,
          errorReason: TRANSACTION_FAILED[stale.scheme],
          errorMessage: `The settlement transaction did not pay payment ${id} (${status})`,
          transaction: txHash ?? "",
        };
        return this.#end(stale.claimId, "failed", response, id);
      }
      case "nothing": {
        for (const payment of verdict.unsent) {
          const failed = await this.#payments.x402.failUnsent(
            tenant,
            payment.id,
            "its settle stopped before the settlement transaction was sent",
          );
          // Its transaction was recorded meanwhile: the instance settling it is alive after all.
          if (!failed) return { kind: "in_progress" };
        }
        const taken = await repo.takeOverStale(this.#ctx.db, stale.claimId);
        return taken ? { kind: "taken_over" } : { kind: "in_progress" };
      }
    }
  }

  async #end(
    claimId: string,
    outcome: X402SettleEnd,
    response: SettleResponse,
    paymentId: string,
  ): Promise<Recovery> {
    const ended = await repo.finishSettle(
      this.#ctx.db,
      claimId,
      outcome,
      { ...response },
      this.#ctx.now(),
      paymentId,
    );
    // Ended meanwhile by its own settle (alive after all): a repeat is answered from that.
    return ended ? { kind: "answered", response } : { kind: "in_progress" };
  }
}
