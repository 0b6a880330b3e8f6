import { sql } from "kysely";
import type { Environment } from "../../config.ts";
import { RefundExceeded } from "../../domain/errors.ts";
import { formatAmount, TOKEN_DECIMALS, type TokenSymbol } from "../../domain/money.ts";
import type { Db } from "../../platform/db/database.ts";
import type { PaymentRow } from "../../platform/db/schema.ts";
import * as repo from "./repo.ts";

// What a payment has left to refund (D19): its refunded_amount holds the refunds completed or on
// their way, taken in the transaction that records a refund and given back in the one that fails
// it. The take is one conditional UPDATE on the payment's row, so concurrent refunds wait for
// each other on its lock and never pass what it received; a CHECK on the table is the backstop.

export type Scope = { workspaceId: string; environment: Environment };

/** What is left to refund of `row`: what it received (an attached transfer's amount, else its gross), less its refunds. */
export function refundable(
  row: Pick<PaymentRow, "amount_received" | "gross_amount" | "refunded_amount">,
): bigint {
  return BigInt(row.amount_received ?? row.gross_amount) - BigInt(row.refunded_amount);
}

export class RefundShares {
  /**
   * Takes `amount` from what `paymentId` has left to refund, in the caller's transaction, under
   * the payment's row lock. Throws RefundExceeded (with what is refundable) when more is asked
   * than is left.
   */
  async take(trx: Db, scope: Scope, paymentId: string, amount: bigint): Promise<void> {
    const locked = await repo.findPayment(trx, scope, paymentId, true);
    if (!locked) throw new Error(`payment ${paymentId} vanished while refunding it`);
    const left = refundable(locked);
    if (amount <= 0n || amount > left) throw refundExceeded(locked, left);
    await trx
      .updateTable("payments")
      .set({ refunded_amount: sql<string>`refunded_amount + ${amount.toString()}::numeric` })
      .where("id", "=", paymentId)
      .execute();
  }

  /** Gives `amount` back to what `paymentId` has left to refund (its refund failed), in the caller's transaction. */
  async giveBack(trx: Db, paymentId: string, amount: bigint): Promise<void> {
    await trx
      .updateTable("payments")
      .set({ refunded_amount: sql<string>`refunded_amount - ${amount.toString()}::numeric` })
      .where("id", "=", paymentId)
      .execute();
  }
}

export function refundExceeded(row: PaymentRow, left: bigint): RefundExceeded {
  const decimals = TOKEN_DECIMALS[row.token_symbol as TokenSymbol];
  return new RefundExceeded("Refund exceeds the refundable amount", {
    refundable: formatAmount(left < 0n ? 0n : left, decimals),
  });
}
