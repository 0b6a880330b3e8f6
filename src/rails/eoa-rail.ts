import type { ChainToken, EventLog, Hex, Network, OnNetwork } from "../chain/network.ts";
import { transactionsOf } from "../chain/sent-transactions.ts";
import { RecordRefused, type SentTransfer, type TurnReads } from "../chain/sent-types.ts";
import type { TransactionSender } from "../chain/transaction-sender.ts";
import { RECIPIENT_REVERTED } from "../domain/payout-state.ts";
import { SharedReads } from "../platform/concurrency/shared-reads.ts";
import type { Db } from "../platform/db/database.ts";
import {
  type Leg,
  type Move,
  type MoveHooks,
  type MoveOutcome,
  type MoveOwner,
  MoveRefused,
  type Rail,
  type RecordedMove,
  type Submission,
  type WalletFunds,
} from "./rail.ts";

// A workspace EOA as a rail: its legs are transactions signed with consecutive nonces, recorded
// before they are broadcast and broadcast in nonce order across instances (TransactionSender);
// the legs of one move go together (once one is refused, the ones after it are cancelled). Gas is
// paid by the wallet. What a sender left open is finished by `reconcile` from the chain.

export class EoaRail implements Rail {
  readonly pipelined = true;
  readonly #network: Network;
  readonly #sender: TransactionSender;
  /** Where the sender keeps its records (chain/sent-transactions.ts). */
  readonly #db: Db;
  /** Per wallet and tokens, the funds read in flight: a caller asking meanwhile shares it. */
  readonly #fundsReads = new SharedReads<WalletFunds>();

  constructor(network: Network, sender: TransactionSender, db: Db) {
    this.#network = network;
    this.#sender = sender;
    this.#db = db;
  }

  get network(): OnNetwork {
    return this.#network;
  }

  balance(address: Hex, token: ChainToken): Promise<bigint> {
    return this.#network.balance(address, token);
  }

  funds(address: Hex, tokens: readonly ChainToken[]): Promise<WalletFunds> {
    // One block for balances and nonce: the payout service tells by the nonce which of the
    // wallet's transactions in flight that balance already paid for. So any read is sound,
    // whenever it began (modules/transfers/funds.ts), and the payouts of a burst share one
    // instead of each waiting for the node (which answers behind its block production).
    const key = `${address.toLowerCase()} ${tokens.join(",")}`;
    return this.#fundsReads.share(key, () => this.#network.accountAt(address, tokens));
  }

  gasRequired(token: ChainToken): Promise<bigint> {
    return this.#network.transferGasCost(token);
  }

  gasCost(units: bigint): Promise<bigint> {
    return this.#network.gasCost(units);
  }

  prepare(): undefined {
    return undefined;
  }

  reconcile(): Promise<void> {
    return this.#sender.reconcile();
  }

  /**
   * A move's legs, each its own transaction: open while one may still be mined; reverted at the
   * first that was not mined with a success receipt (reverted, or its nonce taken by another),
   * the others named with whether they were; success once all were, the last leg's transaction
   * (a swap's router call after its approval) the move's.
   */
  async recorded(owner: MoveOwner): Promise<RecordedMove> {
    const txs = await transactionsOf(
      this.#db,
      "transferId" in owner ? { payoutId: owner.transferId } : { paymentId: owner.paymentId },
    );
    if (txs.length === 0) return { state: "none" };
    if (txs.some((t) => t.status === "signed")) return { state: "open" };
    const legs = txs
      .filter((t) => t.status !== "rejected") // refused before migration 016: held no nonce
      .map((t) => ({ purpose: t.purpose, txHash: t.tx_hash, mined: t.status === "mined" }));
    const failed = txs.find((t) => t.status !== "mined");
    const outcome: MoveOutcome = failed
      ? { status: "reverted", txHash: failed.tx_hash, legs, error: failed.error }
      : { status: "success", txHash: txs.at(-1)?.tx_hash ?? "", legs, error: null };
    // `failed`: its own receipt reverted; otherwise never mined, its nonce taken by another.
    return { state: "ended", outcome, byReceipt: failed?.status === "failed" };
  }

  logsOf(mined: { txHash: string }): Promise<EventLog[]> {
    return this.#network.transactionLogs(mined.txHash as Hex);
  }

  async submit(move: Move, hooks: MoveHooks): Promise<Submission> {
    // Each leg's gas limit is read while the caller's checks run (beside its balance reads), and
    // they reserve exactly what the legs are signed with: plain ETH to a contract takes more
    // than 21,000, up to the network's cap.
    const limits = Promise.all(move.legs.map((leg) => this.#network.transferGas(move.from, leg)));
    limits.catch(() => undefined); // awaited below; not an unhandled rejection meanwhile
    const refusalOf = (gas: Awaited<typeof limits>) => gas.find((g) => g.refusal !== null)?.refusal ?? null;
    const gasUnits = limits.then((gas) =>
      refusalOf(gas) === null ? gas.reduce((sum, g) => sum + g.gas, 0n) : 0n,
    );
    gasUnits.catch(() => undefined);
    // The node's count and fees for the wallet's turn (a read the wallet's sends share), asked
    // for now, beside the check's own reads: the node answers while the check reads and the
    // database records, so the turn need not wait for it after the record. A separate request,
    // awaited only by the turn: a node slow to answer it holds up the signing, never the check.
    const reads = this.#sender.readAhead(move.from);
    if (hooks.persist && !(await hooks.persist(gasUnits)))
      throw new MoveRefused("not recorded by its caller");
    const gas = await limits;
    const refusal = refusalOf(gas);
    if (refusal !== null) {
      // Its recipient's code would revert, or burn more gas than allowed: nothing is signed or
      // sent (no nonce, no gas); the move fails at once, as its recipient's doing.
      return {
        outcome: Promise.resolve({
          status: "reverted",
          txHash: "",
          legs: [],
          error: refusal,
          unsent: true,
          cause: "recipient",
        }),
      };
    }
    const transfers = move.legs.map((leg, i) => ({
      ...leg,
      gas: gas[i]?.gas,
      paymentId: move.paymentId ?? null,
      payoutId: move.payoutId ?? null,
    }));
    let submitted: Awaited<ReturnType<TransactionSender["submit"]>>;
    try {
      submitted = await this.#sender.submit(await move.signingKey(), move.from, transfers, {
        ...(hooks.claim ? { claim: hooks.claim } : {}),
        together: move.legs.length > 1,
        reads,
      });
    } catch (err) {
      if (err instanceof RecordRefused) throw new MoveRefused(err.message);
      throw err;
    }
    return { outcome: this.#sender.receipts(submitted).then((sent) => outcomeOf(sent, move.legs)) };
  }
}

/**
 * A move's outcome from its legs': pending while one is open (its outcome, and whether the legs
 * after a refused one were cancelled, is the chain's to tell), else reverted if one was. A plain
 * ETH transfer whose own receipt reverted failed in its recipient's code: nothing else in it can.
 */
function outcomeOf(sent: SentTransfer[], legs: readonly Leg[]): MoveOutcome {
  const first = sent[0];
  if (!first) throw new Error("the sender returned no transaction");
  const mined = sent.map((s) => ({ purpose: s.purpose, txHash: s.txHash, mined: s.status === "success" }));
  if (sent.some((s) => s.status === "not_found"))
    return { status: "pending", txHash: first.txHash, legs: mined, error: null };
  const i = sent.findIndex((s) => s.status === "reverted");
  const reverted = sent[i];
  if (reverted) {
    const leg = legs[i];
    // `error` is set only where the node refused it and a cancellation took its nonce.
    const byRecipient = reverted.error === null && leg?.token === "ETH" && !leg.call;
    return {
      status: "reverted",
      txHash: reverted.txHash,
      legs: mined,
      error: reverted.error ?? (byRecipient ? RECIPIENT_REVERTED : "transaction reverted"),
      ...(byRecipient ? { cause: "recipient" as const } : {}),
    };
  }
  // The last leg completes the move (a swap's router call after its approval).
  return { status: "success", txHash: (sent.at(-1) ?? first).txHash, legs: mined, error: null };
}
