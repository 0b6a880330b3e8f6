// Money received on a workspace wallet for payments that are not settled yet (detected or
// confirmed) belongs to the merchant's settlement address and the treasury, not to the wallet's
// payouts: until the settlement transfers leave the wallet, a payout's balance check leaves it
// where it is. Otherwise a payout could spend it, the settlement would fail for want of funds,
// and the treasury's fee would be gone.

export interface SettlementTransfer {
  amount: bigint;
  nonce: number;
  status: "signed" | "mined" | "failed";
}

export interface UnsettledPayment {
  token: string;
  /** What the payment brought in; it all leaves again (net to the merchant, fee to the treasury). */
  gross: bigint;
  /** Its settlement transfers recorded so far, in the payment's token. */
  transfers: SettlementTransfer[];
}

/**
 * What `payments` will still take of `token` from a balance read at a block where the wallet's
 * first `minedNonce` transactions are mined (null: not known). Before its settlement is recorded
 * a payment still takes its gross amount; after, each of its transfers that is neither failed nor
 * mined at that block (a failed settlement leaves the money on the wallet).
 */
export function stillToSettle(
  payments: readonly UnsettledPayment[],
  token: string,
  minedNonce: number | null,
): bigint {
  let total = 0n;
  for (const payment of payments) {
    if (payment.token !== token) continue;
    if (payment.transfers.length === 0) {
      total += payment.gross;
      continue;
    }
    for (const transfer of payment.transfers) {
      if (transfer.status === "failed" || transfer.status === "mined") continue;
      if (minedNonce !== null && transfer.nonce < minedNonce) continue;
      total += transfer.amount;
    }
  }
  return total;
}
