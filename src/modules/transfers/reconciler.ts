import type { Hex } from "../../chain/network.ts";
import * as sent from "../../chain/sent-transactions.ts";
import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { RECIPIENT_REVERTED, revertCause, type TransferKindName } from "../../domain/payout-state.ts";
import type { Rails } from "../../rails/index.ts";
import { recordEvents } from "../webhooks/outbox.ts";
import type { TransferEndings } from "./finish.ts";
import { failureEvent, type TransferKinds } from "./kinds.ts";
import type { TransferLeases } from "./leases.ts";
import type { TransferRow } from "./repo.ts";
import * as sending from "./sending-repo.ts";

// Finishes live payouts that no instance is sending any more: their instance stopped (its lease
// ran out), or answered 202 and gave them up. Their outcome comes from the chain: the recorded
// transaction's receipt (TransactionSender.reconcile records it, or that another transaction took
// its nonce), or the recorded user operation, sent again through its rail. A payout is failed only when its
// transfer can never happen; one with nothing recorded was never sent, and fails uncounted —
// unless its sender claims it at that moment, which the fence of failNeverSent leaves to it.

const NEVER_SENT = "not sent: the process stopped before broadcasting";

export class TransferReconciler {
  readonly #ctx: AppContext;
  readonly #outcomes: TransferEndings;
  readonly #leases: TransferLeases;
  readonly #rails: Rails;
  readonly #kinds: TransferKinds;

  constructor(
    ctx: AppContext,
    parts: { outcomes: TransferEndings; leases: TransferLeases; rails: Rails; kinds: TransferKinds },
  ) {
    this.#ctx = ctx;
    this.#outcomes = parts.outcomes;
    this.#leases = parts.leases;
    this.#rails = parts.rails;
    this.#kinds = parts.kinds;
  }

  /** Returns how many payouts it finished. */
  async reconcile(environment: Environment): Promise<number> {
    let finished = 0;
    for (const payout of await sending.unownedProcessing(this.#ctx.db, environment)) {
      if (this.#leases.has(payout.id)) continue; // this process is sending it
      try {
        if (await this.#finish(environment, payout)) finished++;
      } catch (err) {
        // One payout's trouble (a bundler or node error) leaves the others to this pass.
        this.#ctx.log.error({ err, payoutId: payout.id }, "reconciling a payout failed; retried next tick");
      }
    }
    return finished;
  }

  /** Finishes `payout` if its outcome is known; returns whether it did. */
  async #finish(environment: Environment, payout: TransferRow): Promise<boolean> {
    const scope = { workspaceId: payout.workspace_id, environment };
    if (payout.user_operation) {
      // A smart wallet payout: send the recorded operation again (a no-op if it was included); one
      // that can never be included fails, which gives its amount back to the wallet's checks.
      const resumed = this.#rails[environment]?.smart_wallet?.resume(
        { userOpHash: payout.user_op_hash as Hex, serialized: payout.user_operation },
        { failIfNeverIncluded: true },
      );
      if (!resumed) return false; // no bundler here now: left until there is one
      const outcome = await resumed;
      if (outcome.status === "success") await this.#outcomes.recordCompletion(scope, payout, outcome);
      else if (outcome.status === "reverted") {
        await this.#outcomes.recordFailure(
          scope,
          payout,
          outcome.txHash || null,
          outcome.error ?? "user operation reverted",
        );
      }
      return outcome.status !== "pending";
    }
    const tx = await sent.payoutTransaction(this.#ctx.db, payout.id);
    if (tx?.status === "signed") return false; // still open: it may be mined
    if (tx?.status === "mined") {
      await this.#outcomes.recordCompletion(scope, payout, { txHash: tx.txHash });
      return true;
    }
    if (tx) {
      // Reverted (`failed`: its receipt; plain ETH then reverted in its recipient's code), or
      // never mined and its nonce taken by another transaction.
      const kind = payout.kind as TransferKindName;
      const cause =
        tx.status === "failed" ? revertCause({ kind, tokenSymbol: payout.token_symbol }) : "sending";
      const error = cause === "recipient" ? RECIPIENT_REVERTED : (tx.error ?? "transaction reverted");
      await this.#outcomes.recordFailure(scope, payout, tx.txHash, error, cause);
      return true;
    }
    // Nothing recorded: never sent, unless its sender claims it at this moment (then a no-op).
    // What its record took elsewhere (a refund's share of its payment) is given back with it.
    const failed = await this.#ctx.db.transaction().execute(async (trx) => {
      const row = await sending.failNeverSent(trx, payout.id, NEVER_SENT, this.#ctx.now());
      if (!row) return undefined;
      const kind = this.#kinds.of(row.kind);
      for (const statement of kind.releases?.(row) ?? []) await trx.executeQuery(statement);
      if (kind.announcesNeverSent) await recordEvents(trx, [failureEvent(kind, row, NEVER_SENT, 0)]);
      return row;
    });
    return failed !== undefined;
  }
}
