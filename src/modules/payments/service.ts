// payments: the payments API (create, list, browse, get, cancel, verify, totals, the card method's
// updates, expiry) and what its jobs share (repo.ts, transitions.ts, view.ts). Money arriving on
// chain is incoming/, transfers that paid no payment are inbox/, money leaving to the merchant is
// settlement/.

import type { AliasableExpression, Expression, Kysely, RawBuilder, SelectType } from "kysely";
import type { OnNetwork } from "../../chain/network.ts";
import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { badRequest, notFound } from "../../domain/errors.ts";
import {
  isVerified,
  type PaymentStatus,
  type PaymentTrigger,
  transition,
} from "../../domain/payment-state.ts";
import type { OpenInboxTransfer, UnsettledPayment } from "../../domain/unsettled-payments.ts";
import { isUuid } from "../../domain/validation.ts";
import { coalescedLookup } from "../../platform/db/coalesced-lookup.ts";
import type { DatabaseSchema, PaymentRow } from "../../platform/db/schema.ts";
import type { StatusTotal } from "../../platform/db/status-totals.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import { type CardProviders, providerUnavailable } from "../card/provider.ts";
import type { SplitsService } from "../splits/service.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import { browsePayments, type PaymentFilter, paymentsForExport } from "./browse.ts";
import { type CreatePaymentResult, PaymentCreation } from "./create.ts";
import { type DailyTotal, dailyPayments } from "./daily.ts";
import { byWallet } from "./held-wallets.ts";
import * as unmatchedRepo from "./inbox/unmatched-repo.ts";
import * as chainRepo from "./incoming/chain-repo.ts";
import type { PayerRow } from "./payer-repo.ts";
import * as payerRepo from "./payer-repo.ts";
import type { CardPaymentRef, PaymentChanges } from "./repo.ts";
import * as repo from "./repo.ts";
import { statusTotals } from "./totals-repo.ts";
import { applyTransition } from "./transitions.ts";
import { type PaymentView, toPaymentView } from "./view.ts";
import { X402Payments } from "./x402-payments.ts";

export type { HeldOf } from "./inbox/unmatched-repo.ts";
export type { CardPaymentRef, PayerRow };

// Payment use cases (parts 4.1–4.5). Each runs in one transaction that writes the state change
// and its outbox events together.

export class PaymentsService {
  readonly #ctx: AppContext;
  readonly #card: CardProviders;
  readonly #creation: PaymentCreation;
  /** Payments settled through the x402 facilitator (D23): the x402 module's way in. */
  readonly x402: X402Payments;
  readonly #byId: (id: string) => Promise<PaymentRow | undefined>;
  /** By "<environment> <address>": the settlements of one wallet's payments, checked together, share one read. */
  readonly #unsettled: (wallet: string) => Promise<UnsettledPayment[] | undefined>;
  readonly #openInbox: (wallet: string) => Promise<OpenInboxTransfer[] | undefined>;

  constructor(
    ctx: AppContext,
    workspaces: WorkspacesService,
    splits: SplitsService,
    card: CardProviders = {},
  ) {
    this.#ctx = ctx;
    this.#card = card;
    this.#creation = new PaymentCreation(ctx, { workspaces, splits, card });
    this.x402 = new X402Payments(ctx, this.#creation);
    this.#byId = coalescedLookup((ids: readonly string[]) => repo.findPaymentsByIds(ctx.db, ids));
    // The wallets asked for in a round, read in one statement (held-wallets.ts).
    this.#unsettled = coalescedLookup((keys: readonly string[]) =>
      byWallet(keys, (wallets) => chainRepo.unsettledOf(ctx.db, wallets)),
    );
    this.#openInbox = coalescedLookup((keys: readonly string[]) =>
      byWallet(keys, (wallets) => unmatchedRepo.openInboxOf(ctx.db, wallets)),
    );
  }

  /** A new payment (create.ts): validated, its card checkout opened, written once per Idempotency-Key. */
  create(principal: Tenant, body: unknown, idempotencyKey: string | undefined): Promise<CreatePaymentResult> {
    return this.#creation.create(principal, body, idempotencyKey);
  }

  async list(
    principal: Tenant,
    query: {
      status?: PaymentStatus | undefined;
      environment?: Environment | undefined;
      limit: number;
      offset: number;
    },
  ): Promise<{ payments: PaymentView[]; total: number }> {
    // Lists show only the key's environment; a filter naming the other one is an empty page (D13).
    if (query.environment && query.environment !== principal.environment) return { payments: [], total: 0 };
    const { rows, total } = await repo.listPayments(this.#ctx.db, {
      workspaceId: principal.workspaceId,
      environment: principal.environment,
      status: query.status,
      limit: query.limit,
      offset: query.offset,
    });
    return { payments: rows.map(toPaymentView), total };
  }

  /** Payments per UTC day since `since`: created, and paid per token (the dashboard's chart). */
  daily(tenant: Tenant, since: Date): Promise<DailyTotal[]> {
    return dailyPayments(this.#ctx.db, tenant, since);
  }

  /** A keyset page of the tenant's payments matching `filter`, newest first (browse.ts). */
  browse(
    tenant: Tenant,
    filter: PaymentFilter,
    page: { after?: string; limit: number },
  ): Promise<{ payments: PaymentView[]; next: string | null }> {
    return browsePayments(this.#ctx.db, tenant, filter, page);
  }

  /** Every payment matching `filter`, newest first, read in batches as it is consumed (D18). */
  exportPayments(tenant: Tenant, filter: PaymentFilter): AsyncIterable<PaymentView> {
    return paymentsForExport(this.#ctx.db, tenant, filter);
  }

  /**
   * The payments received on `address` on network `on` that are not settled yet, with their recorded settlement
   * transfers: a payout must leave their money on the wallet (domain/unsettled-payments.ts).
   */
  async unsettledOn(on: OnNetwork, address: string): Promise<UnsettledPayment[]> {
    return (await this.#unsettled(`${on.environment} ${on.id} ${address.toLowerCase()}`)) ?? [];
  }

  /**
   * The open inbox transfers that reached `address` on network `on`: money held for their senders
   * until attached or returned, which a payout, refund or swap must leave on the wallet (issue 39).
   */
  async openInboxOn(on: OnNetwork, address: string): Promise<OpenInboxTransfer[]> {
    return (await this.#openInbox(`${on.environment} ${on.id} ${address.toLowerCase()}`)) ?? [];
  }

  /**
   * The same money of one token as a scalar subquery over a caller's columns (a sandbox payout's
   * statement, which checks its wallet's balance where the money moves): read in that statement.
   */
  openInboxHeld(of: unmatchedRepo.HeldOf): RawBuilder<string> {
    return unmatchedRepo.openInboxHeld(of);
  }

  /** What the payer's page shows (no key: the id is the credential), in one row read. */
  async forPayer(id: string): Promise<PayerRow | undefined> {
    return isUuid(id) ? payerRepo.findForPayer(this.#ctx.db, id) : undefined;
  }

  /** `forPayer` and what `alongside` reads of the payment's workspace, in one statement. */
  async forPayerWith<T>(
    id: string,
    alongside: (workspaceId: Expression<string>) => AliasableExpression<T>,
  ): Promise<(PayerRow & { alongside: SelectType<T> }) | undefined> {
    return isUuid(id) ? payerRepo.findForPayerWith(this.#ctx.db, id, alongside) : undefined;
  }

  /** Count and gross volume of the key's payments per status and token. */
  totalsByStatus(principal: Tenant): Promise<StatusTotal[]> {
    return statusTotals(this.#ctx.db, principal);
  }

  // The card method's webhooks: in `trx`, the transaction that also records the provider's event,
  // so the event is claimed if and only if the payment's change commits.

  lockCardPayment(trx: Db, environment: Environment, ref: CardPaymentRef): Promise<PaymentRow | undefined> {
    return repo.lockCardPayment(trx, environment, ref);
  }

  moveCardPayment(trx: Db, row: PaymentRow, trigger: PaymentTrigger, at: Date, changes: PaymentChanges = {}) {
    return applyTransition(trx, row, trigger, at, changes);
  }

  /** The payer may retry inside the same checkout: the payment keeps its status (D5). */
  recordCardRefusal(trx: Db, id: string, error: string, at: Date): Promise<void> {
    return repo.recordLastPaymentError(trx, id, error, at);
  }

  async get(principal: Tenant, id: string): Promise<PaymentView> {
    // Outside a transaction: GETs arriving together share one query (by id; tenant checked here).
    const row = isUuid(id) ? repo.visibleTo(await this.#byId(id.toLowerCase()), principal) : undefined;
    if (!row) throw notFound("Payment not found");
    return toPaymentView(row);
  }

  async cancel(principal: Tenant, id: string): Promise<PaymentView> {
    const now = this.#ctx.now();
    // A pending card payment's checkout is expired at the provider first: if the payer has
    // already paid, the payment cannot be cancelled (its completed event will forward it).
    const current = await this.#load(this.#ctx.db, principal, id);
    const provider = this.#card[principal.environment];
    if (current.status === "pending" && current.card_checkout_session_id && provider) {
      let status: string;
      try {
        status = await provider.expireCheckout(current.card_checkout_session_id);
      } catch (err) {
        throw providerUnavailable(err);
      }
      if (status === "complete")
        throw badRequest("Payment cannot be cancelled", { status: "pending", checkout: "complete" });
      if (status !== "expired")
        throw providerUnavailable(undefined, `The checkout session is still ${status} at the card provider`);
    }
    const cancelled = await this.#ctx.db.transaction().execute(async (trx) => {
      const row = await this.#load(trx, principal, id, true);
      const decided = transition(row.status as PaymentStatus, "cancel_requested");
      if (!decided.ok) throw badRequest("Payment cannot be cancelled", { status: row.status });
      // Its payer's transfer is on its way from the facilitator: the chain decides it (D23).
      if (row.x402) throw badRequest("An x402 payment cannot be cancelled", { status: row.status });
      return applyTransition(trx, row, "cancel_requested", now);
    });
    this.#ctx.metrics.paymentsMoved([cancelled], cancelled.status);
    return toPaymentView(cancelled);
  }

  async verify(principal: Tenant, paymentId: unknown): Promise<{ verified: boolean; payment: PaymentView }> {
    if (typeof paymentId !== "string" || paymentId.length === 0) throw badRequest("paymentId is required");
    const payment = await this.get(principal, paymentId);
    return { verified: isVerified(payment.status as PaymentStatus), payment };
  }

  /** The tenant's payment as stored (for an operation on it, such as a refund); 404 for anyone else's. */
  row(principal: Tenant, id: string): Promise<PaymentRow> {
    return this.#load(this.#ctx.db, principal, id);
  }

  async #load(
    db: Kysely<DatabaseSchema>,
    principal: Tenant,
    id: string,
    forUpdate = false,
  ): Promise<PaymentRow> {
    const row = isUuid(id) ? await repo.findPayment(db, principal, id, forUpdate) : undefined;
    if (!row) throw notFound("Payment not found");
    return row;
  }
}

type Db = Kysely<DatabaseSchema>;
