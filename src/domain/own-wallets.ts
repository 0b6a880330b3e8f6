// A workspace's own receiving wallets (its EOA and its smart wallet) take payers' money in, and
// what they send never pays one of its payments (the chain watcher records it in the unmatched
// inbox). Money settled, split or paid to one of them would come back to the workspace as its own
// transfer instead of reaching the merchant or partner it was meant for, so they are refused where
// the workspace names an address its money goes to: the settlement address, a payment's
// merchantWallet and a split's destination.

/** Whether `address` is one of `ownWallets` (the workspace's EOA and smart wallet, null: none), in any letter case. */
export function isOwnWallet(address: string, ownWallets: ReadonlyArray<string | null>): boolean {
  const wanted = address.toLowerCase();
  return ownWallets.some((own) => own !== null && own.toLowerCase() === wanted);
}

/** The problem with sending a workspace's money to `address` (named `field`), or null. */
export function ownWalletProblem(
  field: string,
  address: string,
  ownWallets: ReadonlyArray<string | null>,
): string | null {
  if (!isOwnWallet(address, ownWallets)) return null;
  return `${field} must not be one of this workspace's own wallets (${address}): money sent there would stay with the workspace`;
}
