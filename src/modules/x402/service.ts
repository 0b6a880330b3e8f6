import { x402Facilitator } from "@x402/core/facilitator";
import type {
  SchemeNetworkFacilitator,
  SettleResponse,
  SupportedResponse,
  VerifyResponse,
} from "@x402/core/types";
import { PAYMENT_IDENTIFIER } from "@x402/extensions/payment-identifier";
import type { Chain } from "../../chain/chains.ts";
import type { ChainToken, Hex } from "../../chain/network.ts";
import type { SimulatedLedger } from "../../chain/simulated/ledger.ts";
import { SIMULATED_NETWORKS } from "../../chain/simulated/networks.ts";
import { type LedgerFacilitator, ledgerX402Scheme } from "../../chain/simulated/x402-signer.ts";
import type { FacilitatorWallet } from "../../chain/x402-scheme.ts";
import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { conflict, firstLine, firstLineOf } from "../../domain/errors.ts";
import {
  checkRequirements,
  sameAddress,
  X402_SCHEMES,
  X402_VERSION,
  type X402Network,
  type X402Scheme,
} from "../../domain/x402.ts";
import { settleOutcome, type X402SettleEnd } from "../../domain/x402-settle-state.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import type { PaymentsService } from "../payments/service.ts";
import type { X402PaymentInput } from "../payments/x402-payments.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import * as repo from "./repo.ts";
import { type FacilitatorRequest, parseFacilitatorRequest } from "./request.ts";
import { StaleClaims } from "./stale-claims.ts";
import type { FacilitatorWallets } from "./wallets.ts";

// The x402 v2 facilitator of each workspace (D23): /supported, /verify and /settle with the
// workspace's key, its environment's networks. x402's own packages check the payload (EIP-712,
// simulation, the settle call); this module decides what a workspace may be paid with, claims
// each settle once (its authorization, its payment-identifier), and makes every settlement a
// payment of the usual lifecycle (payments/x402-payments.ts): on a chain, written pending before
// the facilitator wallet sends the payer's authorized transfer; on the sandbox's ledger, settled
// with the transfer in one transaction.

/** What a settle or verify is about, once this facilitator accepts to look at it. */
interface Plan {
  scheme: X402Scheme;
  network: X402Network;
  token: ChainToken;
  payment: X402PaymentInput;
}

type Planned = { ok: true; plan: Plan } | { ok: false; reason: string; message: string; payer: string };

/** x402's reason for an authorization already used, per scheme (its nonce on the token or on Permit2). */
const NONCE_USED: Record<X402Scheme, string> = {
  exact: "invalid_exact_evm_nonce_already_used",
  upto: "permit2_invalid_nonce",
};

export class X402Service {
  readonly #ctx: AppContext;
  readonly #workspaces: WorkspacesService;
  readonly #payments: PaymentsService;
  readonly #ledger: SimulatedLedger;
  readonly #wallets: FacilitatorWallets;
  readonly #stale: StaleClaims;

  constructor(
    ctx: AppContext,
    deps: {
      workspaces: WorkspacesService;
      payments: PaymentsService;
      ledger: SimulatedLedger;
      wallets: FacilitatorWallets;
    },
  ) {
    this.#ctx = ctx;
    this.#workspaces = deps.workspaces;
    this.#payments = deps.payments;
    this.#ledger = deps.ledger;
    this.#wallets = deps.wallets;
    this.#stale = new StaleClaims(ctx, deps.payments);
  }

  /** Every workspace's facilitator wallet, for the gas top-up job. */
  facilitatorAddresses(): Promise<string[]> {
    return this.#wallets.addresses();
  }

  async supported(tenant: Tenant): Promise<SupportedResponse> {
    const signer = await this.#wallets.addressOf(tenant.workspaceId);
    const schemes = Object.keys(X402_SCHEMES) as X402Scheme[];
    return {
      // upto's payer signs for the facilitator that alone may settle: it is named in the kind.
      kinds: this.#networks(tenant.environment).flatMap((n) =>
        schemes.map((scheme) => ({
          x402Version: X402_VERSION,
          scheme,
          network: n.caip2 as `${string}:${string}`,
          ...(scheme === "upto" ? { extra: { facilitatorAddress: signer } } : {}),
        })),
      ),
      extensions: [PAYMENT_IDENTIFIER],
      signers: { "eip155:*": [signer] },
    };
  }

  async verify(tenant: Tenant, body: unknown): Promise<VerifyResponse> {
    const request = parseFacilitatorRequest(body);
    const planned = await this.#plan(tenant, request);
    if (!planned.ok)
      return {
        isValid: false,
        invalidReason: planned.reason,
        invalidMessage: planned.message,
        payer: planned.payer,
      };
    const scheme = await this.#scheme(tenant, planned.plan, null);
    const verified = await facilitatorFor(planned.plan, scheme).verify(request.payload, request.requirements);
    // x402 quotes the node's error whole; its later lines (request dumps) never reach an answer.
    return verified.invalidMessage
      ? { ...verified, invalidMessage: firstLine(verified.invalidMessage) }
      : verified;
  }

  async settle(tenant: Tenant, body: unknown): Promise<SettleResponse> {
    const request = parseFacilitatorRequest(body);
    const planned = await this.#plan(tenant, request);
    const network = request.requirements.network;
    if (!planned.ok)
      return {
        success: false,
        errorReason: planned.reason,
        errorMessage: planned.message,
        payer: planned.payer,
        transaction: "",
        network,
      };
    const { plan } = planned;
    const claim = await repo.claimSettle(this.#ctx.db, {
      workspaceId: tenant.workspaceId,
      environment: tenant.environment,
      network: plan.network.id,
      asset: request.requirements.asset,
      payer: plan.payment.origin.payer,
      nonce: plan.payment.origin.nonce,
      identifier: request.identifier,
      fingerprint: request.fingerprint,
    });
    let claimId: string;
    if (claim.kind === "claimed") claimId = claim.id;
    else if (!(claim.earlier.stale && this.#sameRequest(tenant, request, claim.earlier)))
      return this.#repeat(tenant, request, claim.earlier, plan);
    else {
      const { origin } = plan.payment;
      const recovered = await this.#stale.recover(tenant, {
        claimId: claim.earlier.id,
        scheme: plan.scheme,
        network: plan.network.id,
        caip2: network,
        payer: origin.payer,
        nonce: origin.nonce,
      });
      if (recovered.kind === "answered") return recovered.response;
      if (recovered.kind === "in_progress") throw conflict("A settle of this payment is in progress");
      claimId = claim.earlier.id;
    }
    let response: SettleResponse;
    const settled: { paymentId: string | null } = { paymentId: null };
    try {
      const scheme = await this.#scheme(tenant, plan, { claimId, settled });
      response = await facilitatorFor(plan, scheme).settle(request.payload, request.requirements);
    } catch (err) {
      // Nothing is answered for it: a repeat settles afresh (a payment made meanwhile fails or is paid on its own).
      await this.#finish(claimId, "failed", { error: firstLineOf(err) }, settled.paymentId);
      throw err;
    }
    if (settled.paymentId)
      response = { ...response, extra: { ...response.extra, paymentId: settled.paymentId } };
    if (response.errorMessage) response = { ...response, errorMessage: firstLine(response.errorMessage) };
    await this.#finish(claimId, settleOutcome(response.success), { ...response }, settled.paymentId);
    return response;
  }

  /**
   * Ends a claim by the transition table. Only the settle that claimed it ends it, so a claim
   * found already ended is a fault of ours: said loudly, while the scheme's answer (money may have
   * moved) still goes to the caller.
   */
  async #finish(
    claimId: string,
    outcome: X402SettleEnd,
    response: Record<string, unknown>,
    paymentId: string | null,
  ): Promise<void> {
    const moved = await repo.finishSettle(
      this.#ctx.db,
      claimId,
      outcome,
      response,
      this.#ctx.now(),
      paymentId,
    );
    if (!moved)
      this.#ctx.log.error(
        { claimId, outcome },
        "x402 settle claim had already ended: its answer was not recorded",
      );
  }

  /** A settle that an earlier one holds: its answer again, or why not. */
  #repeat(
    tenant: Tenant,
    request: FacilitatorRequest,
    earlier: repo.EarlierSettle,
    plan: Plan,
  ): SettleResponse {
    const sameIdentifier = request.identifier !== null && earlier.identifier === request.identifier;
    if (this.#sameRequest(tenant, request, earlier)) {
      if (earlier.response === null) throw conflict("A settle of this payment is in progress");
      return earlier.response as SettleResponse;
    }
    if (sameIdentifier && earlier.workspace_id === tenant.workspaceId)
      throw conflict("payment-identifier already used with another payload", {
        identifier: request.identifier,
      });
    return {
      success: false,
      errorReason: NONCE_USED[plan.scheme],
      errorMessage: "This authorization is already settled or being settled",
      payer: plan.payment.origin.payer,
      transaction: "",
      network: request.requirements.network,
    };
  }

  /** A repeat of the earlier settle: the same workspace asking with the same request. */
  #sameRequest(tenant: Tenant, request: FacilitatorRequest, earlier: repo.EarlierSettle): boolean {
    return earlier.workspace_id === tenant.workspaceId && earlier.fingerprint === request.fingerprint;
  }

  /** The environment's networks as x402 names them, with the tokens it settles there (USDC: EIP-3009). */
  #networks(environment: Environment): X402Network[] {
    const chains = this.#ctx.chains.in(environment);
    if (chains.length > 0)
      return chains.map(({ config }) => ({
        id: config.id,
        caip2: config.caip2,
        tokens: [{ symbol: "USDC", address: config.tokens.USDC }],
      }));
    if (environment === "live") return [];
    return SIMULATED_NETWORKS.map((n) => ({
      id: n.id,
      caip2: `eip155:${n.chainId}`,
      tokens: n.tokens.USDC ? [{ symbol: "USDC", address: n.tokens.USDC }] : [],
    }));
  }

  async #plan(tenant: Tenant, request: FacilitatorRequest): Promise<Planned> {
    const { authorization, requirements, payload } = request;
    const payer = authorization?.from ?? "";
    const workspace = await this.#workspaces.receivingAddresses(tenant.workspaceId, requirements.payTo);
    const receiving = [workspace.eoaAddress, workspace.smartWalletAddress];
    const networks = this.#networks(tenant.environment);
    const checked = checkRequirements(requirements, authorization?.kind ?? null, networks, receiving);
    if (!checked.ok) return { ok: false, reason: checked.reason, message: checked.message, payer };
    if (!authorization) throw new Error("checkRequirements passed a payload that carries no authorization");
    if (checked.scheme === "upto" && authorization.facilitator === null)
      return {
        ok: false,
        reason: "invalid_payload",
        message: "An upto authorization names the facilitator that settles it (witness.facilitator)",
        payer,
      };
    await this.#ctx.chains.assertAnswers(tenant.environment, checked.network.id);
    const smart =
      workspace.smartWalletAddress !== null && sameAddress(workspace.smartWalletAddress, requirements.payTo);
    return {
      ok: true,
      plan: {
        scheme: checked.scheme,
        network: checked.network,
        token: checked.token as ChainToken,
        payment: {
          network: checked.network.id,
          token: checked.token as ChainToken,
          // exact: the whole authorized value (x402 checks the requirement asks for it); upto: what
          // the resource used, which x402 checks is within what was authorized.
          amount: checked.scheme === "exact" ? BigInt(authorization.value) : checked.amount,
          payTo: requirements.payTo,
          walletType: smart ? "smart_wallet" : "eoa",
          origin: {
            payer: authorization.from,
            resource: payload.resource?.url ?? null,
            scheme: checked.scheme,
            nonce: authorization.nonce,
          },
          validBefore: BigInt(authorization.validBefore),
        },
      },
    };
  }

  /**
   * x402's scheme on the plan's network, sending through the workspace's facilitator wallet.
   * `settling` null: a verify, which sends nothing.
   */
  async #scheme(
    tenant: Tenant,
    plan: Plan,
    settling: { claimId: string; settled: { paymentId: string | null } } | null,
  ): Promise<SchemeNetworkFacilitator> {
    const address = await this.#wallets.addressOf(tenant.workspaceId);
    const chain = this.#ctx.chains.of(tenant.environment, plan.network.id);
    if (chain)
      return chain.network.x402(this.#chainWallet(tenant, plan, chain, address, settling), plan.scheme);
    const network = SIMULATED_NETWORKS.find((n) => n.id === plan.network.id);
    if (!network) throw new Error(`no simulated network ${plan.network.id}`);
    const facilitator: LedgerFacilitator = {
      address,
      settle: async () => {
        if (!settling) throw new Error("a verify sends nothing");
        const result = await this.#payments.x402.settleOnLedger(tenant, plan.payment);
        if (result.status === "refused")
          throw new Error(
            result.reason === "nonce_used"
              ? "execution reverted: authorization is used (AuthorizationUsedOrCanceled)"
              : "execution reverted: ERC20InsufficientBalance (transfer amount exceeds balance)",
          );
        // Linked when the settle is finished: the payment and its transfer were written together.
        settling.settled.paymentId = result.payment.id;
        return result.txHash as Hex;
      },
    };
    return ledgerX402Scheme(this.#ledger, network, facilitator, plan.scheme);
  }

  /** The facilitator wallet on a chain: the payment is written before its transaction is recorded and sent. */
  #chainWallet(
    tenant: Tenant,
    plan: Plan,
    chain: Chain,
    address: Hex,
    settling: { claimId: string; settled: { paymentId: string | null } } | null,
  ): FacilitatorWallet {
    const sent = new Map<
      Hex,
      { paymentId: string; submitted: Awaited<ReturnType<FacilitatorWallets["send"]>> }
    >();
    return {
      address,
      send: async (call) => {
        if (!settling) throw new Error("a verify sends nothing");
        // Before the payment exists: a settlement that cannot pay its gas makes none.
        await this.#wallets.ensureGas(chain, address, call);
        const payment = await this.#payments.x402.open(tenant, plan.payment);
        settling.settled.paymentId = payment.id;
        await repo.linkPayment(this.#ctx.db, settling.claimId, payment.id);
        let submitted: Awaited<ReturnType<FacilitatorWallets["send"]>>;
        try {
          submitted = await this.#wallets.send(chain, tenant.workspaceId, call, (hash) =>
            this.#payments.x402.expectFence(payment.id, hash),
          );
        } catch (err) {
          await this.#payments.x402.fail(
            tenant,
            payment.id,
            `the settlement could not be sent: ${firstLineOf(err)}`,
          );
          throw err;
        }
        if (submitted.refusal && submitted.refusal.cancelHash !== null) {
          // The node refused it and a cancellation took its nonce: it will never be mined.
          await this.#payments.x402.fail(
            tenant,
            payment.id,
            `the node refused the settlement: ${submitted.refusal.reason}`,
          );
          throw new Error(submitted.refusal.reason);
        }
        sent.set(submitted.txHash, { paymentId: payment.id, submitted });
        return submitted.txHash;
      },
      outcome: async (hash) => {
        const mine = sent.get(hash);
        if (!mine) throw new Error(`the facilitator did not send ${hash}`);
        const outcome = await this.#wallets.outcome(chain, mine.submitted);
        if (outcome.status === "reverted")
          await this.#payments.x402.fail(tenant, mine.paymentId, "the settlement transaction reverted");
        return outcome;
      },
    };
  }
}

/** x402's facilitator with the one scheme a request is about, on its network. */
function facilitatorFor(plan: Plan, scheme: SchemeNetworkFacilitator): x402Facilitator {
  return new x402Facilitator().register(plan.network.caip2 as `${string}:${string}`, scheme);
}
