import { keccak256, stringToHex } from "viem";
import type { SmartAccounts } from "../../chain/evm/smart-accounts.ts";
import type { Hex } from "../../chain/network.ts";
import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { badRequest, notFound } from "../../domain/errors.ts";
import { isUuid } from "../../domain/validation.ts";
import type { DefaultWalletType, WorkspacesService } from "../workspaces/service.ts";

// Each workspace may have one smart wallet beside its EOA (parts 4.13, 4.14; D11). Its address
// is the counterfactual address of the SimpleAccount the EOA owns on the live network (or the
// sandbox's, when only that has a bundler); with no bundler anywhere, the sandbox's simulated
// ledger uses a deterministic address derived from the EOA. Stored once; creation is idempotent.
// The default wallet type is per environment (D21): each call names the environment it reads or
// sets, and never touches the other one's.

export interface SmartWalletRecord {
  walletId: string;
  address: string;
  ownerAddress: string;
  createdAt: string;
}

export function simulatedSmartWalletAddress(owner: string): Hex {
  return `0x${keccak256(stringToHex(`simulated-smart-wallet:${owner.toLowerCase()}`)).slice(-40)}` as Hex;
}

export class SmartWalletsService {
  readonly #workspaces: WorkspacesService;
  readonly #accounts: SmartAccounts | undefined;

  // `_ctx` is unused since the workspace's tables are read through its service; it stays until
  // app.ts, which is being rewritten elsewhere, can drop the argument.
  constructor(_ctx: AppContext, workspaces: WorkspacesService, accounts: SmartAccounts | undefined) {
    this.#workspaces = workspaces;
    this.#accounts = accounts;
  }

  /** Creates the smart wallet; `setDefault` makes it `environment`'s default. */
  async create(
    workspaceId: string,
    setDefault: boolean,
    environment: Environment,
  ): Promise<{ created: boolean; smartWallet: SmartWalletRecord; defaultWalletType: DefaultWalletType }> {
    const profile = await this.#workspaces.profile(workspaceId);
    if (!profile.eoaAddress) throw badRequest("No workspace wallet found. Provision a wallet first.");
    let created = false;
    if (!profile.smartWalletAddress) {
      const key = await this.#workspaces.signingKey(workspaceId, profile.eoaAddress);
      const address = this.#accounts
        ? await this.#accounts.address(key)
        : simulatedSmartWalletAddress(profile.eoaAddress);
      created = await this.#workspaces.addSmartWallet(workspaceId, address);
    }
    if (setDefault) await this.setDefault(workspaceId, environment, "smart_wallet");
    const state = await this.get(workspaceId, environment);
    if (!state.smartWallet) throw new Error("smart wallet vanished after creation");
    return { created, smartWallet: state.smartWallet, defaultWalletType: state.defaultWalletType };
  }

  /** The wallets and `environment`'s default wallet type. */
  async get(workspaceId: string, environment: Environment) {
    if (!isUuid(workspaceId)) throw notFound("Workspace not found");
    const setup = await this.#workspaces.walletSetup(workspaceId, environment);
    if (!setup) throw notFound("Workspace not found");
    const eoa = setup.wallets.find((w) => w.kind === "eoa");
    const smart = setup.wallets.find((w) => w.kind === "smart_wallet");
    return {
      workspaceId,
      eoa: eoa ? { address: eoa.address, createdAt: eoa.createdAt.toISOString() } : null,
      smartWallet:
        smart && eoa
          ? {
              walletId: smart.id,
              address: smart.address,
              ownerAddress: eoa.address,
              createdAt: smart.createdAt.toISOString(),
            }
          : null,
      defaultWalletType: setup.defaultWalletType,
    };
  }

  /** Sets `environment`'s default wallet type only. */
  async setDefault(
    workspaceId: string,
    environment: Environment,
    value: unknown,
  ): Promise<DefaultWalletType> {
    if (value !== "workspace" && value !== "smart_wallet") {
      throw badRequest("defaultWalletType must be workspace or smart_wallet");
    }
    if (!isUuid(workspaceId)) throw notFound("Workspace not found");
    if (value === "smart_wallet") {
      const state = await this.get(workspaceId, environment);
      if (!state.smartWallet) throw badRequest("No smart wallet for this workspace: create one first");
    }
    if (!(await this.#workspaces.setDefaultWalletType(workspaceId, environment, value)))
      throw notFound("Workspace not found");
    return value;
  }
}
