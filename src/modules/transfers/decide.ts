import type { Hex } from "../../chain/network.ts";
import type { AppContext } from "../../context.ts";
import { type BreakerState, decideAttempt, resume } from "../../domain/circuit-breaker.ts";
import { badRequest, serviceUnavailable } from "../../domain/errors.ts";
import { walletAddress, walletTypeFor } from "../../domain/wallet-choice.ts";
import { coalescedLookup } from "../../platform/db/coalesced-lookup.ts";
import type { Rails } from "../../rails/index.ts";
import type { Rail } from "../../rails/rail.ts";
import { UnknownNetwork } from "../networks/directory.ts";
import type { WorkspaceProfile } from "../workspaces/service.ts";
import * as breakers from "./breaker-repo.ts";
import type { Scope } from "./finish.ts";

// The decisions a payout takes before anything is recorded: may the workspace pay out now (the
// circuit breaker, part 3), and from which wallet, through which rail (walletType, part 4.18).

export type BreakerDecision = { allowed: true; failStreak: number } | { allowed: false; state: BreakerState };

export interface WalletChoice {
  rail: Rail;
  walletType: "eoa" | "smart_wallet";
  /** The wallet the money leaves. */
  from: Hex;
  /** The EOA whose key signs (for a smart wallet, its owner). */
  owner: Hex;
}

export class TransferDecisions {
  readonly #ctx: AppContext;
  readonly #rails: Rails;
  /** Breaker reads of payouts arriving together share one query. */
  readonly #breakers: (key: string) => Promise<BreakerState | undefined>;

  constructor(ctx: AppContext, rails: Rails) {
    this.#ctx = ctx;
    this.#rails = rails;
    this.#breakers = coalescedLookup((keys: readonly string[]) => breakers.readBreakers(ctx.db, keys));
  }

  /** 503 before anything else when the environment has no rail at all (no live network). */
  assertConfigured(scope: Scope): void {
    if (!this.#rails.of(scope.environment, null)?.eoa)
      throw serviceUnavailable("Live network is not configured");
  }

  /** NetworkUnavailable (503) when the chain the order moves on (else the default) does not answer. */
  async assertAnswers(scope: Scope, network: string | null): Promise<void> {
    const on = network ?? this.#ctx.chains.defaultOf(scope.environment)?.config.id;
    if (on !== undefined) await this.#ctx.chains.assertAnswers(scope.environment, on);
  }

  async breaker(scope: Scope, now: Date): Promise<BreakerDecision> {
    // A read decides for an active breaker (a workspace's decisions are serialized by the
    // caller, and failures are written under the breaker's lock); an auto-resume writes, locked.
    const seen =
      (await this.#breakers(`${scope.workspaceId} ${scope.environment}`)) ?? breakers.INITIAL_BREAKER;
    const first = decideAttempt(seen, now);
    if (first.allowed && !first.autoResumed) return { allowed: true, failStreak: seen.failStreak };
    if (!first.allowed) return first;
    return this.#ctx.db.transaction().execute(async (trx) => {
      const state = await breakers.lockBreaker(trx, scope);
      const decision = decideAttempt(state, now);
      if (!decision.allowed) return decision;
      if (decision.autoResumed) await breakers.writeBreaker(trx, scope, resume(state).state);
      return { allowed: true as const, failStreak: decision.autoResumed ? 0 : state.failStreak };
    });
  }

  /**
   * The wallet and rail `requested` (else the workspace's default) on `network` (else the
   * environment's default), or the 400/503 that says why there is none.
   */
  wallet(
    scope: Scope,
    network: string | null,
    requested: "eoa" | "smart_wallet" | null,
    workspace: WorkspaceProfile,
  ): WalletChoice {
    if (!workspace.eoaAddress) throw badRequest("No workspace wallet found. Provision a wallet first.");
    const walletType = walletTypeFor(requested, workspace, scope.environment);
    const rails = this.#rails.of(scope.environment, network);
    if (!rails) throw new UnknownNetwork(network ?? "default");
    const rail = rails[walletType];
    if (!rail) {
      const where = network === null ? scope.environment : `${scope.environment} network ${network}`;
      throw serviceUnavailable(`Smart wallets are not configured for ${where}: no bundler`);
    }
    if (walletType === "smart_wallet" && !workspace.smartWalletAddress) {
      throw badRequest(
        "No smart wallet for this workspace: create one with POST /api/v1/workspaces/{id}/smart-wallet",
      );
    }
    const owner = workspace.eoaAddress as Hex;
    const from = walletAddress(workspace, walletType) as Hex;
    return { rail, walletType, from, owner };
  }
}
