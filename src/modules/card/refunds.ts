import { randomUUID } from "node:crypto";
import { ENVIRONMENTS, type Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { badRequest, InternalError, serviceUnavailable } from "../../domain/errors.ts";
import { formatAmount, TOKEN_DECIMALS, type TokenSymbol } from "../../domain/money.ts";
import { REFUND_TRANSITIONS, type RefundStatus } from "../../domain/refund-state.ts";
import { isUuid } from "../../domain/validation.ts";
import type { Db } from "../../platform/db/database.ts";
import { runFences } from "../../platform/db/fences.ts";
import type { PaymentRow } from "../../platform/db/schema.ts";
import type { RefundShares } from "../payments/refund-shares.ts";
import type { RefundMethod, RefundOrder, Scope } from "../refunds/method.ts";
import type { RefundView } from "../refunds/view.ts";
import { recordEvents } from "../webhooks/outbox.ts";
import {
  type CardProvider,
  CardProviderRefusal,
  type CardProviders,
  type ProviderRefund,
} from "./provider.ts";
import * as repo from "./refund-repo.ts";

// Refunds of card payments at the provider (D19), the card refund method: the refund is recorded pending
// (after the operation's fences took its amount from the payment, in one transaction), then the
// provider is asked, with an idempotency key derived from the refund's id so that no retry ever
// refunds twice. What the provider answers, an inbound event reports, or the reconciler finds
// moves the refund through its transition table; a failed refund gives its amount back to the
// payment in the transaction that fails it, with its event.

/** A refund younger than this may still have its request in flight: the reconciler leaves it. */
export const RECONCILE_GRACE_MS = 30_000;
const RECONCILE_BATCH = 50;
/**
 * The provider keeps an idempotency key for 24 hours: past that, asking again under it could
 * make a second refund, so an older refund the provider does not list is left to an operator.
 */
const PROVIDER_KEY_LIFETIME_MS = 23 * 60 * 60 * 1000;

const NOT_FOR_CARDS = "is not used for card payments: the money goes back to the card";
/** The source of a refund made in the provider's own dashboard. */
const EXTERNAL = "provider";

/** What the provider answered a creation: the refund, or a definite refusal. */
type Asked = ProviderRefund | CardProviderRefusal;

export class CardRefunds implements RefundMethod {
  readonly #ctx: AppContext;
  readonly #providers: CardProviders;
  readonly #shares: RefundShares;

  constructor(ctx: AppContext, providers: CardProviders, shares: RefundShares) {
    this.#ctx = ctx;
    this.#providers = providers;
    this.#shares = shares;
  }

  async refund(scope: Scope, payment: PaymentRow, order: RefundOrder): Promise<RefundView> {
    if (order.destinationAddress !== null) throw badRequest(`destinationAddress ${NOT_FOR_CARDS}`);
    if (order.walletType !== null) throw badRequest(`walletType ${NOT_FOR_CARDS}`);
    const sessionId = payment.card_checkout_session_id;
    if (!sessionId) return cardRefundView(await this.#simulated(scope, payment, order));
    const provider = this.#providers[scope.environment];
    if (!provider) throw serviceUnavailable(`Card payments are not configured for ${scope.environment}`);
    const row = await this.#ctx.db.transaction().execute(async (trx) => {
      await runFences(trx, order.fences);
      return repo.insertRefund(trx, this.#newRefund(scope, payment, order));
    });

    let asked: Asked;
    try {
      const intent = await provider.paymentIntentOf(sessionId);
      asked = await this.#ask(provider, row, intent);
    } catch (err) {
      // Nothing was asked of the provider when reading the session was refused.
      if (!(err instanceof CardProviderRefusal)) {
        this.#ctx.log.warn(
          { err, refundId: row.id },
          "card refund left pending: the provider did not answer",
        );
        return cardRefundView(row);
      }
      asked = err;
    }
    return cardRefundView(await this.#conclude(row.id, asked));
  }

  async refundsOf(
    scope: Scope,
    paymentId: string,
    page: { limit: number; offset: number },
  ): Promise<{ refunds: RefundView[]; total: number }> {
    const { rows, total } = await repo.refundsOf(this.#ctx.db, scope, paymentId, page);
    return { refunds: rows.map(cardRefundView), total };
  }

  async find(scope: Scope, id: string): Promise<RefundView | undefined> {
    const row = await repo.findRefund(this.#ctx.db, scope, id);
    return row ? cardRefundView(row) : undefined;
  }

  /**
   * Finishes refunds left pending (recorded, the provider not reached, or not final there): a
   * refund with a provider id is read back; one without is looked for among its payment
   * intent's refunds, and asked for again under its idempotency key if the provider has none.
   * Answers how many ended.
   */
  async reconcile(): Promise<number> {
    const environments = ENVIRONMENTS.filter((environment) => this.#providers[environment]);
    const now = this.#ctx.now();
    const due = await repo.pendingRefunds(
      this.#ctx.db,
      environments,
      new Date(now.getTime() - RECONCILE_GRACE_MS),
      RECONCILE_BATCH,
    );
    let ended = 0;
    for (const row of due) {
      const provider = this.#providers[row.environment as Environment];
      if (!provider) continue;
      try {
        const asked = await this.#lookUp(provider, row, now);
        if (!asked) continue;
        const after = await this.#conclude(row.id, asked);
        if (after.status !== "pending") ended += 1;
      } catch (err) {
        this.#ctx.log.warn(
          { err, refundId: row.id },
          "card refund still pending: the provider did not answer",
        );
      }
    }
    return ended;
  }

  /** The refund an inbound provider event reports on, locked in `trx`; undefined when not ours. */
  lockReported(
    trx: Db,
    environment: Environment,
    reported: ProviderRefund,
  ): Promise<repo.CardRefundRow | undefined> {
    return repo.lockReported(trx, environment, {
      refundId: reported.refundId,
      providerRefundId: reported.id,
    });
  }

  /**
   * The payments of the refunds `reported` that this service did not make (no refund id of ours
   * in their metadata), by provider refund id: the payment its payment intent pays, as checkout
   * named it there. Asked of the provider before the event's transaction; a refund whose payment
   * intent is not one of ours, or which failed (nothing moved), is left out.
   */
  async externalPayments(
    environment: Environment,
    reported: readonly ProviderRefund[],
  ): Promise<Map<string, string>> {
    const provider = this.#providers[environment];
    const found = new Map<string, string>();
    if (!provider) return found;
    const byIntent = new Map<string, Promise<string | null>>();
    for (const one of reported) {
      if (one.refundId !== null || one.paymentIntent === null || one.outcome === "failed") continue;
      const intent = one.paymentIntent;
      const paymentId = byIntent.get(intent) ?? provider.paymentOfIntent(intent);
      byIntent.set(intent, paymentId);
      const id = await paymentId;
      if (isUuid(id)) found.set(one.id, id);
    }
    return found;
  }

  /**
   * Records a refund made in the provider's own dashboard on `payment` (locked by the caller), in
   * `trx` (issue 39): its amount taken from what the payment has left to refund, and completed
   * with `refund.completed` (`source: "provider"`) when the provider says it succeeded. Once: the
   * provider's id is unique, so a report that finds it recorded by a concurrent one applies to
   * that row instead (`applyReported`). A take the payment cannot cover throws (the event is
   * answered 500 and delivered again): a refund of ours pending here must have failed there, which
   * the reconciler then gives back.
   */
  async recordExternal(
    trx: Db,
    payment: PaymentRow,
    reported: ProviderRefund,
  ): Promise<{ row: repo.CardRefundRow; outcome: string }> {
    const environment = payment.environment as Environment;
    const inserted = await repo.insertExternalRefund(trx, {
      id: randomUUID(),
      workspaceId: payment.workspace_id,
      environment,
      paymentId: payment.id,
      tokenSymbol: payment.token_symbol,
      amount: reported.amount,
      reason: null,
      checkoutSessionId: payment.card_checkout_session_id,
      createdAt: this.#ctx.now(),
      providerRefundId: reported.id,
    });
    if (!inserted) {
      const row = await this.lockReported(trx, environment, reported);
      if (!row) throw new InternalError(`card refund ${reported.id} neither recorded nor found`);
      return this.applyReported(trx, row, reported);
    }
    const scope = { workspaceId: payment.workspace_id, environment };
    try {
      await runFences(trx, [this.#shares.takeFence(trx, scope, payment.id, reported.amount)]);
    } catch (err) {
      this.#ctx.log.error(
        { err, paymentId: payment.id, providerRefundId: reported.id },
        "a refund made at the card provider exceeds what the payment has left to refund here",
      );
      throw err;
    }
    if (reported.outcome !== "succeeded")
      return { row: inserted, outcome: `recorded: refund made at the provider, pending there` };
    const { row } = await this.#move(trx, inserted, "succeeded", reported.id, null);
    return { row, outcome: "recorded: refund made at the provider, completed" };
  }

  /**
   * Applies what the provider reports of `row` (locked by the caller): a final status moves it by
   * the transition table (a replay or an older report moves nothing: a completed refund never
   * goes back to pending); a pending one records the provider's id. The row after, and what
   * happened (the inbound event's outcome).
   */
  async applyReported(
    trx: Db,
    row: repo.CardRefundRow,
    reported: ProviderRefund,
  ): Promise<{ row: repo.CardRefundRow; outcome: string }> {
    if (row.provider_refund_id && row.provider_refund_id !== reported.id)
      return {
        row,
        outcome: `ignored: refund is ${row.provider_refund_id} at the provider, not ${reported.id}`,
      };
    if (!reported.outcome) {
      const recorded = row.provider_refund_id ? row : await repo.recordProviderId(trx, row.id, reported.id);
      return { row: recorded, outcome: `pending at the provider (refund is ${recorded.status})` };
    }
    return this.#move(trx, row, reported.outcome, reported.id, reported.failure);
  }

  /** Moves `row` by `trigger` with its event; a failure gives the amount back to the payment. */
  async #move(
    trx: Db,
    row: repo.CardRefundRow,
    trigger: "succeeded" | "failed",
    providerRefundId: string | null,
    error: string | null,
  ): Promise<{ row: repo.CardRefundRow; outcome: string }> {
    const rule = REFUND_TRANSITIONS[trigger];
    const failed = rule.to === "failed";
    const moved = await repo.moveRefund(trx, row.id, {
      from: rule.from,
      to: rule.to,
      providerRefundId,
      error: failed ? error : null,
      at: this.#ctx.now(),
    });
    if (!moved) return { row, outcome: `ignored: refund is ${row.status}` };
    if (failed) await this.#shares.giveBack(trx, moved.payment_id, BigInt(moved.amount));
    await recordEvents(trx, [
      {
        workspaceId: moved.workspace_id,
        environment: moved.environment as Environment,
        type: rule.event,
        payload: { ...cardRefundView(moved), ...(failed ? { error: error ?? "refund failed" } : {}) },
      },
    ]);
    return { row: moved, outcome: `applied: ${rule.to}` };
  }

  /** Applies the provider's answer to a creation in a transaction of its own; the row after. */
  async #conclude(id: string, asked: Asked): Promise<repo.CardRefundRow> {
    return this.#ctx.db.transaction().execute(async (trx) => {
      const row = await repo.lockRefund(trx, id);
      if (!(asked instanceof CardProviderRefusal)) return (await this.applyReported(trx, row, asked)).row;
      // A refusal only ends a refund nothing else has ended (an event may have come first).
      if (row.status !== "pending") return row;
      return (await this.#move(trx, row, "failed", null, asked.message)).row;
    });
  }

  /** Asks the provider for the refund; a definite refusal is an answer, anything else throws. */
  async #ask(provider: CardProvider, row: repo.CardRefundRow, paymentIntent: string): Promise<Asked> {
    try {
      return await provider.createRefund({
        paymentIntent,
        amountCents: BigInt(row.amount),
        refundId: row.id,
        paymentId: row.payment_id,
        idempotencyKey: providerIdempotencyKey(row.id),
      });
    } catch (err) {
      if (err instanceof CardProviderRefusal) return err;
      throw err;
    }
  }

  /**
   * What the provider knows of a pending refund; undefined when it must be left to an operator.
   * A refusal of these reads (an expired key, a revoked permission) says nothing of the refund,
   * which may exist: it stays pending, its amount held, and the job logs it each round, rather
   * than being failed and perhaps refunded twice.
   */
  async #lookUp(provider: CardProvider, row: repo.CardRefundRow, now: Date): Promise<Asked | undefined> {
    if (row.provider_refund_id) return provider.retrieveRefund(row.provider_refund_id);
    if (!row.checkout_session_id)
      throw new InternalError(`card refund ${row.id} of a payment without a session`);
    const intent = await provider.paymentIntentOf(row.checkout_session_id);
    const found = await provider.findRefund(intent, row.id);
    if (found) return found;
    if (now.getTime() - row.created_at.getTime() > PROVIDER_KEY_LIFETIME_MS) {
      this.#ctx.log.error(
        { refundId: row.id },
        "card refund pending past the provider's idempotency window and unknown there: check it at the provider",
      );
      return undefined;
    }
    return this.#ask(provider, row, intent);
  }

  /**
   * A card payment settled without the provider (sandbox card payments complete at creation, D5)
   * is refunded the same way: recorded and completed at once, with its event.
   */
  async #simulated(scope: Scope, payment: PaymentRow, order: RefundOrder): Promise<repo.CardRefundRow> {
    if (scope.environment !== "sandbox")
      throw new InternalError("This card payment has no checkout session at the provider to refund");
    return this.#ctx.db.transaction().execute(async (trx) => {
      await runFences(trx, order.fences);
      const row = await repo.insertRefund(trx, this.#newRefund(scope, payment, order));
      return (await this.#move(trx, row, "succeeded", null, null)).row;
    });
  }

  #newRefund(scope: Scope, payment: PaymentRow, order: RefundOrder): repo.NewCardRefund {
    return {
      id: order.id,
      workspaceId: scope.workspaceId,
      environment: scope.environment,
      paymentId: payment.id,
      tokenSymbol: payment.token_symbol,
      amount: order.amount,
      reason: order.reason,
      checkoutSessionId: payment.card_checkout_session_id,
      createdAt: this.#ctx.now(),
    };
  }
}

/** The provider's idempotency key of a refund: one refund at the provider per refund here. */
export function providerIdempotencyKey(refundId: string): string {
  return `refund-${refundId}`;
}

/** The refund object of D19 for a card refund: its provider refund id as txHash, no address. */
export function cardRefundView(row: repo.CardRefundRow): RefundView {
  return {
    id: row.id,
    paymentId: row.payment_id,
    amount: formatAmount(BigInt(row.amount), TOKEN_DECIMALS[row.token_symbol as TokenSymbol]),
    tokenSymbol: row.token_symbol,
    network: null,
    destinationAddress: null,
    status: row.status as RefundStatus,
    txHash: row.provider_refund_id,
    reason: row.reason,
    createdAt: row.created_at.toISOString(),
    ...(row.status === "failed" && row.error ? { error: row.error } : {}),
    ...(row.source === EXTERNAL ? { source: EXTERNAL } : {}),
  };
}
