// payments: the payments API (create, list, browse, get, cancel, verify, totals, the card rail's
// updates, expiry) and what its jobs share (repo.ts, transitions.ts, view.ts). Money arriving on
// chain is incoming/, transfers that paid no payment are inbox/, money leaving to the merchant is
// settlement/.

import { randomUUID } from "node:crypto";
import type { Kysely } from "kysely";
import type { ChainToken } from "../../chain/network.ts";
import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { badRequest, conflict, notFound, serviceUnavailable } from "../../domain/errors.ts";
import { validatePaymentRequest } from "../../domain/payment-request.ts";
import {
  isVerified,
  type PaymentStatus,
  type PaymentTrigger,
  transition,
} from "../../domain/payment-state.ts";
import type { UnsettledPayment } from "../../domain/unsettled-payments.ts";
import { isUuid } from "../../domain/validation.ts";
import { coalescedLookup } from "../../platform/db/coalesced-lookup.ts";
import { coalescedWrite } from "../../platform/db/coalesced-write.ts";
import {
  claimIdempotencyKey,
  type IdempotencyScope,
  peekIdempotencyKey,
  requestFingerprint,
  storeIdempotentResponse,
} from "../../platform/db/idempotency.ts";
import type { DatabaseSchema, PaymentRow } from "../../platform/db/schema.ts";
import type { StatusTotal } from "../../platform/db/status-totals.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import { type CardProviders, providerUnavailable } from "../card/provider.ts";
import type { SplitsService } from "../splits/service.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import { browsePayments, type PaymentFilter, paymentsForExport } from "./browse.ts";
import { deterministicUuid, idempotentName, providerIdempotencyKey } from "./checkout-keys.ts";
import { type DailyTotal, dailyPayments } from "./daily.ts";
import * as chainRepo from "./incoming/chain-repo.ts";
import type { CardPaymentRef, NewPaymentWrite, PayerRow, PaymentChanges } from "./repo.ts";
import * as repo from "./repo.ts";
import { sandboxSettlement } from "./sandbox-settlement.ts";
import { settlementEvents } from "./settlement/settlement-record.ts";
import { statusTotals } from "./totals-repo.ts";
import { applyTransition } from "./transitions.ts";
import { type PaymentView, toPaymentView } from "./view.ts";

export type { CardPaymentRef, PayerRow };

// Payment use cases (parts 4.1–4.5). Each runs in one transaction that writes the state change
// and its outbox events together.

/** The provider's shortest checkout lifetime (30 min) plus a minute of margin. */
const MIN_CARD_EXPIRY_MINUTES = 31;

export interface CreatePaymentResponse {
  payment: PaymentView;
  paymentMethod: "crypto" | "card";
  paymentProvider: "onchain" | "card";
  receivingAddress?: string;
  checkoutUrl?: string;
  cardCheckoutSessionId?: string;
  paymentUrl: string;
}

export interface CreatePaymentResult {
  body: CreatePaymentResponse;
  replayed: boolean;
}

export class PaymentsService {
  readonly #ctx: AppContext;
  readonly #workspaces: WorkspacesService;
  readonly #splits: SplitsService;
  readonly #card: CardProviders;
  readonly #byId: (id: string) => Promise<PaymentRow | undefined>;
  readonly #writeNew: (write: NewPaymentWrite) => Promise<void>;

  constructor(
    ctx: AppContext,
    workspaces: WorkspacesService,
    splits: SplitsService,
    card: CardProviders = {},
  ) {
    this.#ctx = ctx;
    this.#workspaces = workspaces;
    this.#splits = splits;
    this.#card = card;
    this.#byId = coalescedLookup((ids: readonly string[]) => repo.findPaymentsByIds(ctx.db, ids));
    this.#writeNew = coalescedWrite((writes: readonly NewPaymentWrite[]) =>
      repo.writeNewPayments(ctx.db, writes),
    );
  }

  async create(
    principal: Tenant,
    body: unknown,
    idempotencyKey: string | undefined,
  ): Promise<CreatePaymentResult> {
    if (idempotencyKey !== undefined && (idempotencyKey.length === 0 || idempotencyKey.length > 255)) {
      throw badRequest("Idempotency-Key must be 1 to 255 characters");
    }
    const workspace = await this.#workspaces.profile(principal.workspaceId);
    const validated = validatePaymentRequest(body, {
      workspaceSettlementAddress: workspace.settlementAddress,
      accountSettlementAddress: this.#ctx.config.accountSettlementAddress ?? null,
      ownWallets: [workspace.eoaAddress, workspace.smartWalletAddress],
    });
    if (!validated.ok) throw badRequest(validated.message);
    const request = validated.value;

    const live = principal.environment === "live";
    if (live && request.paymentMethod === "crypto" && !this.#ctx.networks.live) {
      throw serviceUnavailable("Live network is not configured"); // nothing is faked (D3)
    }
    const cardProvider = live && request.paymentMethod === "card" ? this.#card.live : undefined;
    if (cardProvider && request.expiresInMinutes < MIN_CARD_EXPIRY_MINUTES) {
      // The provider keeps a checkout open for at least 30 minutes; a payment that expired sooner
      // could still be paid there, with nothing left to forward it.
      throw badRequest(`expiresInMinutes must be at least ${MIN_CARD_EXPIRY_MINUTES} for card payments`);
    }
    if (live && request.paymentMethod === "card" && !cardProvider) {
      throw serviceUnavailable("Card payments are not configured for live");
    }

    const walletType =
      request.walletType ??
      (workspace.defaultWalletTypes[principal.environment] === "smart_wallet" ? "smart_wallet" : "eoa");
    const receivingAddress =
      walletType === "smart_wallet" ? workspace.smartWalletAddress : workspace.eoaAddress;
    if (request.paymentMethod === "crypto" && !receivingAddress) {
      throw badRequest(
        walletType === "smart_wallet"
          ? "No smart wallet for this workspace: create one with POST /api/v1/workspaces/{id}/smart-wallet"
          : "No workspace wallet found. Provision a wallet first.",
      );
    }

    const scope: IdempotencyScope | null = idempotencyKey
      ? {
          workspaceId: principal.workspaceId,
          environment: principal.environment,
          scope: "payments",
          key: idempotencyKey,
        }
      : null;
    const now = this.#ctx.now();

    // Live card: the provider's session is created first, naming a payment id chosen here, and the
    // payment row is written with it afterwards, so no row ever points at no session. With an
    // Idempotency-Key the id derives from it, so a retry sends the provider identical parameters
    // (and our key) and gets the same session back. A key used again after its 24 h derives from
    // its lapsed use too: a new payment id and a new provider key, so a new session.
    let paymentId: string | undefined;
    let checkout: { id: string; url: string } | undefined;
    // A key already answered is replayed (or refused) by the transaction below, without a new session.
    const peeked = cardProvider && scope ? await peekIdempotencyKey(this.#ctx.db, scope, now) : undefined;
    if (cardProvider && peeked?.kind !== "answered") {
      const keyName = scope ? idempotentName(scope, peeked?.kind === "free" ? peeked.previous : null) : null;
      paymentId = keyName ? deterministicUuid(keyName) : randomUUID();
      const base = `${this.#ctx.config.publicBaseUrl}/pay/${paymentId}`;
      try {
        checkout = await cardProvider.createCheckout({
          paymentId,
          amountCents: request.gross,
          description: request.description,
          successUrl: request.returnUrl ?? base,
          cancelUrl: request.cancelUrl ?? base,
          expiresAt: new Date(now.getTime() + request.expiresInMinutes * 60_000),
          // Scoped like ours (D5): per workspace and environment, though all share one provider account.
          idempotencyKey: keyName ? providerIdempotencyKey(keyName) : undefined,
          now,
        });
      } catch (err) {
        this.#ctx.log.warn({ err }, "card provider refused a checkout session");
        throw providerUnavailable(err);
      }
    }

    // Sandbox: both rails complete at once (D5). The row is written in its final state, with both
    // events, the ledger credit and the webhook deliveries, in ONE statement; `payment.created`
    // still shows the payment as created, pending (D13). Live payments wait for the chain/provider.
    const completed = live ? null : transition("pending", "sandbox_completed");
    const id = paymentId ?? randomUUID();
    const crypto = request.paymentMethod === "crypto" && receivingAddress ? receivingAddress : null;
    // Crypto payments keep the splits in force now (D15); card payments are settled by the provider.
    const splitSnapshot = crypto ? await this.#splits.snapshot(principal) : null;
    const sandbox =
      completed?.ok && crypto
        ? sandboxSettlement(
            { id, net: request.net, token: request.tokenSymbol as ChainToken, splitSnapshot, wallet: crypto },
            now,
          )
        : null;
    const row = repo.newPaymentRow({
      id,
      splitSnapshot,
      settlement: sandbox?.settlement ?? null,
      cardCheckoutSessionId: checkout?.id ?? null,
      checkoutUrl: checkout?.url ?? null,
      status: completed?.ok ? completed.to : "pending",
      workspaceId: principal.workspaceId,
      environment: principal.environment,
      paymentMethod: request.paymentMethod,
      paymentProvider: request.paymentMethod === "card" ? "card" : "onchain",
      tokenSymbol: request.tokenSymbol,
      gross: request.gross,
      fee: request.fee,
      net: request.net,
      merchantWallet: request.merchantWallet,
      walletType,
      receivingAddress: request.paymentMethod === "crypto" ? receivingAddress : null,
      description: request.description,
      metadata: request.metadata,
      returnUrl: request.returnUrl,
      cancelUrl: request.cancelUrl,
      expiresAt: new Date(now.getTime() + request.expiresInMinutes * 60_000),
      createdAt: now,
    });
    const view = toPaymentView(row);
    const responseBody: CreatePaymentResponse = {
      payment: view,
      paymentMethod: request.paymentMethod,
      paymentProvider: view.paymentProvider,
      ...(request.paymentMethod === "crypto" && receivingAddress ? { receivingAddress } : {}),
      ...(checkout ? { checkoutUrl: checkout.url, cardCheckoutSessionId: checkout.id } : {}),
      paymentUrl: `${this.#ctx.config.publicBaseUrl}/pay/${row.id}`,
    };
    const write: NewPaymentWrite = {
      row,
      events: [
        { ...eventScope(row), type: "payment.created", payload: { ...view, status: "pending" } },
        ...(completed?.ok && completed.event
          ? [{ ...eventScope(row), type: completed.event, payload: { ...view } }]
          : []),
        ...(sandbox ? settlementEvents(row) : []),
      ],
      credits: sandbox?.credits ?? [],
    };

    if (!scope) {
      if (cardProvider && !checkout) throw conflict("A request with this Idempotency-Key is in progress");
      // One statement, shared with the creates that arrived together: atomic without a transaction.
      await this.#writeNew(write);
      this.#counted(row);
      return { body: responseBody, replayed: false };
    }

    const result = await this.#ctx.db.transaction().execute(async (trx) => {
      const claim = await claimIdempotencyKey(trx, scope, requestFingerprint(body), now);
      if (claim.kind === "replay") {
        // Stored by this same code path below, so its shape is the response's.
        return { body: claim.body as CreatePaymentResponse, replayed: true };
      }
      if (claim.kind === "mismatch") {
        const existing = claim.resourceId
          ? await repo.findPayment(trx, principal, claim.resourceId)
          : undefined;
        throw conflict("Idempotency key already used", {
          payment: existing ? toPaymentView(existing) : null,
        });
      }
      if (claim.kind === "in_progress") throw conflict("A request with this Idempotency-Key is in progress");
      if (cardProvider && !checkout) throw conflict("A request with this Idempotency-Key is in progress");
      await repo.writeNewPayments(trx, [write]);
      await storeIdempotentResponse(trx, scope, row.id, 201, responseBody);
      return { body: responseBody, replayed: false };
    });
    if (!result.replayed) this.#counted(row);
    return result;
  }

  /** A new payment enters `pending`, and a sandbox one `forwarded` right after (the metrics). */
  #counted(row: PaymentRow): void {
    this.#ctx.metrics.paymentsMoved([row], "pending");
    if (row.status !== "pending") this.#ctx.metrics.paymentsMoved([row], row.status);
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
   * The payments received on `address` that are not settled yet, with their recorded settlement
   * transfers: a payout must leave their money on the wallet (domain/unsettled-payments.ts).
   */
  unsettledOn(environment: Environment, address: string): Promise<UnsettledPayment[]> {
    return chainRepo.unsettledOn(this.#ctx.db, environment, address);
  }

  /** What the payer's page shows (no key: the id is the credential), in one row read. */
  async forPayer(id: string): Promise<PayerRow | undefined> {
    return isUuid(id) ? repo.findForPayer(this.#ctx.db, id) : undefined;
  }

  /** Count and gross volume of the key's payments per status and token. */
  totalsByStatus(principal: Tenant): Promise<StatusTotal[]> {
    return statusTotals(this.#ctx.db, principal);
  }

  // The card rail's webhooks: in `trx`, the transaction that also records the provider's event,
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

function eventScope(row: PaymentRow): { workspaceId: string; environment: Environment } {
  return { workspaceId: row.workspace_id, environment: row.environment as Environment };
}
