import { keccak256, stringToHex } from "viem";
import type { SmartAccounts } from "../../chain/evm/smart-accounts.ts";
import type { Hex } from "../../chain/network.ts";
import type { AppContext } from "../../context.ts";
import { badRequest, notFound } from "../../domain/errors.ts";
import { isUuid } from "../../domain/validation.ts";
import type { WorkspacesService } from "../workspaces/service.ts";

// Each workspace may have one smart wallet beside its EOA (parts 4.13, 4.14; D11). Its address
// is the counterfactual address of the SimpleAccount the EOA owns on the live network (or the
// sandbox's, when only that has a bundler); with no bundler anywhere, the sandbox's simulated
// ledger uses a deterministic address derived from the EOA. Stored once; creation is idempotent.

export type DefaultWalletType = "workspace" | "smart_wallet";

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
  readonly #ctx: AppContext;
  readonly #workspaces: WorkspacesService;
  readonly #accounts: SmartAccounts | undefined;

  constructor(ctx: AppContext, workspaces: WorkspacesService, accounts: SmartAccounts | undefined) {
    this.#ctx = ctx;
    this.#workspaces = workspaces;
    this.#accounts = accounts;
  }

  async create(
    workspaceId: string,
    setDefault: boolean,
  ): Promise<{ created: boolean; smartWallet: SmartWalletRecord; defaultWalletType: DefaultWalletType }> {
    const profile = await this.#workspaces.profile(workspaceId);
    if (!profile.eoaAddress) throw badRequest("No workspace wallet found. Provision a wallet first.");
    let created = false;
    if (!profile.smartWalletAddress) {
      const key = await this.#workspaces.signingKey(workspaceId, profile.eoaAddress);
      const address = this.#accounts
        ? await this.#accounts.address(key)
        : simulatedSmartWalletAddress(profile.eoaAddress);
      const inserted = await this.#ctx.db
        .insertInto("workspace_wallets")
        .values({ workspace_id: workspaceId, kind: "smart_wallet", address, encrypted_private_key: null })
        .onConflict((oc) => oc.columns(["workspace_id", "kind"]).doNothing())
        .returning("id")
        .executeTakeFirst();
      created = inserted !== undefined;
    }
    if (setDefault) await this.setDefault(workspaceId, "smart_wallet");
    const state = await this.get(workspaceId);
    if (!state.smartWallet) throw new Error("smart wallet vanished after creation");
    return { created, smartWallet: state.smartWallet, defaultWalletType: state.defaultWalletType };
  }

  async get(workspaceId: string) {
    if (!isUuid(workspaceId)) throw notFound("Workspace not found");
    const workspace = await this.#ctx.db
      .selectFrom("workspaces")
      .select(["id", "default_wallet_type"])
      .where("id", "=", workspaceId)
      .executeTakeFirst();
    if (!workspace) throw notFound("Workspace not found");
    const wallets = await this.#ctx.db
      .selectFrom("workspace_wallets")
      .select(["id", "kind", "address", "created_at"])
      .where("workspace_id", "=", workspaceId)
      .execute();
    const eoa = wallets.find((w) => w.kind === "eoa");
    const smart = wallets.find((w) => w.kind === "smart_wallet");
    return {
      workspaceId,
      eoa: eoa ? { address: eoa.address, createdAt: eoa.created_at.toISOString() } : null,
      smartWallet:
        smart && eoa
          ? {
              walletId: smart.id,
              address: smart.address,
              ownerAddress: eoa.address,
              createdAt: smart.created_at.toISOString(),
            }
          : null,
      defaultWalletType: (workspace.default_wallet_type === "smart_wallet"
        ? "smart_wallet"
        : "workspace") as DefaultWalletType,
    };
  }

  async setDefault(workspaceId: string, value: unknown): Promise<DefaultWalletType> {
    if (value !== "workspace" && value !== "smart_wallet") {
      throw badRequest("defaultWalletType must be workspace or smart_wallet");
    }
    if (!isUuid(workspaceId)) throw notFound("Workspace not found");
    if (value === "smart_wallet") {
      const state = await this.get(workspaceId);
      if (!state.smartWallet) throw badRequest("No smart wallet for this workspace: create one first");
    }
    const updated = await this.#ctx.db
      .updateTable("workspaces")
      .set({ default_wallet_type: value })
      .where("id", "=", workspaceId)
      .executeTakeFirst();
    if (updated.numUpdatedRows === 0n) throw notFound("Workspace not found");
    return value;
  }
}
