import type { Chains } from "../chain/chains.ts";
import { SmartAccounts } from "../chain/evm/smart-accounts.ts";
import type { SimulatedLedger } from "../chain/simulated/ledger.ts";
import { SIMULATED_NETWORKS } from "../chain/simulated/networks.ts";
import type { Environment } from "../config.ts";
import type { Db } from "../platform/db/database.ts";
import { EoaRail } from "./eoa-rail.ts";
import { LedgerRail } from "./ledger-rail.ts";
import type { Rail } from "./rail.ts";
import { SmartAccountRail } from "./smart-account-rail.ts";

// Which rail moves money from which kind of workspace wallet on which network (D22), built once
// per process. Sandbox moves money on the simulated ledger unless a sandbox network (a testnet) is
// configured; a network moves it from the EOA, and from the smart account where a bundler is
// configured (smart wallets are otherwise unavailable there).

export type WalletKind = "eoa" | "smart_wallet";

export type NetworkRails = Partial<Record<WalletKind, Rail>>;

export class Rails {
  /** By environment, then network id, each environment's default network first. */
  readonly #rails = new Map<Environment, Map<string, NetworkRails>>();

  add(environment: Environment, network: string, rails: NetworkRails): void {
    const of = this.#rails.get(environment) ?? new Map<string, NetworkRails>();
    of.set(network, rails);
    this.#rails.set(environment, of);
  }

  /** The rails of the environment's network `network`, its default network's when null. */
  of(environment: Environment, network: string | null): NetworkRails | undefined {
    const of = this.#rails.get(environment);
    if (!of) return undefined;
    return network === null ? of.values().next().value : of.get(network);
  }

  /** Each network of the environment that has rails, with them. */
  in(environment: Environment): Array<[network: string, rails: NetworkRails]> {
    return [...(this.#rails.get(environment) ?? new Map<string, NetworkRails>())];
  }
}

/** The rails, and the ERC-4337 client of each network with a bundler (made once, shared). */
export function buildRails(
  chains: Chains,
  ledger: SimulatedLedger,
  db: Db,
): { rails: Rails; smartAccounts: Map<string, SmartAccounts> } {
  const rails = new Rails();
  if (chains.in("sandbox").length === 0) {
    for (const { id } of SIMULATED_NETWORKS)
      rails.add("sandbox", id, {
        eoa: new LedgerRail(ledger, id),
        smart_wallet: new LedgerRail(ledger, id, { smartAccount: true }),
      });
  }
  const smartAccounts = new Map<string, SmartAccounts>();
  for (const { config, network, sender } of chains.all()) {
    const accounts = config.accountAbstraction ? new SmartAccounts(config, () => network.fees()) : undefined;
    if (accounts) smartAccounts.set(`${config.environment}.${config.id}`, accounts);
    rails.add(config.environment, config.id, {
      eoa: new EoaRail(network, sender, db),
      ...(accounts ? { smart_wallet: new SmartAccountRail(network, accounts) } : {}),
    });
  }
  return { rails, smartAccounts };
}
