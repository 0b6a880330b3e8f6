// The shape of GET /api/v1/wallet/balance in the sandbox (D22): the default network's wallets at
// the top and again under `networks` with sandbox-a, beside sandbox-b's balances of the same
// wallets (the same addresses on both simulated networks).

interface ShownWallet {
  address: string;
  balances: Record<string, string>;
}

interface Shown {
  environment: string;
  eoa: ShownWallet | null;
  smartWallet: ShownWallet | null;
}

const EMPTY = { USDC: "0.00", ETH: "0.00", ADAO: "0.00", DAI: "0.00" };

/** The same wallet with nothing on it. */
const empty = (wallet: ShownWallet | null) => wallet && { address: wallet.address, balances: { ...EMPTY } };

/**
 * The whole balance answer for `shown` (sandbox-a's, the default), with sandbox-b's balances as
 * `onB` says (each wallet's given balances over zero), or none there.
 */
export function onTheLedger(
  shown: Shown,
  onB: { eoa?: Record<string, string>; smartWallet?: Record<string, string> } = {},
) {
  const onSandboxB = (wallet: ShownWallet | null, balances: Record<string, string> | undefined) => {
    const none = empty(wallet);
    return none && { ...none, balances: { ...none.balances, ...balances } };
  };
  return {
    ...shown,
    networks: {
      "sandbox-a": { eoa: shown.eoa, smartWallet: shown.smartWallet },
      "sandbox-b": {
        eoa: onSandboxB(shown.eoa, onB.eoa),
        smartWallet: onSandboxB(shown.smartWallet, onB.smartWallet),
      },
    },
  };
}
