import { type CompiledQuery, sql } from "kysely";
import type { Environment } from "../../config.ts";
import { RefundExceeded } from "../../domain/errors.ts";
import { formatAmount, TOKEN_DECIMALS, type TokenSymbol } from "../../domain/money.ts";
import type { Db } from "../../platform/db/database.ts";
import type { Fence } from "../../platform/db/fences.ts";
import type { PaymentRow } from "../../platform/db/schema.ts";
import { idInScope } from "../../platform/db/scope.ts";

// What a payment has left to refund (D19): its refunded_amount holds the refunds completed or on
// their way, taken in the transaction that records a refund and given back in the one that fails
// it. The take is one conditional UPDATE on the payment's row, so concurrent refunds wait for
// each other on its lock and never pass what it received; a CHECK on the table is the backstop.

export type Scope = { workspaceId: string; environment: Environment };

/** The name of a refund's take among its record's fences. */
export const REFUNDABLE_FENCE = "refundable";

/** What is left to refund of `row`: what it received (an attached transfer's amount, else its gross), less its refunds. */
export function refundable(
  row: Pick<PaymentRow, "amount_received" | "gross_amount" | "refunded_amount">,
): bigint {
  return BigInt(row.amount_received ?? row.gross_amount) - BigInt(row.refunded_amount);
}

export class RefundShares {
  /**
   * The take of `amount` as a fence of the refund's record (platform/db/fences.ts): one
   * conditional UPDATE, which waits for a concurrent take on the payment's row lock and then sees
   * what that one left; refused (fence `refundable`) when more is asked than is left.
   */
  takeFence(db: Db, scope: Scope, paymentId: string, amount: bigint): Fence {
    const statement = db
      .updateTable("payments")
      .set({ refunded_amount: sql<string>`refunded_amount + ${amount.toString()}::numeric` })
      .where(idInScope(scope, paymentId))
      .where(
        sql<boolean>`${amount.toString()}::numeric > 0 AND coalesce(amount_received, gross_amount) - refunded_amount >= ${amount.toString()}::numeric`,
      )
      .returning("id")
      .compile();
    return { name: REFUNDABLE_FENCE, statement, required: true };
  }

  /** The give-back of a failed refund's `amount`, as a statement of the failure's transaction. */
  giveBackStatement(db: Db, paymentId: string, amount: bigint): CompiledQuery {
    return db
      .updateTable("payments")
      .set({ refunded_amount: sql<string>`refunded_amount - ${amount.toString()}::numeric` })
      .where("id", "=", paymentId)
      .compile();
  }

  /** Gives `amount` back to what `paymentId` has left to refund (its refund failed), in the caller's transaction. */
  async giveBack(trx: Db, paymentId: string, amount: bigint): Promise<void> {
    await trx.executeQuery(this.giveBackStatement(trx, paymentId, amount));
  }
}

export function refundExceeded(row: PaymentRow, left: bigint): RefundExceeded {
  const decimals = TOKEN_DECIMALS[row.token_symbol as TokenSymbol];
  return new RefundExceeded("Refund exceeds the refundable amount", {
    refundable: formatAmount(left < 0n ? 0n : left, decimals),
  });
}
