// Money received on a workspace wallet for payments that are not settled yet (detected or
// confirmed) belongs to the merchant's settlement address and the treasury, not to the wallet's
// payouts: until the settlement transfers leave the wallet, a payout's balance check leaves it
// where it is. Otherwise a payout could spend it, the settlement would fail for want of funds,
// and the treasury's fee would be gone.

export interface UnsettledPayment {
  id: string;
  token: string;
  /** What the payment brought in; it all leaves again (to the merchant, the treasury, its splits). */
  gross: bigint;
  /** How many splits its settlement carries (its snapshot's): each is one more transfer. */
  splits: number;
  /**
   * Its settlement transfers are recorded: from then on they are the wallet's recorded
   * transactions, which the balance check counts on their own (domain/payout-funds.ts).
   */
  settlementRecorded: boolean;
}

/**
 * An open transfer of the unmatched inbox (D19, issue 39): money on the wallet that is its sender's
 * until the merchant attaches it to a payment (then that payment's, held as unsettled) or returns
 * it (one transfer, which spends just this money).
 */
export interface OpenInboxTransfer {
  id: string;
  token: string;
  amount: bigint;
}

/** Settlement money still on the wallet, of one token (and, with heldInbox, open inbox money). */
export interface Settling {
  amount: bigint;
  /** How many payments it is. */
  payments: number;
  /** How many transfers their settlements send (each pays gas on the EOA path): at most. */
  transfers: number;
}

/** A settlement sends the merchant's part and the fee, and one transfer per split (D15). */
export const SETTLEMENT_TRANSFERS = 2;

/**
 * What `payments` will still take from their wallet, per token: the gross of each whose
 * settlement is not recorded yet.
 */
export function stillToSettle(payments: readonly UnsettledPayment[]): Map<string, Settling> {
  const byToken = new Map<string, Settling>();
  for (const payment of payments) {
    if (payment.settlementRecorded) continue;
    const settling = byToken.get(payment.token) ?? { amount: 0n, payments: 0, transfers: 0 };
    byToken.set(payment.token, {
      amount: settling.amount + payment.gross,
      payments: settling.payments + 1,
      // A part that rounds to 0 is not sent: this is the most a settlement sends.
      transfers: settling.transfers + SETTLEMENT_TRANSFERS + payment.splits,
    });
  }
  return byToken;
}

/** The payments of `payments` that stillToSettle counts whole (their gross). */
export function settlingWhole(payments: readonly UnsettledPayment[]): string[] {
  return payments.filter((payment) => !payment.settlementRecorded).map((payment) => payment.id);
}

/**
 * `settling` with the money of the open inbox transfers added, per token: each is held whole, with
 * one transfer's gas for its return.
 */
export function heldInbox(
  settling: ReadonlyMap<string, Settling>,
  inbox: readonly OpenInboxTransfer[],
): Map<string, Settling> {
  const byToken = new Map(settling);
  for (const transfer of inbox) {
    const held = byToken.get(transfer.token) ?? { amount: 0n, payments: 0, transfers: 0 };
    byToken.set(transfer.token, {
      ...held,
      amount: held.amount + transfer.amount,
      transfers: held.transfers + 1,
    });
  }
  return byToken;
}
