import type { ChainToken, Hex } from "../../chain/network.ts";
import type { SimulatedLedger } from "../../chain/simulated/ledger.ts";
import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { badRequest, forbidden } from "../../domain/errors.ts";
import {
  CRYPTO_TOKENS,
  formatAmount,
  isWalletCurrency,
  TOKEN_DECIMALS,
  type TokenSymbol,
} from "../../domain/money.ts";
import { validateSandboxCredit } from "../../domain/sandbox-credit.ts";
import { heldInbox } from "../../domain/unsettled-payments.ts";
import { parseAmountField } from "../../domain/validation.ts";
import { walletAddress, walletTypeFor } from "../../domain/wallet-choice.ts";
import { acrossNetworks, type StatusTotal } from "../../platform/db/status-totals.ts";
import type { Tenant } from "../../platform/http/auth.ts";
import type { Rails } from "../../rails/index.ts";
import type { Rail } from "../../rails/rail.ts";
import type { PaymentsService } from "../payments/service.ts";
import type { AgentWalletsService } from "../wallets/service.ts";
import { recordEvents } from "../webhooks/outbox.ts";
import type { WorkspaceProfile, WorkspacesService } from "../workspaces/service.ts";
import * as walletRepo from "./wallet-repo.ts";

// The workspace wallet's money: balances of the EOA (and smart wallet) for every token of the
// environment, aggregated stats, and the sandbox faucet.

/** Completed swaps of one pair of tokens, as the stats show them (the swaps module's totals). */
export interface SwapTotal {
  sellToken: string;
  buyToken: string;
  count: number;
  sold: string;
  bought: string;
}

export class WorkspaceWalletService {
  readonly #ctx: AppContext;
  readonly #workspaces: WorkspacesService;
  readonly #rails: Rails;
  readonly #ledger: SimulatedLedger;
  readonly #payments: PaymentsService;
  readonly #agentWallets: AgentWalletsService;
  /** The swaps' part of the stats (the swaps module's, handed in by app.ts: it depends on this one). */
  readonly #swapTotals: (tenant: Tenant) => Promise<SwapTotal[]>;

  constructor(
    ctx: AppContext,
    workspaces: WorkspacesService,
    rails: Rails,
    ledger: SimulatedLedger,
    payments: PaymentsService,
    agentWallets: AgentWalletsService,
    swapTotals: (tenant: Tenant) => Promise<SwapTotal[]>,
  ) {
    this.#swapTotals = swapTotals;
    this.#ctx = ctx;
    this.#workspaces = workspaces;
    this.#rails = rails;
    this.#ledger = ledger;
    this.#payments = payments;
    this.#agentWallets = agentWallets;
  }

  /**
   * The wallets' balances on the environment's default network, and on each of its networks
   * (`networks`, D22), with `held`: what of them open inbox transfers hold (issue 39). An
   * environment without a network (live without a chain) shows the addresses with no balances.
   */
  async balances(principal: Tenant) {
    const workspace = await this.#workspaces.profile(principal.workspaceId);
    const { environment } = principal;
    const networks = await Promise.all(
      this.#rails
        .in(environment)
        .map(
          async ([id, rails]) => [id, await this.#walletsOn(workspace, environment, id, rails.eoa)] as const,
        ),
    );
    const onDefault = networks[0]?.[1] ?? (await this.#walletsOn(workspace, environment, null, undefined));
    return { environment, ...onDefault, networks: Object.fromEntries(networks) };
  }

  async #walletsOn(
    workspace: WorkspaceProfile,
    environment: Environment,
    network: string | null,
    channel: Rail | undefined,
  ) {
    // The payment tokens, and DAI where the network has it (a swap may buy it, D16); the ledger has it.
    const chain = network === null ? undefined : this.#ctx.chains.of(environment, network);
    const withDai = chain ? chain.network.tokens.includes("DAI") : environment === "sandbox";
    const tokens: ChainToken[] = [...CRYPTO_TOKENS, ...(withDai ? (["DAI"] as const) : [])];
    const read = async (address: string | null) => {
      if (!address) return null;
      const balances: Record<string, string> = {};
      // Of it, the open inbox transfers' money, per token: held for their senders (issue 39).
      const held: Record<string, string> = {};
      if (channel && network !== null) {
        const [values, open] = await Promise.all([
          Promise.all(tokens.map((t) => channel.balance(address as Hex, t))),
          this.#payments.openInboxOn({ environment, id: network }, address),
        ]);
        tokens.forEach((t, i) => {
          balances[t] = formatAmount(values[i] ?? 0n, TOKEN_DECIMALS[t]);
        });
        for (const [token, { amount }] of heldInbox(new Map(), open))
          held[token] = formatAmount(amount, TOKEN_DECIMALS[token as TokenSymbol]);
      }
      // Only when something is held: a wallet's answer without inbox money is as it always was.
      return Object.keys(held).length > 0 ? { address, balances, held } : { address, balances };
    };
    const [eoa, smartWallet] = await Promise.all([
      read(workspace.eoaAddress),
      read(workspace.smartWalletAddress),
    ]);
    return { eoa, smartWallet };
  }

  async faucet(principal: Tenant, body: unknown) {
    if (principal.environment !== "sandbox")
      throw forbidden("The faucet exists only in the sandbox: use a svc_test_ key");
    const input = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
    // The faucet credits the simulated ledger's network the request names (D22), else sandbox-a.
    const network = this.#ctx.directory.resolveIn(principal.environment, input);
    if (network === null) throw new Error("the sandbox always has a network");
    if (input.walletId !== undefined) return this.#faucetToAgentWallet(principal, network, input);
    const credit = validateSandboxCredit(input);
    if (!credit.ok) throw badRequest(credit.message);
    const { token, amount } = credit.value;
    const workspace = await this.#workspaces.profile(principal.workspaceId);
    // Unnamed, the wallet a payout of the sandbox would leave from: the workspace's default (D21).
    const walletType = walletTypeFor(credit.value.walletType, workspace, principal.environment);
    const address = walletAddress(workspace, walletType);
    if (!address)
      throw badRequest(
        "No smart wallet for this workspace: create one with POST /api/v1/workspaces/{id}/smart-wallet",
      );
    const reference = `faucet:${crypto.randomUUID()}`;
    const balance = await this.#ledger.credit({ network, address, token, amount, reference });
    return {
      tokenSymbol: token,
      walletType,
      address,
      network,
      balance: formatAmount(balance, TOKEN_DECIMALS[token]),
    };
  }

  /**
   * The faucet also credits an agent or user wallet (`walletId`): its balance change is reported
   * as wallet.balance.updated, written with the credit in one transaction.
   */
  async #faucetToAgentWallet(principal: Tenant, network: string, input: Record<string, unknown>) {
    const token = input.tokenSymbol;
    if (!isWalletCurrency(token)) throw badRequest("Invalid token symbol");
    const decimals = TOKEN_DECIMALS[token];
    const amount = parseAmountField(input.amount, decimals);
    if (amount === null) throw badRequest("Amount must be a positive number");
    const wallet = await this.#agentWallets.find(principal, input.walletId);
    if (!wallet.currencies.includes(token)) throw badRequest(`This wallet does not hold ${token}`);
    const balance = await this.#ctx.db.transaction().execute(async (trx) => {
      const previous = await this.#ledger.balance(network, wallet.address, token, trx);
      const reference = `faucet:${crypto.randomUUID()}`;
      const next = await this.#ledger.credit(
        { network, address: wallet.address, token, amount, reference },
        trx,
      );
      await recordEvents(trx, [
        {
          workspaceId: principal.workspaceId,
          environment: principal.environment,
          type: "wallet.balance.updated",
          payload: {
            walletId: wallet.id,
            address: wallet.address,
            network,
            currency: token,
            balance: formatAmount(next, decimals),
            previousBalance: formatAmount(previous, decimals),
            updatedAt: this.#ctx.now().toISOString(),
          },
        },
      ]);
      return next;
    });
    return {
      tokenSymbol: token,
      walletId: wallet.id,
      address: wallet.address,
      network,
      balance: formatAmount(balance, decimals),
    };
  }

  async stats(principal: Tenant) {
    const payments = await this.#payments.totalsByStatus(principal);
    const payouts = await walletRepo.totalsByStatus(this.#ctx.db, principal);
    const swaps = await this.#swapTotals(principal);
    const shape = (rows: readonly Omit<StatusTotal, "network">[]) =>
      rows.map((r) => ({
        status: r.status,
        tokenSymbol: r.token_symbol,
        count: Number(r.count),
        volume: formatAmount(BigInt(r.volume), TOKEN_DECIMALS[r.token_symbol as TokenSymbol]),
      }));
    // Each network's own totals (D22); card payments are on none and count in the totals only.
    const ids = [
      ...new Set([...payments, ...payouts].flatMap((r) => (r.network === null ? [] : [r.network]))),
    ];
    const networks = Object.fromEntries(
      ids.sort().map((id) => [
        id,
        {
          payments: shape(payments.filter((r) => r.network === id)),
          payouts: shape(payouts.filter((r) => r.network === id)),
        },
      ]),
    );
    return {
      environment: principal.environment,
      payments: shape(acrossNetworks(payments)),
      payouts: shape(acrossNetworks(payouts)),
      swaps,
      networks,
    };
  }
}
