import type { Hex, OnNetwork } from "../../chain/network.ts";
import type { Environment } from "../../config.ts";
import type { AppContext } from "../../context.ts";
import { RECIPIENT_REVERTED, revertCause, type TransferKindName } from "../../domain/payout-state.ts";
import type { Rails } from "../../rails/index.ts";
import type { MoveOutcome } from "../../rails/rail.ts";
import { recordEvents } from "../webhooks/outbox.ts";
import type { TransferEndings } from "./finish.ts";
import { failureEvents, releasesOf, type TransferKinds } from "./kinds.ts";
import type { TransferLeases } from "./leases.ts";
import type { TransferRow } from "./repo.ts";
import * as sending from "./sending-repo.ts";

// Finishes live transfers that no instance is sending any more: their instance stopped (its lease
// ran out), or answered 202 and gave them up. Their outcome is what their rail's own records say
// (Rail.recorded): an EOA's recorded transaction and its receipt (TransactionSender.reconcile
// records it, or that another transaction took its nonce), a smart account's recorded user
// operation sent again. A transfer is failed only when it can never happen; one with nothing
// recorded was never sent, and fails uncounted — unless its sender claims it at that moment,
// which the fence of failNeverSent leaves to it.

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

  /**
   * Brings what the environment's rails left open to a final state first (an EOA's recorded
   * transactions: their receipts, a rebroadcast), then finishes the transfers no instance is
   * sending from what those records say. Returns how many transfers it finished.
   */
  async reconcile(on: OnNetwork): Promise<number> {
    for (const rail of Object.values(this.#rails.of(on.environment, on.id) ?? {})) await rail?.reconcile();
    let finished = 0;
    for (const payout of await sending.unownedProcessing(this.#ctx.db, on)) {
      if (this.#leases.has(payout.id)) continue; // this process is sending it
      try {
        if (await this.#finish(on.environment, payout)) finished++;
      } catch (err) {
        // One payout's trouble (a bundler or node error) leaves the others to this pass.
        this.#ctx.log.error({ err, payoutId: payout.id }, "reconciling a payout failed; retried next tick");
      }
    }
    return finished;
  }

  /**
   * What each leg of an ended transfer's move came to (its transaction, whether it was mined), as
   * its rail recorded them; `purposes` name the legs of a user operation, which carries them all.
   * Empty when nothing was sent, or no rail is here to ask.
   */
  async legsOf(payout: TransferRow, purposes: readonly string[]): Promise<MoveOutcome["legs"]> {
    const walletType = payout.wallet_type === "smart_wallet" ? "smart_wallet" : "eoa";
    const rail = this.#rails.of(payout.environment as Environment, payout.network)?.[walletType];
    if (!rail) return [];
    const operation = payout.user_operation
      ? { userOpHash: payout.user_op_hash as Hex, serialized: payout.user_operation, purposes: [...purposes] }
      : null;
    const recorded = await rail.recorded({ transferId: payout.id }, operation);
    return recorded.state === "ended" ? recorded.outcome.legs : [];
  }

  /** Finishes `payout` if its outcome is known; returns whether it did. */
  async #finish(environment: Environment, payout: TransferRow): Promise<boolean> {
    const scope = { workspaceId: payout.workspace_id, environment };
    const walletType = payout.wallet_type === "smart_wallet" ? "smart_wallet" : "eoa";
    const operation = payout.user_operation
      ? { userOpHash: payout.user_op_hash as Hex, serialized: payout.user_operation }
      : null;
    // What its rail recorded says how it ended (its records are the rail's own).
    const rail = this.#rails.of(environment, payout.network)?.[walletType];
    // A recorded operation with no bundler here now is left until there is one.
    if (!rail && operation) return false;
    const recorded = rail
      ? await rail.recorded({ transferId: payout.id }, operation)
      : { state: "none" as const };
    if (recorded.state === "open") return false; // it may still be mined
    if (recorded.state === "ended") {
      const { outcome } = recorded;
      if (outcome.status === "success") {
        await this.#outcomes.recordCompletion(scope, payout, outcome);
        return true;
      }
      // Reverted in its own receipt (plain ETH from an EOA: in its recipient's code), or never
      // mined and its nonce taken by another transaction, or an operation that reverted.
      const kind = payout.kind as TransferKindName;
      const cause = recorded.byReceipt ? revertCause({ kind, tokenSymbol: payout.token_symbol }) : "sending";
      const fallback = operation ? "user operation reverted" : "transaction reverted";
      const error = cause === "recipient" ? RECIPIENT_REVERTED : (outcome.error ?? fallback);
      await this.#outcomes.recordFailure(scope, payout, outcome.txHash || null, error, cause);
      return true;
    }
    // Nothing recorded: never sent, unless its sender claims it at this moment (then a no-op).
    // What its record took elsewhere (a refund's share of its payment) is given back with it, and
    // its orderer's claim (a settlement's payment is settled again).
    const failed = await this.#ctx.db.transaction().execute(async (trx) => {
      const row = await sending.failNeverSent(trx, payout.id, NEVER_SENT, this.#ctx.now());
      if (!row) return undefined;
      const kind = this.#kinds.of(row.kind);
      for (const statement of releasesOf(kind, row, true)) await trx.executeQuery(statement);
      if (kind.announcesNeverSent) await recordEvents(trx, failureEvents(kind, row, NEVER_SENT, 0));
      return row;
    });
    return failed !== undefined;
  }
}
