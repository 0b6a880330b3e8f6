// Which of a workspace's wallets a movement of money uses (D21, part 4.18): the one the request
// names, else the workspace's default for the request's own environment (a sandbox setting never
// steers live). Written once here for payments (the wallet that receives), the transfer engine
// (the wallet money leaves), and returns (the wallet a transfer reached).

export type WalletType = "eoa" | "smart_wallet";

export interface WorkspaceWallets {
  eoaAddress: string | null;
  smartWalletAddress: string | null;
  /** Per environment; anything but "smart_wallet" means the EOA. */
  defaultWalletTypes: Readonly<Record<string, string>>;
}

/** The wallet type `requested`, else the environment's default. */
export function walletTypeFor(
  requested: WalletType | null,
  wallets: WorkspaceWallets,
  environment: string,
): WalletType {
  return requested ?? (wallets.defaultWalletTypes[environment] === "smart_wallet" ? "smart_wallet" : "eoa");
}

/** The address of the workspace's wallet of `type`; null when it has none. */
export function walletAddress(wallets: WorkspaceWallets, type: WalletType): string | null {
  return type === "smart_wallet" ? wallets.smartWalletAddress : wallets.eoaAddress;
}

/** Which of the workspace's wallets `address` is; null for none of them. */
export function walletTypeAt(wallets: WorkspaceWallets, address: string): WalletType | null {
  const at = address.toLowerCase();
  if (wallets.smartWalletAddress?.toLowerCase() === at) return "smart_wallet";
  if (wallets.eoaAddress?.toLowerCase() === at) return "eoa";
  return null;
}
