import type { FastifyBaseLogger } from "fastify";
import type { Db } from "../platform/db/database.ts";
import { broadcastRecorded } from "./broadcast.ts";
import type { Hex, Network } from "./network.ts";
import { errorText, isNodeBusy } from "./node-errors.ts";
import { WITHDRAWN } from "./receipts.ts";
import * as sent from "./sent-transactions.ts";
import { type RecordRequest, type SubmittedTransfer, submittedOf } from "./sent-types.ts";

// Broadcasting a wallet's recorded transactions in nonce order, in its turn (transaction-sender.ts).
// A signed transaction is never given up while it could still be mined: a failure is reported
// only on a failed receipt, or once another transaction provably took its nonce. A transaction the
// node refuses (after any gap below it was filled) is therefore replaced by a cancelling one at
// its nonce, and fails once that is mined; if even that cannot be broadcast, both stay open and
// the outcome stays unknown until one of them is mined. A nonce is never skipped.

const NOT_SENT_AFTER_REFUSAL = "not sent yet: an earlier transaction of its wallet could not be sent";

/** Transactions broadcast in one request at most (the network's transport splits larger ones). */
const TOGETHER_AT_MOST = 100;

/** One send of a turn: its signing key and options, and its transactions as recorded. */
export interface RecordedSend {
  request: Pick<RecordRequest, "privateKey" | "options">;
  txs: readonly sent.RecordedTransaction[];
}

export class OrderedBroadcasts {
  readonly #db: Db;
  readonly #network: Network;
  readonly #log: FastifyBaseLogger;

  constructor(db: Db, network: Network, log: FastifyBaseLogger) {
    this.#db = db;
    this.#network = network;
    this.#log = log;
  }

  /**
   * Broadcasts the sends of a turn, in nonce order; per send what the node made of each of its
   * transactions. Sends of one transaction each are broadcast at once: calls made together reach
   * the node as one request, in order (the EVM network's batching transport), instead of one
   * round trip each. From the first the node did not take, they are sent one at a time
   * (`sendAll`): the refusal handling sees them in nonce order, and one the node already took is
   * taken again ("already known"). A send of several legs is always sent one at a time: a later
   * leg must not reach the node before it is known that the earlier ones were taken.
   */
  async sendTogether(from: Hex, sends: readonly RecordedSend[]): Promise<SubmittedTransfer[][]> {
    const single = sends.length > 1 && sends.every((send) => send.txs.length === 1);
    const txs = sends.flatMap((send) => send.txs);
    if (!single || txs.length > TOGETHER_AT_MOST) {
      const submitted: SubmittedTransfer[][] = [];
      for (const send of sends) submitted.push(await this.sendAll(send.request, from, send.txs));
      return submitted;
    }
    const taken = await Promise.all(txs.map((tx) => this.broadcast(tx).catch(() => "not sent")));
    const firstMissed = taken.findIndex((refusal) => refusal !== null);
    const submitted: SubmittedTransfer[][] = [];
    for (const [i, send] of sends.entries()) {
      if (firstMissed === -1 || i < firstMissed) submitted.push(send.txs.map((tx) => submittedOf(tx, null)));
      else submitted.push(await this.sendAll(send.request, from, send.txs));
    }
    return submitted;
  }

  /** Broadcasts one send's recorded transactions in nonce order; never throws (they are recorded). */
  async sendAll(
    { privateKey, options }: Pick<RecordRequest, "privateKey" | "options">,
    from: Hex,
    recorded: readonly sent.RecordedTransaction[],
  ): Promise<SubmittedTransfer[]> {
    const submitted: SubmittedTransfer[] = [];
    for (const [i, tx] of recorded.entries()) {
      const refusal = await this.#sendRecorded(privateKey, from, tx);
      submitted.push(submittedOf(tx, refusal));
      if (refusal && !refusal.unsent && options.together) {
        // Legs of one whole: the ones after a refused leg are cancelled, never paid without it.
        for (const later of recorded.slice(i + 1)) {
          submitted.push(submittedOf(later, await this.#withdraw(privateKey, from, later)));
        }
        break;
      }
      if (refusal && refusal.cancelHash === null) {
        // Its nonce is still open: the later ones cannot be mined before it. They stay
        // recorded; the reconciler and the wallet's next send broadcast them once it is filled.
        const waiting = { reason: NOT_SENT_AFTER_REFUSAL, cancelHash: null };
        for (const later of recorded.slice(i + 1)) submitted.push(submittedOf(later, waiting));
        break;
      }
    }
    return submitted;
  }

  /**
   * Sends a recorded transaction; never throws (it is recorded: whatever fails here leaves it
   * open, for the receipts and the reconciler to decide). Null once the node has it, else why not.
   */
  async #sendRecorded(
    privateKey: Hex,
    from: Hex,
    tx: sent.RecordedTransaction,
  ): Promise<SubmittedTransfer["refusal"]> {
    try {
      return await this.#sendInOrder(privateKey, from, tx);
    } catch (err) {
      this.#log.error({ err, txHash: tx.txHash }, "sending a recorded transaction failed; it stays open");
      return { reason: `not sent yet: ${errorText(err)}`, cancelHash: null };
    }
  }

  /**
   * Broadcasts `tx`; if the node refuses it, broadcasts first what is missing below its nonce and
   * tries once more; if it is still refused, replaces it with a cancellation. Returns null once
   * the node has it, else the refusal.
   */
  async #sendInOrder(
    privateKey: Hex,
    from: Hex,
    tx: sent.RecordedTransaction,
  ): Promise<SubmittedTransfer["refusal"]> {
    let reason: string | null;
    try {
      reason = await this.broadcast(tx);
      if (reason !== null && (await this.#fillGapBelow(privateKey, from, tx.nonce)))
        reason = await this.broadcast(tx);
    } catch (err) {
      // Nothing is decided about it (a busy node; no answer while filling a gap below it): it
      // stays open, to be sent again, and the legs sent with it are not withdrawn.
      const level = isNodeBusy(err) ? "warn" : "error";
      this.#log[level]({ err, txHash: tx.txHash }, "a transaction could not be sent yet; it stays open");
      return { reason: `not sent yet: ${errorText(err)}`, cancelHash: null, unsent: true };
    }
    if (reason === null) return null;
    this.#log.warn(
      { txHash: tx.txHash, nonce: tx.nonce, reason },
      "the node refused a transaction; cancelling it",
    );
    await sent.noteRefusal(this.#db, tx.txHash, reason);
    return { reason, cancelHash: await this.#cancel(privateKey, from, tx) };
  }

  /**
   * Broadcasts, in nonce order, the wallet's recorded transactions the node does not have below
   * `nonce` (a sender that stopped before broadcasting, or a refusal). Returns whether there was
   * such a gap and it is filled now.
   */
  async #fillGapBelow(privateKey: Hex, from: Hex, nonce: number): Promise<boolean> {
    const pending = await this.#network.pendingNonce(from);
    if (pending >= nonce) return false;
    const missing = await sent.toBroadcast(this.#db, this.#network, from, pending, nonce);
    if (missing.length !== nonce - pending) return false; // a nonce with nothing recorded: not ours to fill
    const refused = new Set<string>(); // payments whose leg the node refused here
    for (const tx of missing) {
      if (tx.paymentId !== null && refused.has(tx.paymentId)) {
        // A leg sent together with one refused: cancelled too, never paid without it.
        if ((await this.#withdraw(privateKey, from, tx)).cancelHash === null) return false;
        continue;
      }
      const reason = await this.broadcast(tx);
      if (reason === null) continue;
      if (tx.replaces !== null) return false;
      await sent.noteRefusal(this.#db, tx.txHash, reason);
      if (tx.paymentId !== null) refused.add(tx.paymentId);
      if ((await this.#cancel(privateKey, from, tx)) === null) return false;
    }
    return true;
  }

  /**
   * Cancels a recorded leg never broadcast because one before it was refused. The cancellation is
   * recorded even if the node cannot take it yet, so the reconciler sends it, never the leg.
   */
  async #withdraw(privateKey: Hex, from: Hex, tx: sent.RecordedTransaction) {
    const cancelHash = await this.#cancel(privateKey, from, tx).catch((err: unknown) => {
      this.#log.error({ err, txHash: tx.txHash }, "withdrawing a transaction failed; it stays open");
      return null;
    });
    return { reason: WITHDRAWN, cancelHash };
  }

  /** Takes `tx`'s nonce with a recorded cancelling transaction; its hash once broadcast, else null. */
  async #cancel(privateKey: Hex, from: Hex, tx: sent.RecordedTransaction): Promise<Hex | null> {
    let cancel = await sent.cancellationOf(this.#db, tx.txHash);
    if (!cancel) {
      const signed = await this.#network.signCancel(privateKey, from, tx.raw, await this.#network.fees());
      cancel = await sent.recordCancellation(this.#db, this.#network, from, tx, signed);
    }
    const refusal = await this.broadcast(cancel);
    if (refusal === null) return cancel.txHash;
    this.#log.error(
      { txHash: tx.txHash, cancelHash: cancel.txHash, refusal },
      "the node refuses the cancellation too; the nonce stays open",
    );
    return null;
  }

  /** Null once the node has it, else the node's refusal (broadcast.ts). */
  broadcast(tx: sent.RecordedTransaction): Promise<string | null> {
    return broadcastRecorded(this.#network, this.#log, tx);
  }
}
