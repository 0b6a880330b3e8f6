import { sql } from "kysely";
import type { ChainToken } from "../../chain/network.ts";
import { useAuthorization } from "../../chain/simulated/authorizations.ts";
import { SimulatedLedger, sandboxTxHash } from "../../chain/simulated/ledger.ts";
import type { AppContext } from "../../context.ts";
import { badRequest, notFound } from "../../domain/errors.ts";
import { formatAmount, TOKEN_DECIMALS, type TokenSymbol } from "../../domain/money.ts";
import { type PaymentStatus, transition } from "../../domain/payment-state.ts";
import { MAX_DESCRIPTION } from "../../domain/validation.ts";
import { x402PaymentExpiry } from "../../domain/x402.ts";
import type { AuthorizationPayment } from "../../domain/x402-settle-state.ts";
import type { Db } from "../../platform/db/database.ts";
import type { Fence } from "../../platform/db/fences.ts";
import type { PaymentRow } from "../../platform/db/schema.ts";
import type { X402Origin } from "../../platform/db/schema-x402.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import type { Built, PaymentCreation } from "./create.ts";
import * as repo from "./repo.ts";
import { applyTransition } from "./transitions.ts";
import { type PaymentView, toPaymentView } from "./view.ts";

// Payments settled through the x402 facilitator (D23, modules/x402). Each is a crypto payment of
// the usual lifecycle, built by the same creation steps as any other (its workspace's fee,
// splits, settlement address), with its x402 origin:
// - live: written pending before the facilitator sends the payer's authorized transfer; the chain
//   watcher detects it by that transaction (incoming/chain-repo.ts), then it is confirmed and
//   forwarded like any payment;
// - sandbox: the payer's transfer on the simulated ledger (its authorization used once), and the
//   payment settled at once (D5), in one transaction. The payer's whole amount lands in the
//   receiving wallet, so only the splits' parts are credited besides.

export interface X402PaymentInput {
  network: string;
  token: ChainToken;
  /** The authorized amount, in the token's smallest unit. */
  amount: bigint;
  /** The payee the authorization names: one of the workspace's receiving wallets. */
  payTo: string;
  walletType: "eoa" | "smart_wallet";
  origin: X402Origin;
  /** The authorization's validBefore (unix seconds). */
  validBefore: bigint;
}

export type LedgerSettlement =
  | { status: "settled"; payment: PaymentView; txHash: string }
  | { status: "refused"; reason: "nonce_used" | "insufficient_balance" };

export class X402Payments {
  readonly #ctx: AppContext;
  readonly #creation: PaymentCreation;

  constructor(ctx: AppContext, creation: PaymentCreation) {
    this.#ctx = ctx;
    this.#creation = creation;
  }

  /** Live: the pending payment the facilitator's transfer will pay, written before it is sent. */
  async open(tenant: Tenant, input: X402PaymentInput): Promise<PaymentView> {
    const built = await this.#built(tenant, input);
    await repo.writeNewPayments(this.#ctx.db, [built.write]);
    this.#ctx.metrics.paymentsMoved([built.write.row], "pending");
    return built.body.payment;
  }

  /**
   * What the facilitator's transaction record carries for a pending x402 payment (a fence run
   * with it, before it is broadcast): the payment names the transaction that pays it, which is
   * how the watcher finds it. Takes nothing (and so nothing is sent) once the payment is no
   * longer pending.
   */
  expectFence(paymentId: string, txHash: string): Fence {
    return {
      name: "x402_payment_pending",
      required: true,
      statement: this.#ctx.db
        .updateTable("payments")
        .set({ x402: sql<string>`x402 || jsonb_build_object('txHash', ${txHash.toLowerCase()}::text)` })
        .where("id", "=", paymentId)
        .where("status", "=", "pending")
        .where("x402", "is not", null)
        .returning("id")
        .compile(),
    };
  }

  /** Sandbox: the payer's transfer and the payment it pays, settled, in one transaction. */
  async settleOnLedger(tenant: Tenant, input: X402PaymentInput): Promise<LedgerSettlement> {
    const built = await this.#built(tenant, input);
    const { row } = built.write;
    row.x402 = { ...input.origin, txHash: sandboxTxHash(`payment:${row.id}`) };
    // The merchant's part of a sandbox settlement is named `payment:<id>` (sandbox-settlement.ts):
    // the payer's transfer takes that name, so the settlement's record names the transfer made.
    const transfer = {
      network: input.network,
      from: input.origin.payer as `0x${string}`,
      to: input.payTo as `0x${string}`,
      token: input.token,
      amount: input.amount,
      reference: `payment:${row.id}`,
    };
    const result = await this.#ctx.db
      .transaction()
      .execute(async (trx): Promise<LedgerSettlement> => {
        const moved = await SimulatedLedger.transferWithin(trx, transfer);
        if (moved.status !== "success") throw new LedgerRefusal("insufficient_balance");
        const fresh = await useAuthorization(trx, {
          network: input.network,
          token: input.token,
          authorizer: input.origin.payer,
          nonce: input.origin.nonce,
          txHash: moved.txHash,
        });
        if (!fresh) throw new LedgerRefusal("nonce_used");
        await repo.writeNewPayments(trx, [built.write]);
        return { status: "settled", payment: built.body.payment, txHash: moved.txHash };
      })
      .catch((err: unknown) => {
        // Thrown to roll the transfer back; answered as the chain would answer a reverted call.
        if (err instanceof LedgerRefusal) return { status: "refused" as const, reason: err.reason };
        throw err;
      });
    if (result.status === "settled") {
      this.#ctx.metrics.paymentsMoved([row], "pending");
      this.#ctx.metrics.paymentsMoved([row], row.status);
    }
    return result;
  }

  /** The facilitator's transaction for a pending x402 payment reverted or was never sent: it fails. */
  async fail(tenant: Tenant, paymentId: string, reason: string): Promise<PaymentView> {
    const failed = await this.#ctx.db
      .transaction()
      .execute(async (trx) => this.#failIn(trx, await lockedX402(trx, tenant, paymentId), reason));
    this.#ctx.metrics.paymentsMoved([failed], failed.status);
    return toPaymentView(failed);
  }

  /** The payments made for one authorization (a stopped settle's recovery, modules/x402/stale-claims.ts). */
  ofAuthorization(
    tenant: Tenant,
    authorization: { network: string; payer: string; nonce: string },
  ): Promise<AuthorizationPayment[]> {
    return repo.x402PaymentsOf(this.#ctx.db, tenant, authorization);
  }

  /**
   * Fails a pending x402 payment whose transaction was never recorded: under its row's lock, so
   * that the fence its sending would run (expectFence) finds it failed and nothing is sent. False
   * when it has a transaction (it is the chain's to decide) or is no longer pending.
   */
  async failUnsent(tenant: Tenant, paymentId: string, reason: string): Promise<boolean> {
    const failed = await this.#ctx.db.transaction().execute(async (trx) => {
      const row = await lockedX402(trx, tenant, paymentId);
      if (row.x402?.txHash || !transition(row.status as PaymentStatus, "x402_settlement_failed").ok)
        return null;
      return this.#failIn(trx, row, reason);
    });
    if (failed) this.#ctx.metrics.paymentsMoved([failed], failed.status);
    return failed !== null;
  }

  /** x402_settlement_failed, with its event, for a row locked in `trx`. */
  #failIn(trx: Db, row: PaymentRow, reason: string): Promise<PaymentRow> {
    return applyTransition(trx, row, "x402_settlement_failed", this.#ctx.now(), {
      failure_reason: reason.slice(0, 500),
    });
  }

  async #built(tenant: Tenant, input: X402PaymentInput): Promise<Built> {
    const decimals = TOKEN_DECIMALS[input.token as TokenSymbol];
    const resource = input.origin.resource;
    const decided = await this.#creation.decide(tenant, {
      paymentMethod: "crypto",
      amount: formatAmount(input.amount, decimals),
      tokenSymbol: input.token,
      network: input.network,
      walletType: input.walletType,
      description: resource ? `x402: ${resource}`.slice(0, MAX_DESCRIPTION) : "x402 payment",
    });
    if (decided.receivingAddress?.toLowerCase() !== input.payTo.toLowerCase())
      throw badRequest("payTo is not the workspace's receiving wallet of that type");
    return this.#creation.build(tenant, decided, undefined, this.#ctx.now(), {
      origin: input.origin,
      expiresAt: x402PaymentExpiry(input.validBefore),
    });
  }
}

/** An x402 payment of the tenant, locked for `trx`'s transaction. */
async function lockedX402(trx: Db, tenant: Tenant, paymentId: string): Promise<PaymentRow> {
  const row = await repo.findPayment(trx, tenant, paymentId, true);
  if (!row?.x402) throw notFound("x402 payment not found");
  return row;
}

/** A ledger refusal that rolls back the sandbox settlement's transaction. */
class LedgerRefusal extends Error {
  readonly reason: "nonce_used" | "insufficient_balance";
  constructor(reason: "nonce_used" | "insufficient_balance") {
    super(reason);
    this.reason = reason;
  }
}
