import { SimulatedLedger, sandboxTxHash } from "../../chain/simulated/ledger.ts";
import type { AppContext } from "../../context.ts";
import { COMPLETED_PAYOUT } from "../../domain/payout-state.ts";
import { coalescedCall } from "../../platform/db/coalesced-write.ts";
import { type Fence, runFences } from "../../platform/db/fences.ts";
import type { LedgerContribution } from "../../rails/rail.ts";
import type { PaymentsService } from "../payments/service.ts";
import { payoutFingerprint } from "./keys.ts";
import type { TransferKinds } from "./kinds.ts";
import * as repo from "./repo.ts";
import * as sandboxRepo from "./sandbox-repo.ts";

// The record of a sandbox payout (D3), the caller's side of the simulated ledger rail: the payout,
// its ledger transfer and, when the transfer succeeds, its completion with `payout.completed`, in
// ONE statement shared with the sandbox payouts asked for in the same round of I/O. The ledger's
// balance is checked where the money moves (sandboxRepo.recordSandboxPayouts), less the open
// inbox transfers' money on the wallet (issue 39), read in that statement (sandbox payments settle
// at once, so there is nothing else to hold).

export class SandboxTransferRecords {
  readonly #ctx: AppContext;
  readonly #record: (payout: sandboxRepo.SandboxPayout) => Promise<sandboxRepo.SandboxPayoutResult | Error>;
  readonly #kinds: TransferKinds;
  readonly #held: sandboxRepo.HeldInbox;

  constructor(ctx: AppContext, kinds: TransferKinds, payments: Pick<PaymentsService, "openInboxHeld">) {
    this.#ctx = ctx;
    this.#kinds = kinds;
    const held: sandboxRepo.HeldInbox = (of) => payments.openInboxHeld(of);
    this.#held = held;
    this.#record = coalescedCall((payouts: readonly sandboxRepo.SandboxPayout[]) =>
      SimulatedLedger.inDebitRounds(
        payouts,
        (payout) => payout.transfer,
        (round) => sandboxRepo.recordSandboxPayouts(ctx.db, round, held),
      ),
    );
  }

  /** Records `payout` with the ledger's contribution (its one transfer); throws what the statement threw. */
  async record(
    payout: repo.NewTransfer,
    contribution: LedgerContribution,
  ): Promise<sandboxRepo.SandboxPayoutResult> {
    const [transfer] = contribution.transfers;
    if (!transfer || contribution.transfers.length !== 1) throw new Error("a payout moves one transfer");
    const completedAt = this.#ctx.now();
    // The event's data: the payout as it stands once completed.
    const completed: repo.TransferRow = {
      ...repo.requestedColumns(payout),
      status: COMPLETED_PAYOUT,
      metadata: payout.metadata,
      tx_hash: sandboxTxHash(transfer.reference),
      user_op_hash: contribution.userOpHash,
      user_operation: contribution.userOpHash ? "" : null,
      error: null,
      created_at: payout.createdAt,
      completed_at: completedAt,
      lease_expires_at: null,
      send_claimed_at: null,
      gas_limit: null,
    };
    const kind = this.#kinds.of(payout.kind);
    const record: sandboxRepo.SandboxPayout = {
      ...payout,
      transfer,
      userOpHash: contribution.userOpHash,
      completedAt,
      requestHash: payout.idempotencyKey ? payoutFingerprint(payout) : "",
      event: kind.completedEvent,
      payload: kind.view(completed),
    };
    const { fences } = payout;
    if (fences?.length) return this.#fenced(fences, record);
    const result = await this.#record(record);
    if (result instanceof Error) throw result;
    return result;
  }

  /**
   * A transfer fenced by its orderer: the fences and the statement share a transaction of their
   * own, which a transfer the statement did not record rolls back, so that what the fences took (a
   * refund's share of its payment, its idempotency claim) is not kept either.
   */
  async #fenced(
    fences: readonly Fence[],
    record: sandboxRepo.SandboxPayout,
  ): Promise<sandboxRepo.SandboxPayoutResult> {
    try {
      return await this.#ctx.db.transaction().execute(async (trx) => {
        await runFences(trx, fences);
        const [result] = await sandboxRepo.recordSandboxPayouts(trx, [record], this.#held);
        if (!result) throw new Error("a sandbox transfer got no answer");
        if (result.outcome !== "success" && result.outcome !== "failure_address")
          throw new NotRecorded(result);
        return result;
      });
    } catch (err) {
      if (err instanceof NotRecorded) return err.result;
      throw err;
    }
  }
}

/** Rolls a fenced transfer's transaction back: the statement recorded nothing. */
class NotRecorded extends Error {
  readonly result: sandboxRepo.SandboxPayoutResult;

  constructor(result: sandboxRepo.SandboxPayoutResult) {
    super("the sandbox transfer was not recorded");
    this.result = result;
  }
}
