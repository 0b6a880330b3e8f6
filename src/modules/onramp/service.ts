import { randomUUID } from "node:crypto";
import type { Hex, IncomingTransfer, OnNetwork } from "../../chain/network.ts";
import type { SimulatedLedger } from "../../chain/simulated/ledger.ts";
import { sandboxTxHash } from "../../chain/simulated/ledger.ts";
import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { badRequest, notFound, serviceUnavailable } from "../../domain/errors.ts";
import { type ChainToken, formatAmount, parseAmount, TOKEN_DECIMALS } from "../../domain/money.ts";
import { type OnrampRequest, validateOnrampRequest } from "../../domain/onramp-request.ts";
import { FULFILLED } from "../../domain/onramp-state.ts";
import { isUuid } from "../../domain/validation.ts";
import type { Db } from "../../platform/db/database.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import { onrampNetworkOf, type ProviderOnrampSession } from "../card/onramp-provider.ts";
import { CardProviderError, type CardProviders, providerUnavailable } from "../card/provider.ts";
import type { Deliveries } from "../payments/incoming/chain-watcher.ts";
import { recordEvents } from "../webhooks/outbox.ts";
import { applySnapshot } from "./apply.ts";
import { confirmOnChain, type OnrampInbox } from "./confirm.ts";
import { reconcileSessions } from "./reconcile.ts";
import * as repo from "./repo.ts";
import { sandboxAmounts } from "./sandbox.ts";
import { eventOf, type OnrampView, onrampView } from "./view.ts";

// Fiat on-ramp sessions (D17): a customer buys crypto with a card at the card provider, sent to a
// workspace wallet locked in the session. The session is made at the provider first and recorded
// only once it exists (a refusal leaves nothing behind); the provider's events then move it
// forward (card/service.ts verifies and de-duplicates them; reconcile.ts asks the provider about
// sessions whose events were lost), each change announced with `onramp.session.updated`; the
// crypto counts once the chain shows the provider's transaction moving it to the wallet
// (confirm.ts), announced with `onramp.completed`. The sandbox completes a session at once on the
// simulated ledger.

/**
 * How long after its last change a session not ended (or fulfilled without its transaction named)
 * may still deliver to its wallet unannounced: transfers of its amount are held from payments
 * meanwhile (deliveries). One fulfilled and still unnamed after it counts as stuck (stuck()).
 */
const DELIVERY_WINDOW_MS = 3_600_000;
/** How far back the stuck-sessions metric looks: a week, the reconciler's window too. */
const STUCK_WINDOW_MS = 7 * 24 * 3_600_000;
/** The sandbox's sessions name the network a live one would (D17's destinationNetwork). */
const NETWORK = "ethereum";

export interface OnrampWallets {
  walletFor(
    scope: repo.Scope,
    network: string | null,
    walletType: "eoa" | "smart_wallet" | null,
  ): Promise<{ walletType: "eoa" | "smart_wallet"; from: Hex }>;
}

/** What a tenant is told when the provider does not open a session (its own message is logged). */
export const ONRAMP_PROVIDER_REFUSED =
  "The card provider did not open the on-ramp session. Try again later, or contact the operator if it persists.";

export class OnrampService {
  readonly #ctx: AppContext;
  readonly #providers: CardProviders;
  readonly #wallets: OnrampWallets;
  readonly #ledger: SimulatedLedger;
  readonly #inbox: OnrampInbox;

  constructor(
    ctx: AppContext,
    parts: { providers: CardProviders; wallets: OnrampWallets; ledger: SimulatedLedger; inbox: OnrampInbox },
  ) {
    this.#ctx = ctx;
    this.#inbox = parts.inbox;
    this.#providers = parts.providers;
    this.#wallets = parts.wallets;
    this.#ledger = parts.ledger;
  }

  async create(tenant: Tenant, body: unknown, customerIp: string): Promise<OnrampView> {
    const validated = validateOnrampRequest(body);
    if (!validated.ok) throw badRequest(validated.message);
    const request = validated.value;
    const on = this.#ctx.directory.resolveIn(tenant.environment, body);
    const scope = { workspaceId: tenant.workspaceId, environment: tenant.environment };
    // The sandbox without a network of its own completes sessions on the simulated ledger.
    if (scope.environment === "sandbox" && this.#ctx.chains.in("sandbox").length === 0) {
      if (on === null) throw new Error("the sandbox always has a network");
      return this.#sandbox(scope, request, on);
    }
    const provider = this.#providers[scope.environment];
    if (!provider) {
      const suffix = scope.environment.toUpperCase();
      throw serviceUnavailable(
        `The card on-ramp is not configured for ${scope.environment}: set CARD_SECRET_KEY_${suffix}`,
      );
    }
    const wallet = await this.#wallets.walletFor(scope, on, request.walletType);
    const chainId = on === null ? 0 : (this.#ctx.chains.of(scope.environment, on)?.config.chainId ?? 0);
    const network = onrampNetworkOf(chainId);
    if (!network || on === null)
      throw serviceUnavailable(`The card on-ramp does not deliver on this network (chain id ${chainId})`);
    const id = randomUUID();
    const currency = request.destinationCurrency;
    let session: Awaited<ReturnType<typeof provider.createOnrampSession>>;
    try {
      session = await provider.createOnrampSession({
        onrampId: id,
        walletAddress: wallet.from,
        destinationCurrency: currency === "USDC" ? "usdc" : "eth",
        destinationNetwork: network,
        sourceAmount: request.sourceAmountCents === null ? null : formatAmount(request.sourceAmountCents, 2),
        destinationAmount:
          request.destinationAmount === null
            ? null
            : formatAmount(request.destinationAmount, TOKEN_DECIMALS[currency]),
        customerIp,
      });
    } catch (err) {
      if (err instanceof CardProviderError) {
        // The provider's own words may name its account, its rules or other customers: they go
        // to the log (with the session's workspace), the tenant gets a generic detail.
        this.#ctx.log.warn(
          { err, workspaceId: scope.workspaceId, environment: scope.environment, onrampId: id },
          "The card provider did not open an on-ramp session",
        );
        throw providerUnavailable(undefined, ONRAMP_PROVIDER_REFUSED);
      }
      throw err;
    }
    const row = await repo.insertSession(this.#ctx.db, {
      id,
      scope,
      network: on,
      provider: "card",
      providerSessionId: session.id,
      status: session.status,
      walletType: wallet.walletType,
      walletAddress: wallet.from,
      destinationCurrency: currency,
      destinationNetwork: network,
      sourceAmount: session.sourceAmount,
      destinationAmount: session.destinationAmount,
      clientSecret: session.clientSecret ? this.#ctx.secrets.encrypt(session.clientSecret) : null,
      redirectUrl: session.redirectUrl,
      transactionId: session.transactionId?.toLowerCase() ?? null,
      credited: null,
      createdAt: this.#ctx.now(),
    });
    return onrampView(row, session.clientSecret);
  }

  /** A sandbox session, complete at once: the ledger's credit, the session and its two events in one transaction. */
  async #sandbox(scope: repo.Scope, request: OnrampRequest, network: string): Promise<OnrampView> {
    const wallet = await this.#wallets.walletFor(scope, network, request.walletType);
    const id = randomUUID();
    const currency = request.destinationCurrency;
    const amounts = sandboxAmounts(request);
    const reference = `onramp:${id}`;
    const now = this.#ctx.now();
    const clientSecret = `cos_sandbox_${id.replaceAll("-", "")}_secret`;
    const row = await this.#ctx.db.transaction().execute(async (trx) => {
      await this.#ledger.credit(
        { network, address: wallet.from, token: currency, amount: amounts.units, reference },
        trx,
      );
      const created = await repo.insertSession(trx, {
        id,
        scope,
        network,
        provider: "sandbox",
        providerSessionId: `sandbox_${id}`,
        status: FULFILLED,
        walletType: wallet.walletType,
        walletAddress: wallet.from,
        destinationCurrency: currency,
        destinationNetwork: NETWORK,
        sourceAmount: amounts.sourceAmount,
        destinationAmount: formatAmount(amounts.units, TOKEN_DECIMALS[currency]),
        clientSecret: this.#ctx.secrets.encrypt(clientSecret),
        redirectUrl: null,
        transactionId: sandboxTxHash(reference),
        credited: { amount: amounts.units, at: now },
        createdAt: now,
      });
      // As a live session announces its end: its last status change, then its completion.
      await recordEvents(trx, [
        { ...eventOf(created), type: "onramp.session.updated" },
        { ...eventOf(created), type: "onramp.completed" },
      ]);
      return created;
    });
    return onrampView(row, clientSecret);
  }

  async get(tenant: Tenant, id: string): Promise<OnrampView> {
    const scope = { workspaceId: tenant.workspaceId, environment: tenant.environment };
    const row = isUuid(id) ? await repo.findInScope(this.#ctx.db, scope, id) : undefined;
    if (!row) throw notFound("On-ramp session not found");
    return onrampView(row, row.client_secret ? this.#ctx.secrets.decrypt(row.client_secret) : null);
  }

  async list(tenant: Tenant, page: { limit: number; offset: number }) {
    const scope = { workspaceId: tenant.workspaceId, environment: tenant.environment };
    const { rows, total } = await repo.listSessions(this.#ctx.db, scope, page);
    return { sessions: rows.map((row) => onrampView(row)), total, limit: page.limit, offset: page.offset };
  }

  /**
   * A verified, first-seen `crypto.onramp_session_updated`, its session read by the card adapter
   * (card/service.ts claimed it in `trx`): moves the session forward, announced (apply.ts, as the
   * reconciler does); what the event did, for the event's record.
   */
  async applyEvent(
    trx: Db,
    environment: Environment,
    event: { id: string; session: ProviderOnrampSession },
  ): Promise<string> {
    const applied = await applySnapshot(this.#ctx, this.#inbox, trx, environment, event.session, {
      eventId: event.id,
    });
    return applied.outcome;
  }

  /**
   * Asks the provider about sessions whose events may have been lost and applies what it answers
   * (reconcile.ts; the `onramp.sessions` job's tick); how many changed.
   */
  reconcile(): Promise<number> {
    return reconcileSessions(this.#ctx, this.#providers, this.#inbox);
  }

  /** The onramp_sessions_stuck metric's counts (a gauge read when scraped). */
  stuck() {
    const now = this.#ctx.now().getTime();
    return repo.stuckCounts(this.#ctx.db, {
      madeSince: new Date(now - STUCK_WINDOW_MS),
      namedBy: new Date(now - DELIVERY_WINDOW_MS),
    });
  }

  /** Credits the fulfilled sessions whose transaction the chain now confirms; how many (a job's tick). */
  confirm(on: OnNetwork): Promise<number> {
    const chain = this.#ctx.chains.of(on.environment, on.id);
    if (!chain) return Promise.resolve(0);
    return confirmOnChain(this.#ctx, chain.network, this.#inbox);
  }

  /**
   * What of a scan's incoming transfers on-ramp sessions account for (the chain watcher's question):
   * - `named`: deliveries a session names (`txHash|wallet|currency`, lower-case): the sessions';
   * - `expected`: transfers that may be a delivery not named yet (`wallet|currency|units` → the
   *   session): of a session's currency, to its wallet, of exactly its destination amount, while
   *   it is not ended (or fulfilled without its transaction named) and has changed within the hour.
   *   Those pay no payment meanwhile (the inbox holds them: the session claims its own, the merchant
   *   can attach the others); any other transfer pays its payment, so a session never stops a
   *   payer's transfer from paying, and a session quiet for an hour holds nothing.
   */
  async deliveries(on: OnNetwork, transfers: readonly IncomingTransfer[]): Promise<Deliveries> {
    const since = new Date(this.#ctx.now().getTime() - DELIVERY_WINDOW_MS);
    const wallets = [...new Set(transfers.map((t) => t.to.toLowerCase()))];
    const [named, open] = await Promise.all([
      repo.onrampTransactions(
        this.#ctx.db,
        on,
        transfers.map((t) => t.txHash),
      ),
      repo.awaitingDelivery(this.#ctx.db, on, wallets, since),
    ]);
    const expected = new Map<string, string>();
    for (const row of open) {
      const currency = row.destination_currency as ChainToken;
      const units = parseAmount(row.destination_amount, TOKEN_DECIMALS[currency]);
      if (units !== null) expected.set(`${row.wallet_address.toLowerCase()}|${currency}|${units}`, row.id);
    }
    return { named, expected };
  }
}
