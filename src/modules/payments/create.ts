import { randomUUID } from "node:crypto";
import type { ChainToken } from "../../chain/network.ts";
import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { badRequest, conflict, serviceUnavailable } from "../../domain/errors.ts";
import { type PaymentRequest, validatePaymentRequest } from "../../domain/payment-request.ts";
import { transition } from "../../domain/payment-state.ts";
import { walletAddress, walletTypeFor } from "../../domain/wallet-choice.ts";
import { coalescedWrite } from "../../platform/db/coalesced-write.ts";
import {
  claimIdempotencyKey,
  type IdempotencyScope,
  peekIdempotencyKey,
  requestFingerprint,
  storeIdempotentResponse,
} from "../../platform/db/idempotency.ts";
import type { PaymentRow } from "../../platform/db/schema.ts";
import type { X402Origin } from "../../platform/db/schema-x402.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import {
  type CardProvider,
  type CardProviders,
  type CheckoutSession,
  providerUnavailable,
} from "../card/provider.ts";
import type { SplitsService } from "../splits/service.ts";
import type { WorkspaceProfile, WorkspacesService } from "../workspaces/service.ts";
import { deterministicUuid, idempotentName, providerIdempotencyKey } from "./checkout-keys.ts";
import { newEvents, responseOf } from "./create-views.ts";
import * as repo from "./repo.ts";
import { sandboxSettlement } from "./sandbox-settlement.ts";
import { type PaymentView, toPaymentView } from "./view.ts";

// Creating a payment (part 4.1) as steps: the Idempotency-Key's scope → the request, validated
// against the workspace, with its rail and receiving wallet → the live card's checkout session →
// the row, its events and (sandbox crypto) its settlement → the write, once per key.

/** The provider's shortest checkout lifetime (30 min) plus a minute of margin. */
const MIN_CARD_EXPIRY_MINUTES = 31;

export interface CreatePaymentResponse {
  payment: PaymentView;
  paymentMethod: "crypto" | "card";
  paymentProvider: "onchain" | "card";
  receivingAddress?: string;
  /** A payment payable on several networks: its address on each (D22). */
  receivingAddresses?: Record<string, string>;
  checkoutUrl?: string;
  cardCheckoutSessionId?: string;
  paymentUrl: string;
}

export interface CreatePaymentResult {
  body: CreatePaymentResponse;
  replayed: boolean;
}

/** The request, and where it is paid: the live card provider (if any) and the receiving wallet. */
export interface Decided {
  request: PaymentRequest;
  cardProvider: CardProvider | undefined;
  walletType: "eoa" | "smart_wallet";
  receivingAddress: string | null;
  /**
   * The network it is paid on (D22); null for a card payment, and for a live payment payable on
   * several networks until a transfer is detected on one of them.
   */
  network: string | null;
  /** The networks it may be paid on when several; else null. */
  networks: string[] | null;
}

/** What makes a payment an x402 one (x402-payments.ts): its origin, and when it expires. */
export interface X402Build {
  origin: X402Origin;
  expiresAt: Date;
}

/** A live card payment's checkout session and the payment id it names. */
interface Checkout {
  paymentId: string;
  session: CheckoutSession;
}

/** The new payment as it will be written, and the response that answers it. */
export interface Built {
  write: repo.NewPaymentWrite;
  body: CreatePaymentResponse;
}

export class PaymentCreation {
  readonly #ctx: AppContext;
  readonly #workspaces: WorkspacesService;
  readonly #splits: SplitsService;
  readonly #card: CardProviders;
  readonly #writeNew: (write: repo.NewPaymentWrite) => Promise<void>;

  constructor(
    ctx: AppContext,
    parts: { workspaces: WorkspacesService; splits: SplitsService; card: CardProviders },
  ) {
    this.#ctx = ctx;
    this.#workspaces = parts.workspaces;
    this.#splits = parts.splits;
    this.#card = parts.card;
    this.#writeNew = coalescedWrite((writes: readonly repo.NewPaymentWrite[]) =>
      repo.writeNewPayments(ctx.db, writes),
    );
  }

  async create(
    principal: Tenant,
    body: unknown,
    idempotencyKey: string | undefined,
  ): Promise<CreatePaymentResult> {
    const scope = keyScope(principal, idempotencyKey);
    const decided = await this.decide(principal, body);
    const now = this.#ctx.now();
    const provider = decided.cardProvider;
    const checkout = provider ? await this.#checkout(provider, scope, decided.request, now) : undefined;
    const built = await this.build(principal, decided, checkout, now);
    // A live card payment that opened no session: its key was answered (replayed below) or is
    // being answered by another request.
    const sessionless = provider !== undefined && checkout === undefined;
    if (!scope) return this.#writeUnkeyed(built, sessionless);
    return this.#writeKeyed(principal, scope, body, built, sessionless, now);
  }

  /** The request validated against the workspace, with its rail and receiving wallet (also x402-payments.ts's). */
  async decide(principal: Tenant, body: unknown): Promise<Decided> {
    const workspace = await this.#workspaces.profile(principal.workspaceId);
    const validated = validatePaymentRequest(body, {
      workspaceSettlementAddress: workspace.settlementAddress,
      accountSettlementAddress: this.#ctx.config.accountSettlementAddress ?? null,
      ownWallets: [workspace.eoaAddress, workspace.smartWalletAddress],
    });
    if (!validated.ok) throw badRequest(validated.message);
    const request = validated.value;
    const networks = this.#ctx.directory.resolvePaymentNetworks(
      principal.environment,
      body,
      request.paymentMethod === "crypto",
    );
    // A network whose node does not answer could not see the payer's transfer: 503 naming it
    // (any of them: the payer may choose it).
    for (const network of networks) await this.#ctx.chains.assertAnswers(principal.environment, network);
    const cardProvider = this.#liveRail(principal.environment, request);
    const several = networks.length > 1 ? networks : null;
    // Live: a payment of several networks is on none of them until the payer's transfer is seen.
    // Sandbox: it completes at creation (D5), on the first it names.
    const network = several && principal.environment === "live" ? null : (networks[0] ?? null);
    return {
      request,
      cardProvider,
      network,
      networks: several,
      ...receivingWallet(principal.environment, request, workspace),
    };
  }

  /** Refuses what live cannot do here (nothing is faked, D3); the card provider for a live card payment. */
  #liveRail(environment: Environment, request: PaymentRequest): CardProvider | undefined {
    const live = environment === "live";
    if (live && request.paymentMethod === "crypto" && !this.#ctx.chains.defaultOf("live")) {
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
    return cardProvider;
  }

  /**
   * Live card: the provider's session is created first, naming a payment id chosen here, and the
   * payment row is written with it afterwards, so no row ever points at no session. With an
   * Idempotency-Key the id derives from it, so a retry sends the provider identical parameters
   * (and our key) and gets the same session back. A key used again after its 24 h derives from
   * its lapsed use too: a new payment id and a new provider key, so a new session.
   */
  async #checkout(
    provider: CardProvider,
    scope: IdempotencyScope | null,
    request: PaymentRequest,
    now: Date,
  ): Promise<Checkout | undefined> {
    // A key already answered is replayed (or refused) by the write, without a new session.
    const peeked = scope ? await peekIdempotencyKey(this.#ctx.db, scope, now) : undefined;
    if (peeked?.kind === "answered") return undefined;
    const keyName = scope ? idempotentName(scope, peeked?.kind === "free" ? peeked.previous : null) : null;
    const paymentId = keyName ? deterministicUuid(keyName) : randomUUID();
    const base = `${this.#ctx.config.publicBaseUrl}/pay/${paymentId}`;
    try {
      const session = await provider.createCheckout({
        paymentId,
        amountCents: request.gross,
        description: request.description,
        successUrl: request.returnUrl ?? base,
        cancelUrl: request.cancelUrl ?? base,
        expiresAt: expiresAt(request, now),
        // Scoped like ours (D5): per workspace and environment, though all share one provider account.
        idempotencyKey: keyName ? providerIdempotencyKey(keyName) : undefined,
        now,
      });
      return { paymentId, session };
    } catch (err) {
      this.#ctx.log.warn({ err }, "card provider refused a checkout session");
      throw providerUnavailable(err);
    }
  }

  /**
   * Sandbox: both rails complete at once (D5). The row is written in its final state, with both
   * events, the ledger credit and the webhook deliveries, in ONE statement; `payment.created`
   * still shows the payment as created, pending (D13). Live payments wait for the chain/provider.
   */
  async build(
    principal: Tenant,
    decided: Decided,
    checkout: Checkout | undefined,
    now: Date,
    x402?: X402Build,
  ): Promise<Built> {
    const { request, receivingAddress, network } = decided;
    const completed = principal.environment === "live" ? null : transition("pending", "sandbox_completed");
    const id = checkout?.paymentId ?? randomUUID();
    const crypto = request.paymentMethod === "crypto" && receivingAddress ? receivingAddress : null;
    // Crypto payments keep the splits in force now (D15); card payments are settled by the provider.
    const splitSnapshot = crypto ? await this.#splits.snapshot(principal) : null;
    const token = request.tokenSymbol as ChainToken;
    const sandbox =
      completed?.ok && crypto && network !== null
        ? sandboxSettlement({ id, network, net: request.net, token, splitSnapshot, wallet: crypto }, now)
        : null;
    const row = repo.newPaymentRow({
      ...newPayment(principal, decided, now),
      ...(x402 ? { x402: x402.origin, expiresAt: x402.expiresAt } : {}),
      id,
      status: completed?.ok ? completed.to : "pending",
      confirmedAt: completed?.ok ? now : null,
      splitSnapshot,
      settlement: sandbox?.settlement ?? null,
      cardCheckoutSessionId: checkout?.session.id ?? null,
      checkoutUrl: checkout?.session.url ?? null,
    });
    const view = toPaymentView(row);
    // An x402 payment's money reaches its wallet by the payer's own transfer (x402-payments.ts):
    // the sandbox credits only its splits' parts.
    const merchantCredit = `payment:${id}`;
    const credits = (sandbox?.credits ?? []).filter((c) => !x402 || c.reference !== merchantCredit);
    return {
      write: { row, events: newEvents(row, view, completed, sandbox), credits },
      body: responseOf(view, decided, checkout?.session, this.#ctx.config.publicBaseUrl),
    };
  }

  /** One statement, shared with the creates that arrived together: atomic without a transaction. */
  async #writeUnkeyed(built: Built, sessionless: boolean): Promise<CreatePaymentResult> {
    if (sessionless) throw conflict("A request with this Idempotency-Key is in progress");
    await this.#writeNew(built.write);
    this.#counted(built.write.row);
    return { body: built.body, replayed: false };
  }

  /** The key is claimed in the payment's transaction: a repeat is replayed, a different body refused. */
  async #writeKeyed(
    principal: Tenant,
    scope: IdempotencyScope,
    body: unknown,
    built: Built,
    sessionless: boolean,
    now: Date,
  ): Promise<CreatePaymentResult> {
    const { row } = built.write;
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
      if (sessionless) throw conflict("A request with this Idempotency-Key is in progress");
      await repo.writeNewPayments(trx, [built.write]);
      await storeIdempotentResponse(trx, scope, row.id, 201, built.body);
      return { body: built.body, replayed: false };
    });
    if (!result.replayed) this.#counted(row);
    return result;
  }

  /** A new payment enters `pending`, and a sandbox one `forwarded` right after (the metrics). */
  #counted(row: PaymentRow): void {
    this.#ctx.metrics.paymentsMoved([row], "pending");
    if (row.status !== "pending") this.#ctx.metrics.paymentsMoved([row], row.status);
  }
}

/** The Idempotency-Key's scope (null without a key); 400 for a key of no or too many characters. */
function keyScope(principal: Tenant, idempotencyKey: string | undefined): IdempotencyScope | null {
  if (idempotencyKey !== undefined && (idempotencyKey.length === 0 || idempotencyKey.length > 255)) {
    throw badRequest("Idempotency-Key must be 1 to 255 characters");
  }
  if (!idempotencyKey) return null;
  return {
    workspaceId: principal.workspaceId,
    environment: principal.environment,
    scope: "payments",
    key: idempotencyKey,
  };
}

/** The wallet the payment names, else the workspace's default for the environment (D21). */
function receivingWallet(
  environment: Environment,
  request: PaymentRequest,
  workspace: WorkspaceProfile,
): { walletType: "eoa" | "smart_wallet"; receivingAddress: string | null } {
  const walletType = walletTypeFor(request.walletType, workspace, environment);
  const receivingAddress = walletAddress(workspace, walletType);
  if (request.paymentMethod === "crypto" && !receivingAddress) {
    throw badRequest(
      walletType === "smart_wallet"
        ? "No smart wallet for this workspace: create one with POST /api/v1/workspaces/{id}/smart-wallet"
        : "No workspace wallet found. Provision a wallet first.",
    );
  }
  return { walletType, receivingAddress };
}

function expiresAt(request: PaymentRequest, now: Date): Date {
  return new Date(now.getTime() + request.expiresInMinutes * 60_000);
}

/** The new row's fields that come from the request, its tenant and its wallet. */
function newPayment(
  principal: Tenant,
  { request, walletType, receivingAddress, network, networks }: Decided,
  now: Date,
) {
  return {
    workspaceId: principal.workspaceId,
    environment: principal.environment,
    network,
    networks,
    paymentMethod: request.paymentMethod,
    paymentProvider: request.paymentMethod === "card" ? ("card" as const) : ("onchain" as const),
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
    expiresAt: expiresAt(request, now),
    createdAt: now,
  };
}
