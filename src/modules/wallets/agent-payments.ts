import { decodePaymentRequiredHeader } from "@x402/core/http";
import type { PaymentRequired } from "@x402/core/types";
import { isHex } from "viem";
import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import {
  AGENT_PAYMENT_STATUSES,
  AGENT_PAYMENT_TRANSITIONS,
  type AgentPaymentTrigger,
  isAgentPaymentStatus,
} from "../../domain/agent-payment-state.ts";
import {
  badRequest,
  ConcurrentChange,
  conflict,
  InternalError,
  notFound,
  PolicyRefused,
  serviceUnavailable,
} from "../../domain/errors.ts";
import type { AgentPaymentEventData } from "../../domain/events.ts";
import { formatAmount, isWalletCurrency, TOKEN_DECIMALS } from "../../domain/money.ts";
import {
  amountsFromStored,
  capWindows,
  decide,
  NO_POLICY,
  originOf,
  parsePolicy,
  policyView,
  type SpendingPolicy,
  storedAmounts,
} from "../../domain/spending-policy.ts";
import { httpUrlProblem, isPlainObject, isUuid } from "../../domain/validation.ts";
import { chooseRequirement, type PayableNetwork, parsePaymentRequired } from "../../domain/x402-choice.ts";
import type { Db } from "../../platform/db/database.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import { jsonValueProblem } from "../../platform/http/input-rules.ts";
import { recordEvents } from "../webhooks/outbox.ts";
import type { AuthorizationRow, PolicyRow, SigningWallet } from "./agent-payments-repo.ts";
import * as repo from "./agent-payments-repo.ts";
import type { AgentWalletsService } from "./service.ts";
import { signExactPayment } from "./x402-signer.ts";

// Agent wallets paying over x402 (D23, issue 40): each agent wallet's spending policy, and
// `pay`, which checks a server's PaymentRequired against it, reserves the amount and answers the
// signed PAYMENT-SIGNATURE header value; the service fetches nothing, the agent sends it itself. A
// payment above the policy's approvalAbove waits for a person (approve / deny; the dashboard will
// call the same methods). Each change is one transaction with its event, under the wallet's row
// lock, so the caps hold across concurrent requests and instances.

export type PayAnswer =
  | { status: "authorized"; paymentSignature: string; authorizationId: string; expiresAt: string }
  | { status: "approval_required"; authorizationId: string };
/** A payment signed now: a pay within approvalAbove, or an approval. */
export type AuthorizedAnswer = Extract<PayAnswer, { status: "authorized" }>;

export class AgentPaymentsService {
  readonly #ctx: AppContext;
  readonly #wallets: AgentWalletsService;

  constructor(ctx: AppContext, wallets: AgentWalletsService) {
    this.#ctx = ctx;
    this.#wallets = wallets;
  }

  /** The agent wallet's policy as PUT takes it; `{}` when it has none (no limits). */
  async policy(principal: Tenant, walletId: string): Promise<Record<string, unknown>> {
    const wallet = await this.#wallets.find(principal, walletId);
    agentOnly(wallet.type);
    return policyView(policyOf(await repo.findPolicy(this.#ctx.db, wallet.id)));
  }

  /** Replaces the agent wallet's whole policy: a field left out is no limit. */
  async setPolicy(principal: Tenant, walletId: string, body: unknown): Promise<Record<string, unknown>> {
    const policy = parsePolicy(body);
    return this.#ctx.db.transaction().execute(async (trx) => {
      const wallet = await this.#lock(trx, principal, walletId);
      const row = await repo.savePolicy(trx, principal, wallet.id, stored(policy), this.#ctx.now());
      return policyView(policyOf(row));
    });
  }

  /**
   * Pays a server's 402 (`{paymentRequired, resource}`): the requirement the wallet can pay, judged
   * by its policy; refused (403 naming the rule), held for approval, or signed, and recorded.
   */
  async pay(principal: Tenant, walletId: string, body: unknown): Promise<PayAnswer> {
    if (!isPlainObject(body)) throw badRequest("Request body must be a JSON object");
    const problem = httpUrlProblem("resource", body.resource);
    if (problem) throw badRequest(problem);
    const resource = String(body.resource);
    const paymentRequired = readPaymentRequired(body.paymentRequired);
    const wallet = await this.#wallets.find(principal, walletId);
    agentOnly(wallet.type);
    const chosen = chooseRequirement(
      paymentRequired,
      this.#networks(principal.environment),
      wallet.currencies,
    );
    const origin = originOf(resource) ?? resource;
    const now = this.#ctx.now();
    const { dayStart, monthStart } = capWindows(now);
    return this.#ctx.db.transaction().execute(async (trx) => {
      const locked = await this.#lock(trx, principal, wallet.id);
      const policy = policyOf(await repo.findPolicy(trx, locked.id));
      const reserved = await repo.reservedSince(trx, locked.id, chosen.currency, dayStart, monthStart);
      const decision = decide(policy, { ...chosen, origin }, reserved);
      if (decision.outcome === "refused") throw new PolicyRefused(decision.message, decision.rule);
      // Only the chosen requirement is kept: it is what the payload's `accepted` repeats.
      const single: PaymentRequired = { ...paymentRequired, accepts: [chosen.requirement] };
      const signed =
        decision.outcome === "authorized" ? await signExactPayment(keyOf(this.#ctx, locked), single) : null;
      const trigger = signed ? "issued" : "held_for_approval";
      const row = await repo.insertAuthorization(
        trx,
        principal,
        trigger,
        {
          walletId: locked.id,
          payer: locked.address,
          network: chosen.network,
          caip2: chosen.caip2,
          asset: chosen.requirement.asset,
          currency: chosen.currency,
          amount: chosen.amount,
          payTo: chosen.payTo,
          resourceUrl: resource,
          resourceOrigin: origin,
          paymentRequired: single,
          createdAt: now,
        },
        signed,
      );
      await this.#announce(trx, principal, trigger, row);
      if (!signed) return { status: "approval_required", authorizationId: row.id };
      return {
        status: "authorized",
        paymentSignature: signed.paymentSignature,
        authorizationId: row.id,
        expiresAt: signed.validBefore.toISOString(),
      };
    });
  }

  /** Signs a payment that waits for approval: the same answer as a pay that was authorized. */
  async approve(principal: Tenant, walletId: string, authorizationId: string): Promise<AuthorizedAnswer> {
    return this.#ctx.db.transaction().execute(async (trx) => {
      const { wallet, row } = await this.#waiting(trx, principal, walletId, authorizationId, "approved");
      const signed = await signExactPayment(
        keyOf(this.#ctx, wallet),
        parsePaymentRequired(row.payment_required),
      );
      // Kept for the agent, who was not there when a person approved it (GET …/authorizations/{id}).
      const encryptedSignature = this.#ctx.secrets.encrypt(signed.paymentSignature);
      const moved = await repo.decideAuthorization(trx, row.id, "approved", this.#ctx.now(), {
        ...signed,
        encryptedSignature,
      });
      if (!moved) throw new ConcurrentChange("The authorization changed meanwhile; read it again");
      await this.#announce(trx, principal, "approved", moved);
      return {
        status: "authorized",
        paymentSignature: signed.paymentSignature,
        authorizationId: moved.id,
        expiresAt: signed.validBefore.toISOString(),
      };
    });
  }

  /** Refuses a payment that waits for approval: its reservation is released. */
  async deny(principal: Tenant, walletId: string, authorizationId: string): Promise<AgentPaymentEventData> {
    return this.#ctx.db.transaction().execute(async (trx) => {
      const { row } = await this.#waiting(trx, principal, walletId, authorizationId, "denied");
      const moved = await repo.decideAuthorization(trx, row.id, "denied", this.#ctx.now(), null);
      if (!moved) throw new ConcurrentChange("The authorization changed meanwhile; read it again");
      await this.#announce(trx, principal, "denied", moved);
      return authorizationView(moved);
    });
  }

  async authorization(
    principal: Tenant,
    walletId: string,
    authorizationId: string,
  ): Promise<AgentPaymentEventData & { paymentSignature?: string }> {
    const wallet = await this.#wallets.find(principal, walletId);
    agentOnly(wallet.type);
    const row = isUuid(authorizationId)
      ? await repo.findAuthorization(this.#ctx.db, principal, wallet.id, authorizationId)
      : undefined;
    if (!row) throw notFound("Authorization not found");
    // An approved payment's signature, for its agent, while it can still be used.
    const usable =
      row.status === "authorized" &&
      row.payment_signature !== null &&
      row.valid_before !== null &&
      row.valid_before.getTime() > this.#ctx.now().getTime();
    if (!usable || row.payment_signature === null) return authorizationView(row);
    return { ...authorizationView(row), paymentSignature: this.#ctx.secrets.decrypt(row.payment_signature) };
  }

  /** A page of the wallet's authorizations, newest first, optionally of one status. */
  async authorizations(
    principal: Tenant,
    walletId: string,
    query: { page: number; limit: number; status?: string | undefined },
  ) {
    if (query.status !== undefined && !isAgentPaymentStatus(query.status))
      throw badRequest(`status must be one of ${AGENT_PAYMENT_STATUSES.join(", ")}`);
    const wallet = await this.#wallets.find(principal, walletId);
    agentOnly(wallet.type);
    const { rows, total } = await repo.listAuthorizations(this.#ctx.db, principal, wallet.id, {
      status: query.status,
      limit: query.limit,
      offset: (query.page - 1) * query.limit,
    });
    return {
      items: rows.map(authorizationView),
      pagination: { total, page: query.page, limit: query.limit, totalPages: Math.ceil(total / query.limit) },
    };
  }

  /** The payments of all the tenant's agent wallets that wait for approval, newest first (the dashboard's queue). */
  async waiting(principal: Tenant, query: { page: number; limit: number }) {
    const { rows, total } = await repo.listOfStatus(this.#ctx.db, principal, {
      status: "approval_required",
      limit: query.limit,
      offset: (query.page - 1) * query.limit,
    });
    return { items: rows.map(authorizationView), total };
  }

  /** The environment's networks as the choice of a requirement needs them; 503 when it has none. */
  #networks(environment: Environment): PayableNetwork[] {
    const { networks } = this.#ctx.directory.list(environment);
    if (networks.length === 0) throw serviceUnavailable("Live network is not configured");
    return networks;
  }

  /** The tenant's agent wallet, locked for this transaction (repo.lockWallet). */
  async #lock(trx: Db, principal: Tenant, walletId: string): Promise<SigningWallet> {
    const wallet = isUuid(walletId) ? await repo.lockWallet(trx, principal, walletId) : undefined;
    if (!wallet) throw notFound("Wallet not found");
    agentOnly(wallet.type);
    return wallet;
  }

  /** A waiting authorization of the tenant's agent wallet, locked, for `trigger`'s decision; else 404/409. */
  async #waiting(
    trx: Db,
    principal: Tenant,
    walletId: string,
    authorizationId: string,
    trigger: "approved" | "denied",
  ): Promise<{ wallet: SigningWallet; row: AuthorizationRow }> {
    const wallet = await this.#lock(trx, principal, walletId);
    const row = isUuid(authorizationId)
      ? await repo.findAuthorization(trx, principal, wallet.id, authorizationId, true)
      : undefined;
    if (!row) throw notFound("Authorization not found");
    const rule = AGENT_PAYMENT_TRANSITIONS[trigger];
    if (row.status !== rule.from) {
      const verb = trigger === "approved" ? "approved" : "denied";
      throw conflict(`Authorization is ${row.status}: only one awaiting approval can be ${verb}`, {
        currentStatus: row.status,
      });
    }
    return { wallet, row };
  }

  async #announce(trx: Db, principal: Tenant, trigger: AgentPaymentTrigger, row: AuthorizationRow) {
    const event = AGENT_PAYMENT_TRANSITIONS[trigger].event;
    if (event === null) return;
    await recordEvents(trx, [
      {
        workspaceId: principal.workspaceId,
        environment: principal.environment,
        type: event,
        payload: { ...authorizationView(row) },
      },
    ]);
  }
}

/** A user wallet has no policy and pays nothing over x402: 400, as its type never changes. */
function agentOnly(type: string): void {
  if (type !== "agent")
    throw badRequest("This is a user wallet: spending policies and x402 payments are for agent wallets only");
}

/** `paymentRequired`: the decoded object, or the PAYMENT-REQUIRED header value (base64 JSON) as is. */
function readPaymentRequired(value: unknown): PaymentRequired {
  if (typeof value !== "string") return parsePaymentRequired(value);
  let decoded: unknown;
  try {
    decoded = decodePaymentRequiredHeader(value);
  } catch {
    throw badRequest(
      "paymentRequired is neither a PaymentRequired object nor a base64 PAYMENT-REQUIRED header value",
    );
  }
  const problem = jsonValueProblem(decoded, "paymentRequired");
  if (problem) throw badRequest(problem);
  return parsePaymentRequired(decoded);
}

function keyOf(ctx: AppContext, wallet: SigningWallet) {
  const key = ctx.secrets.decrypt(wallet.encrypted_private_key);
  if (!isHex(key)) throw new InternalError("a wallet's stored key is not a hex private key");
  return key;
}

function policyOf(row: PolicyRow | undefined): SpendingPolicy {
  if (!row) return NO_POLICY;
  return {
    maxPerPayment: amountsFromStored(row.max_per_payment),
    daily: amountsFromStored(row.daily),
    monthly: amountsFromStored(row.monthly),
    allowedPayees: row.allowed_payees,
    allowedOrigins: row.allowed_origins,
    approvalAbove: amountsFromStored(row.approval_above),
  };
}

function stored(policy: SpendingPolicy): repo.StoredPolicy {
  return {
    max_per_payment: storedAmounts(policy.maxPerPayment),
    daily: storedAmounts(policy.daily),
    monthly: storedAmounts(policy.monthly),
    allowed_payees: policy.allowedPayees,
    allowed_origins: policy.allowedOrigins,
    approval_above: storedAmounts(policy.approvalAbove),
  };
}

/** An authorization as the API and the agent.payment.* events show it. */
export function authorizationView(row: AuthorizationRow): AgentPaymentEventData {
  if (!isWalletCurrency(row.currency)) throw new InternalError("an authorization's currency is unknown");
  if (!isAgentPaymentStatus(row.status)) throw new InternalError("an authorization's status is unknown");
  const iso = (date: Date | null) => (date === null ? null : date.toISOString());
  return {
    authorizationId: row.id,
    walletId: row.wallet_id,
    status: row.status,
    network: row.network,
    caip2: row.caip2,
    currency: row.currency,
    asset: row.asset,
    amount: formatAmount(BigInt(row.amount), TOKEN_DECIMALS[row.currency]),
    payTo: row.pay_to,
    resource: row.resource_url,
    origin: row.resource_origin,
    nonce: row.nonce,
    validAfter: iso(row.valid_after),
    validBefore: iso(row.valid_before),
    createdAt: row.created_at.toISOString(),
    decidedAt: iso(row.decided_at),
    txHash: row.tx_hash,
  };
}
