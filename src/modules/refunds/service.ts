import { randomUUID } from "node:crypto";
import type { AppContext } from "../../context.ts";
import { type AppError, badRequest, conflict, InternalError } from "../../domain/errors.ts";
import { TOKEN_DECIMALS, type TokenSymbol } from "../../domain/money.ts";
import { isRefundable, type PaymentStatus } from "../../domain/payment-state.ts";
import {
  idempotencyKeyProblem,
  type RefundRequest,
  validateRefundRequest,
} from "../../domain/refund-request.ts";
import { isPlainObject, parseAmountField } from "../../domain/validation.ts";
import { walletTypeAt } from "../../domain/wallet-choice.ts";
import { FenceRefused } from "../../platform/db/fences.ts";
import { KEY_FENCE } from "../../platform/db/resource-keys.ts";
import type { PaymentRow } from "../../platform/db/schema.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import { namesNetwork } from "../networks/directory.ts";
import type { UnmatchedInbox } from "../payments/inbox/unmatched.ts";
import { type RefundShares, refundable, refundExceeded } from "../payments/refund-shares.ts";
import type { PaymentsService } from "../payments/service.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import { RefundKeyTaken, refundKeys } from "./keys.ts";
import type { RefundMethod, Scope } from "./method.ts";
import type { RefundView } from "./view.ts";
import type { WalletRefunds } from "./wallet-refunds.ts";

// Refunds and returns (D19) as operations: validate → decide (the amount, the refund method of
// the payment's provider) → persist and move (the method records the refund after its fences, in one
// transaction, before any money moves) → the refund as it stands. The fences claim the
// Idempotency-Key and take the amount from what the payment has left to refund, on the payment's
// row lock, so concurrent refunds of one payment never pass what it received.

export type RefundAnswer = { replayed: boolean; refund: RefundView };

export class RefundsService {
  readonly #ctx: AppContext;
  readonly #payments: PaymentsService;
  readonly #workspaces: WorkspacesService;
  readonly #shares: RefundShares;
  readonly #inbox: UnmatchedInbox;
  readonly #wallet: WalletRefunds;
  /** How each provider's payments are refunded: its refund method (method.ts). */
  readonly #methods: ReadonlyMap<string, RefundMethod>;

  constructor(
    ctx: AppContext,
    parts: {
      payments: PaymentsService;
      workspaces: WorkspacesService;
      shares: RefundShares;
      inbox: UnmatchedInbox;
      wallet: WalletRefunds;
      card: RefundMethod;
    },
  ) {
    this.#ctx = ctx;
    this.#payments = parts.payments;
    this.#workspaces = parts.workspaces;
    this.#shares = parts.shares;
    this.#inbox = parts.inbox;
    this.#wallet = parts.wallet;
    // Keyed by the payments' paymentProvider.
    this.#methods = new Map<string, RefundMethod>([
      ["onchain", parts.wallet],
      ["card", parts.card],
    ]);
  }

  /** POST /api/v1/payments/{id}/refunds. */
  async create(
    tenant: Tenant,
    paymentId: string,
    body: unknown,
    key: string | undefined,
  ): Promise<RefundAnswer> {
    const request = this.#validated(body, key);
    const payment = await this.#payments.row(tenant, paymentId);
    const fingerprint = refundKeys.fingerprint(payment.id, request);
    const repeat = key ? await refundKeys.under(this.#ctx.db, tenant, key, fingerprint) : null;
    if (repeat) return this.#repeat(tenant, repeat);
    if (!isRefundable(payment.status as PaymentStatus))
      throw badRequest("Only forwarded payments can be refunded", { status: payment.status });
    const amount = this.#amount(payment, request.amount);
    const id = randomUUID();
    const at = this.#ctx.now();
    const fences = [
      ...(key ? [refundKeys.fence(this.#ctx.db, tenant, key, { id, fingerprint, at })] : []),
      this.#shares.takeFence(this.#ctx.db, tenant, payment.id, amount),
    ];
    const method = this.#methodOf(payment);
    this.#onPaymentsNetwork(tenant, payment, body);
    return this.#answer(
      tenant,
      () =>
        method.refund(tenant, payment, {
          id,
          amount,
          destinationAddress: request.destinationAddress,
          walletType: request.walletType,
          reason: request.reason,
          fences,
        }),
      async (fence) => {
        if (fence === KEY_FENCE && key) return refundKeys.under(this.#ctx.db, tenant, key, fingerprint);
        // Taken meanwhile by a concurrent refund: what is left now.
        const now = await this.#payments.row(tenant, paymentId);
        return refundExceeded(now, refundable(now));
      },
    );
  }

  /** GET /api/v1/payments/{id}/refunds. */
  async list(tenant: Tenant, paymentId: string, page: { limit: number; offset: number }) {
    const payment = await this.#payments.row(tenant, paymentId);
    const { refunds, total } = await this.#methodOf(payment).refundsOf(tenant, payment.id, page);
    return { refunds, total, limit: page.limit, offset: page.offset };
  }

  /** POST /api/v1/transfers/unmatched/{id}/return: the transfer's amount back, by default to its sender. */
  async returnTransfer(
    tenant: Tenant,
    id: string,
    body: unknown,
    key: string | undefined,
  ): Promise<RefundAnswer> {
    const request = this.#validated(body, key);
    if (request.amount !== undefined)
      throw badRequest("amount cannot be set: a return sends the whole transfer back");
    const transfer = await this.#inbox.get(tenant, id);
    const fingerprint = refundKeys.fingerprint(transfer.id, request);
    const repeat = key ? await refundKeys.under(this.#ctx.db, tenant, key, fingerprint) : null;
    if (repeat) return this.#repeat(tenant, repeat);
    this.#inbox.assertActionable(transfer);
    this.#onNetwork(tenant, body, "transfer", transfer.network);
    await this.#inbox.assertConfirmed(transfer);
    const workspace = await this.#workspaces.profile(tenant.workspaceId);
    const walletType = walletTypeAt(workspace, transfer.to_address);
    if (!walletType)
      throw badRequest(
        "The transfer reached a wallet that is not the workspace's: it cannot be returned from here",
        {
          to: transfer.to_address,
        },
      );
    if (request.walletType && request.walletType !== walletType)
      throw badRequest(
        `The transfer reached the workspace's ${walletType} wallet: it is returned from there`,
      );
    const refundId = randomUUID();
    const at = this.#ctx.now();
    const fences = [
      ...(key ? [refundKeys.fence(this.#ctx.db, tenant, key, { id: refundId, fingerprint, at })] : []),
      this.#inbox.returnFence(tenant, transfer.id),
    ];
    return this.#answer(
      tenant,
      () =>
        this.#wallet.returnTransfer(tenant, transfer, {
          id: refundId,
          destinationAddress: request.destinationAddress,
          walletType,
          reason: request.reason,
          fences,
        }),
      async (fence) => {
        if (fence === KEY_FENCE && key) return refundKeys.under(this.#ctx.db, tenant, key, fingerprint);
        return this.#inbox.returnRefused(tenant, transfer.id);
      },
    );
  }

  #validated(body: unknown, key: string | undefined): RefundRequest {
    const keyProblem = idempotencyKeyProblem(key);
    if (keyProblem) throw badRequest(keyProblem);
    const validated = validateRefundRequest(body);
    if (!validated.ok) throw badRequest(validated.message);
    return validated.value;
  }

  /** What is asked, or everything left; 400 for a malformed amount or one past what is left. */
  #amount(payment: PaymentRow, asked: unknown): bigint {
    const left = refundable(payment);
    const amount =
      asked === undefined
        ? left
        : parseAmountField(asked, TOKEN_DECIMALS[payment.token_symbol as TokenSymbol]);
    if (amount === null) throw badRequest("Amount must be a positive number");
    // Checked again under the payment's lock when the refund is recorded (refund-shares.ts).
    if (amount <= 0n || amount > left) throw refundExceeded(payment, left);
    return amount;
  }

  /**
   * The refund `move` made, or why it made none: a fence that took nothing is answered by
   * `refused`, read once nothing was recorded (a concurrent request with the same key recorded its
   * refund first: the repeat; else the error that says what changed meanwhile).
   */
  async #answer(
    tenant: Tenant,
    move: () => Promise<RefundView>,
    refused: (fence: string) => Promise<RefundKeyTaken | AppError | null>,
  ): Promise<RefundAnswer> {
    try {
      return { replayed: false, refund: await move() };
    } catch (err) {
      if (!(err instanceof FenceRefused)) throw err;
      const why = await refused(err.fence);
      if (why instanceof RefundKeyTaken) return this.#repeat(tenant, why);
      throw why ?? new InternalError("The refund's idempotency claim was refused, yet no claim is stored");
    }
  }

  /** A repeated Idempotency-Key: the refund it made, as it stands; another request under it is a conflict. */
  async #repeat(scope: Scope, taken: RefundKeyTaken): Promise<RefundAnswer> {
    const refund = taken.resourceId ? await this.#find(scope, taken.resourceId) : undefined;
    if (!taken.sameRequest) throw conflict("Idempotency key already used", { refund: refund ?? null });
    if (!refund) throw new InternalError("The refund recorded under this Idempotency-Key was not found");
    return { replayed: true, refund };
  }

  async #find(scope: Scope, id: string): Promise<RefundView | undefined> {
    for (const method of this.#methods.values()) {
      const found = await method.find(scope, id);
      if (found) return found;
    }
    return undefined;
  }

  /**
   * A refund goes back on the network its payment was paid on; a `network` naming another one is
   * refused, and a card payment's refund names none.
   */
  #onPaymentsNetwork(tenant: Tenant, payment: PaymentRow, body: unknown): void {
    if (payment.payment_method !== "crypto" || payment.network === null) {
      if (namesNetwork(body)) throw badRequest("network does not apply to a card payment's refund");
      return;
    }
    this.#onNetwork(tenant, body, "payment", payment.network);
  }

  /**
   * Money goes back on the network it arrived on (`arrivedOn`, the payment's or the transfer's): a
   * `network` the environment does not have is 400 Unknown network, and another of its networks is
   * refused, never used in its place.
   */
  #onNetwork(tenant: Tenant, body: unknown, what: "payment" | "transfer", arrivedOn: string): void {
    const requested = isPlainObject(body) ? body.network : undefined;
    if (requested === undefined || requested === null) return;
    const named = this.#ctx.directory.resolveField(tenant.environment, requested);
    if (named !== arrivedOn)
      throw badRequest(`The ${what}'s money arrived on network ${arrivedOn}: it goes back on that network`, {
        network: named,
        arrivedOn,
      });
  }

  #methodOf(payment: PaymentRow): RefundMethod {
    const method = this.#methods.get(payment.payment_provider);
    if (!method) throw new Error(`no refund method for payment provider "${payment.payment_provider}"`);
    return method;
  }
}
