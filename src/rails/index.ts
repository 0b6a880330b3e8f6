import { SmartAccounts } from "../chain/evm/smart-accounts.ts";
import type { SimulatedLedger } from "../chain/simulated/ledger.ts";
import { type Config, ENVIRONMENTS, type Environment } from "../config.ts";
import type { AppContext } from "../context.ts";
import type { Db } from "../platform/db/database.ts";
import { EoaRail } from "./eoa-rail.ts";
import { LedgerRail } from "./ledger-rail.ts";
import type { Rail } from "./rail.ts";
import { SmartAccountRail } from "./smart-account-rail.ts";

// Which rail moves an environment's money from which kind of workspace wallet, built once per
// process. Sandbox moves money on the simulated ledger unless a sandbox network (a testnet) is
// configured; a network moves it from the EOA, and from the smart account where a bundler is
// configured (smart wallets are otherwise unavailable there).

export type WalletKind = "eoa" | "smart_wallet";

export type Rails = Partial<Record<Environment, Partial<Record<WalletKind, Rail>>>>;

/** The rails, and the ERC-4337 client of each environment with a bundler (made once, shared). */
export function buildRails(
  config: Config,
  networks: AppContext["networks"],
  senders: AppContext["senders"],
  ledger: SimulatedLedger,
  db: Db,
): { rails: Rails; smartAccounts: Partial<Record<Environment, SmartAccounts>> } {
  const rails: Rails = {
    sandbox: { eoa: new LedgerRail(ledger), smart_wallet: new LedgerRail(ledger, { smartAccount: true }) },
  };
  const smartAccounts: Partial<Record<Environment, SmartAccounts>> = {};
  for (const environment of ENVIRONMENTS) {
    const network = networks[environment];
    const sender = senders[environment];
    if (!network || !sender) continue;
    const networkConfig = config.networks[environment];
    const accounts = networkConfig?.accountAbstraction ? new SmartAccounts(networkConfig) : undefined;
    if (accounts) smartAccounts[environment] = accounts;
    rails[environment] = {
      eoa: new EoaRail(network, sender, db),
      ...(accounts ? { smart_wallet: new SmartAccountRail(network, accounts) } : {}),
    };
  }
  return { rails, smartAccounts };
}
