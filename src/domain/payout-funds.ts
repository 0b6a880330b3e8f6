import type { ChainToken } from "../chain/network.ts";
import type { Settling } from "./unsettled-payments.ts";

// Whether a wallet can pay a payout (part 4.10: "the balance is checked first"). The balance the
// chain reports still holds what is already on its way out: transactions recorded but not mined
// at the block the balance was read at (payouts, settlement legs, cancellations), payouts
// recorded but not signed yet, and the money of payments received and not settled yet, which
// belongs to the merchant and the treasury. On the EOA path each of those transactions also
// pays gas from the wallet's ETH: at most its gas limit times the fee per gas, and a limit is not
// its token's alone (plain ETH to a contract takes up to the network's cap), so the limits
// recorded with them are what is reserved.

export interface Committed {
  /** What the transactions (and payouts not signed yet) of one token take from the wallet. */
  amount: bigint;
  /**
   * How many of them have no gas limit recorded (recorded before migration 029): each pays a
   * transfer's gas of its token on the EOA path.
   */
  transactions: number;
  /** The gas limits recorded with the others, in all (units of gas). */
  gasUnits: bigint;
}

export interface FundsCheck {
  token: ChainToken;
  amount: bigint;
  /** Balances read at one block (the EOA's with its mined nonce there). */
  balances: Partial<Record<ChainToken, bigint>>;
  /** Per token symbol: recorded and not in `balances` yet. */
  committed: ReadonlyMap<string, Committed>;
  /** Per token symbol: money of payments received and not settled yet (unsettled-payments.ts). */
  unsettled: ReadonlyMap<string, Settling>;
  /**
   * The EOA path: wei of gas of one ERC-20 transfer and of one plain ETH transfer to an account
   * without code, wei per unit of gas, and what this move's transactions may cost (their gas
   * limits: a swap's calls, ETH to a contract); null: sponsored.
   */
  gas: { erc20: bigint; eth: bigint; perUnit: bigint; own?: bigint } | null;
}

export type FundsVerdict =
  | { ok: true }
  | { ok: false; short: "balance"; available: bigint }
  | { ok: false; short: "gas"; ethBalance: bigint; required: bigint };

export function checkFunds(check: FundsCheck): FundsVerdict {
  const { gas } = check;
  const leaving = (token: string) =>
    (check.committed.get(token)?.amount ?? 0n) + (check.unsettled.get(token)?.amount ?? 0n);
  let gasCommitted = 0n;
  if (gas) {
    for (const token of new Set([...check.committed.keys(), ...check.unsettled.keys()])) {
      const committed = check.committed.get(token);
      const transfers = (committed?.transactions ?? 0) + (check.unsettled.get(token)?.transfers ?? 0);
      gasCommitted +=
        BigInt(transfers) * (token === "ETH" ? gas.eth : gas.erc20) +
        (committed?.gasUnits ?? 0n) * gas.perUnit;
    }
  }
  const ethAvailable = (check.balances.ETH ?? 0n) - leaving("ETH") - gasCommitted;
  const available =
    check.token === "ETH" ? ethAvailable : (check.balances[check.token] ?? 0n) - leaving(check.token);
  if (available < check.amount) return { ok: false, short: "balance", available };
  if (!gas) return { ok: true };
  const required = gas.own ?? (check.token === "ETH" ? gas.eth : gas.erc20);
  const ethBalance = check.token === "ETH" ? available - check.amount : ethAvailable;
  if (ethBalance < required) return { ok: false, short: "gas", ethBalance, required };
  return { ok: true };
}
