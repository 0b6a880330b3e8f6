import type { AppContext } from "../../context.ts";
import type { SessionTurns } from "../../platform/db/wallet-lock.ts";
import type { MoveHooks, Rail } from "../../rails/rail.ts";
import { type FundsAhead, type HeldMoney, recordIfFunded } from "./funds.ts";
import type * as repo from "./repo.ts";
import type { SandboxTransferRecords } from "./sandbox-records.ts";
import type { SandboxPayoutResult } from "./sandbox-repo.ts";
import * as sending from "./sending-repo.ts";

// The persist step of a payout: the hooks its rail calls to record it. A live payout is recorded
// (processing, leased) once its wallet's funds allow it (funds.ts), then its transaction or user
// operation under the fence that it is still processing; a sandbox payout is recorded with its
// ledger transfer, and completed, in one statement (sandbox-payouts.ts).

/** What the hooks recorded, for the answer. */
export interface Recorded {
  row?: repo.TransferRow;
  ledger?: SandboxPayoutResult;
}

export class TransferPersistence {
  readonly #ctx: AppContext;
  readonly #sandbox: SandboxTransferRecords;
  readonly #fundsTurns: SessionTurns;
  readonly #payments: HeldMoney;

  constructor(
    ctx: AppContext,
    parts: {
      sandbox: SandboxTransferRecords;
      /** A wallet's balance checks take turns across instances (funds.ts). */
      fundsTurns: SessionTurns;
      payments: HeldMoney;
    },
  ) {
    this.#ctx = ctx;
    this.#sandbox = parts.sandbox;
    this.#fundsTurns = parts.fundsTurns;
    this.#payments = parts.payments;
  }

  /**
   * The hooks of `payout` on `rail`; they fill `recorded`, and call `persisted` once its record
   * is written or refused. `ahead`: its wallet's funds, read before its turn.
   */
  hooks(
    payout: repo.NewTransfer,
    rail: Rail,
    recorded: Recorded,
    persisted: () => void,
    ahead?: FundsAhead,
  ): MoveHooks {
    return {
      persist: async (gasUnits) => {
        try {
          recorded.row = await recordIfFunded(
            this.#ctx,
            this.#fundsTurns,
            this.#payments,
            rail,
            payout,
            gasUnits,
            ahead,
          );
          return recorded.row !== undefined;
        } finally {
          persisted();
        }
      },
      claim: sending.claimForSending(payout.id, this.#ctx.config.transferLeaseSeconds),
      recordOperation: (userOpHash, operation) =>
        sending.recordUserOperation(
          this.#ctx.db,
          payout.id,
          userOpHash,
          operation,
          this.#ctx.config.transferLeaseSeconds,
        ),
      recordWithTransfers: async (contribution) => {
        try {
          recorded.ledger = await this.#sandbox.record(payout, contribution);
        } finally {
          persisted();
        }
        const { ledger } = recorded;
        if (ledger.outcome !== "success" && ledger.outcome !== "failure_address")
          return { outcome: "refused" };
        recorded.row = ledger.row;
        return { outcome: ledger.outcome };
      },
    };
  }
}
