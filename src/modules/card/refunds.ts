import type { AppContext } from "../../context.ts";
import type { PaymentRow } from "../../platform/db/schema.ts";
import type { RefundShares } from "../payments/refund-shares.ts";
import type { RefundOrder, RefundRail, Scope } from "../refunds/rail.ts";
import type { RefundView } from "../refunds/view.ts";
import type { CardProviders } from "./provider.ts";

// IN PROGRESS (helper): refunds of card payments at the provider (D19), the card rail.
export class CardRefunds implements RefundRail {
  readonly #ctx: AppContext;
  readonly #providers: CardProviders;
  readonly #shares: RefundShares;

  constructor(ctx: AppContext, providers: CardProviders, shares: RefundShares) {
    this.#ctx = ctx;
    this.#providers = providers;
    this.#shares = shares;
  }

  async refund(_scope: Scope, _payment: PaymentRow, _order: RefundOrder): Promise<RefundView> {
    void this.#ctx;
    void this.#providers;
    void this.#shares;
    throw new Error("card refunds: in progress");
  }

  async refundsOf(): Promise<{ refunds: RefundView[]; total: number }> {
    return { refunds: [], total: 0 };
  }

  async find(): Promise<RefundView | undefined> {
    return undefined;
  }

  /** Finishes refunds left pending (recorded, provider not reached or not final). */
  async reconcile(): Promise<number> {
    return 0;
  }
}
