// Money received on a workspace wallet for payments that are not settled yet (detected or
// confirmed) belongs to the merchant's settlement address and the treasury, not to the wallet's
// payouts: until the settlement transfers leave the wallet, a payout's balance check leaves it
// where it is. Otherwise a payout could spend it, the settlement would fail for want of funds,
// and the treasury's fee would be gone.

export interface UnsettledPayment {
  token: string;
  /** What the payment brought in; it all leaves again (net to the merchant, fee to the treasury). */
  gross: bigint;
  /**
   * Its settlement transfers are recorded: from then on they are the wallet's recorded
   * transactions, which the balance check counts on their own (domain/payout-funds.ts).
   */
  settlementRecorded: boolean;
}

/** What `payments` will still take of `token`: the gross of each whose settlement is not recorded. */
export function stillToSettle(payments: readonly UnsettledPayment[], token: string): bigint {
  let total = 0n;
  for (const payment of payments) {
    if (payment.token === token && !payment.settlementRecorded) total += payment.gross;
  }
  return total;
}
