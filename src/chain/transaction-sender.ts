import type { FastifyBaseLogger } from "fastify";
import type { Db } from "../platform/db/database.ts";
import { runFences } from "../platform/db/fences.ts";
import { NOT_FREE, SessionTurns } from "../platform/db/wallet-lock.ts";
import { broadcastRecorded } from "./broadcast.ts";
import type { FeeQuote, Hex, Network } from "./network.ts";
import { errorText, isNodeBusy } from "./node-errors.ts";
import { awaitReceipts, recordReceipts, WITHDRAWN } from "./receipts.ts";
import * as sent from "./sent-transactions.ts";
import {
  type OutgoingTransfer,
  RecordRefused,
  type SentTransfer,
  type SubmitOptions,
  type SubmittedTransfer,
  submittedOf,
} from "./sent-types.ts";

// Nonce-ordered sending from service-held wallets, by any number of instances. Every transaction
// is signed with an explicit nonce and recorded BEFORE it is broadcast, so a crash can neither
// lose it nor send a second one. A wallet's transactions are signed, recorded and broadcast under
// one lock held across instances (SessionTurns), so they reach the node in nonce order.
//
// A signed transaction is never given up while it could still be mined: a failure is reported
// only on a failed receipt, or once another transaction provably took its nonce. A transaction the
// node refuses (after any gap below it was filled) is therefore replaced by a cancelling one at
// its nonce, and fails once that is mined; if even that cannot be broadcast, both stay open and
// the outcome stays unknown until one of them is mined. A nonce is never skipped.

/** The reconciler broadcasts again only what its sender, if alive, has had time to broadcast. */
const REBROADCAST_AFTER_MS = 3_000;
const NOT_SENT_AFTER_REFUSAL = "not sent yet: an earlier transaction of its wallet could not be sent";

export class TransactionSender {
  readonly #db: Db;
  readonly #network: Network;
  readonly #log: FastifyBaseLogger;
  readonly #turns: SessionTurns;
  /**
   * Per wallet, the nonce after the last one this process recorded, valid while it has held the
   * wallet's lock since (no other instance can have recorded one meanwhile).
   */
  readonly #nextNonce = new Map<string, number>();

  constructor(db: Db, network: Network, log: FastifyBaseLogger) {
    this.#db = db;
    this.#network = network;
    this.#log = log;
    this.#turns = new SessionTurns(db, log);
  }

  /** Signs, records, broadcasts and waits for the receipts of `transfers`, in order. */
  async send(
    privateKey: Hex,
    from: Hex,
    transfers: OutgoingTransfer[],
    options: SubmitOptions = {},
  ): Promise<SentTransfer[]> {
    return this.receipts(await this.submit(privateKey, from, transfers, options));
  }

  /**
   * Signs, records and broadcasts `transfers` (consecutive nonces), and resolves once the node
   * has them, without waiting for their receipts: the wallet's next transactions can be signed
   * while these are mined (a nonce pipeline). `receipts` then waits for the outcomes. It rejects
   * only when nothing was recorded; once recorded, a transfer's outcome is open until the chain
   * decides it, whatever goes wrong while sending it.
   */
  async submit(
    privateKey: Hex,
    from: Hex,
    transfers: OutgoingTransfer[],
    options: SubmitOptions = {},
  ): Promise<SubmittedTransfer[]> {
    // The node's count and the fees are read while the wallet's turn is awaited, never inside a
    // database transaction. The count matters only when it is ahead of what is recorded
    // (transactions sent from the wallet by something other than this service).
    const pendingNonce = this.#network.pendingNonce(from);
    const fees = this.#network.fees();
    // So is the gas limit of each plain ETH transfer its caller did not set (a gas top-up; a
    // rail sets every leg's), which depends on whether its recipient has code. A recipient that
    // would refuse it gets the capped limit here: the chain's receipt decides.
    const limited = Promise.all(
      transfers.map(async (transfer) =>
        transfer.token === "ETH" && !transfer.call && transfer.gas === undefined
          ? { ...transfer, gas: (await this.#network.transferGas(from, transfer)).gas }
          : transfer,
      ),
    );
    // Each is awaited below; meanwhile a rejection is not an unhandled one.
    for (const read of [pendingNonce, fees, limited]) read.catch(() => undefined);
    return this.#holdWallet(from, async () => {
      const recorded = await this.#signAndRecord(
        privateKey,
        from,
        await limited,
        await pendingNonce,
        await fees,
        options,
      );
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
    });
  }

  /** Who has a transaction of `purpose` on its way from any wallet (signed, not settled yet). */
  openRecipients(purpose: string): Promise<Set<string>> {
    return sent.openRecipients(this.#db, this.#network, purpose);
  }

  /** Waits for the receipts of submitted transfers and records their outcome. */
  receipts(submitted: SubmittedTransfer[]): Promise<SentTransfer[]> {
    return awaitReceipts(this.#db, this.#network, submitted);
  }

  /**
   * Brings the environment's signed transactions to a final state: records the receipts of mined
   * ones, marks `replaced` those whose nonce another transaction took, and broadcasts again (same
   * signed bytes) what the node lacks because a sender stopped before broadcasting it or the
   * node dropped it. It waits for nothing: the next call sees what was mined meanwhile.
   */
  async reconcile(): Promise<void> {
    const open = await sent.openTransactions(this.#db, this.#network, REBROADCAST_AFTER_MS);
    const byWallet = new Map<Hex, sent.OpenTransaction[]>();
    for (const tx of open) byWallet.set(tx.from, [...(byWallet.get(tx.from) ?? []), tx]);
    for (const [from, txs] of byWallet) {
      try {
        await this.#reconcileWallet(from, txs);
      } catch (err) {
        // One wallet's trouble (a node error, a lost connection) leaves the others' to this tick.
        this.#log.error({ err, from }, "reconciling a wallet's transactions failed; retried next tick");
      }
    }
  }

  async #reconcileWallet(from: Hex, txs: sent.OpenTransaction[]): Promise<void> {
    const open = await recordReceipts(this.#db, this.#network, txs);
    if (open.length === 0) return;
    // A nonce another transaction took, buried under the confirmations: only if the node has no
    // receipt for this one and does not know it at all is it never to be mined.
    const buried = await this.#network.minedNonce(from, this.#network.confirmations);
    const taken = open.filter((tx) => tx.nonce < buried);
    for (const tx of await recordReceipts(this.#db, this.#network, taken)) {
      if (await this.#network.known(tx.txHash)) continue;
      await sent.settleTransaction(
        this.#db,
        tx.txHash,
        "replaced",
        "never mined: its nonce was taken by another transaction",
        new Date(),
      );
    }
    // Broadcast again only what the node lacks (nonces from its count on), once its sender had
    // time to send it itself.
    if (!open.some((tx) => tx.settled)) return;
    const pending = await this.#network.pendingNonce(from);
    if (!open.some((tx) => tx.settled && tx.nonce >= pending)) return;
    // Only if no other instance holds the wallet now: its holder is sending (and fills gaps below
    // its nonce) or was stopped, whose lock ends with its session; the next pass tries again, and
    // the wallets after this one are not held up meanwhile.
    const turn = await this.#holdWalletIfFree(from, async () => {
      for (const tx of await sent.toBroadcast(this.#db, this.#network, from, pending, null)) {
        const refusal = await this.#broadcast(tx);
        if (refusal !== null) {
          this.#log.error(
            { txHash: tx.txHash, from, nonce: tx.nonce, refusal },
            "the node refuses a recorded transaction; the wallet's later transactions wait for its nonce",
          );
          return;
        }
      }
    });
    if (turn === NOT_FREE)
      this.#log.info({ from }, "another instance holds the wallet; broadcast again next pass");
  }

  /** One wallet's sends take turns, in this process and across instances (wallet-lock.ts). */
  #holdWallet<T>(from: Hex, task: () => Promise<T>): Promise<T> {
    const wallet = this.#walletKey(from);
    return this.#turns.run(wallet, this.#walletTurn(wallet, task));
  }

  /** The same turn, unless another instance holds the wallet now (NOT_FREE then). */
  #holdWalletIfFree<T>(from: Hex, task: () => Promise<T>): Promise<T | typeof NOT_FREE> {
    const wallet = this.#walletKey(from);
    return this.#turns.runIfFree(wallet, this.#walletTurn(wallet, task));
  }

  #walletTurn<T>(wallet: string, task: () => Promise<T>): (fresh: boolean) => Promise<T> {
    return (fresh) => {
      // Another instance may have recorded nonces since this process last held the lock.
      if (fresh) this.#nextNonce.delete(wallet);
      return task();
    };
  }

  /**
   * The wallet's lock across instances. Per environment, not per network: the one EOA's turns on
   * several networks are taken one at a time (correct, not concurrent). A network in the key
   * would need every instance to take the new key at once (a rolling upgrade holds both).
   */
  #walletKey(from: Hex): string {
    return `wallet:${this.#network.environment}:${from.toLowerCase()}`;
  }

  async #signAndRecord(
    privateKey: Hex,
    from: Hex,
    transfers: OutgoingTransfer[],
    pendingNonce: number,
    fees: FeeQuote,
    options: SubmitOptions,
  ): Promise<sent.RecordedTransaction[]> {
    const on = this.#network;
    const wallet = this.#walletKey(from);
    const known = this.#nextNonce.get(wallet);
    this.#nextNonce.delete(wallet); // until this record has committed
    const sign = (recordedNext: number) =>
      Promise.all(
        transfers.map(async (transfer, i): Promise<sent.NewTransaction> => {
          const nonce = Math.max(recordedNext, pendingNonce) + i;
          const signed = await this.#network.signTransfer(privateKey, transfer, nonce, fees);
          return {
            txHash: signed.hash,
            raw: signed.raw,
            nonce,
            token: transfer.token,
            purpose: transfer.purpose,
            replaces: null,
            from,
            to: transfer.to,
            amount: transfer.amount,
            paymentId: transfer.paymentId ?? null,
            payoutId: transfer.payoutId ?? null,
            gasLimit: signed.gas,
          };
        }),
      );
    const { claim, fences, signedFences } = options;
    const record = async (next: number | undefined): Promise<sent.NewTransaction[]> => {
      if (claim) {
        const txs = await sign(next ?? (await sent.nextRecordedNonce(this.#db, on, from)));
        if (!(await sent.recordClaimed(this.#db, on, txs, claim))) {
          throw new RecordRefused("the send's claim returned nothing: nothing recorded, nothing sent");
        }
        return txs;
      }
      return this.#db.transaction().execute(async (trx) => {
        if (fences) await runFences(trx, fences);
        const txs = await sign(next ?? (await sent.nextRecordedNonce(trx, on, from)));
        for (const tx of txs) await sent.recordTransaction(trx, on, tx);
        if (signedFences) await runFences(trx, signedFences(txs.map((tx) => tx.txHash)));
        return txs;
      });
    };
    let recorded: sent.NewTransaction[];
    try {
      recorded = await record(known);
    } catch (err) {
      // The nonce kept in memory was taken after all (the wallet's lock was lost unseen, its
      // session ended): nothing was recorded; once more with the nonce the database says.
      if (known === undefined || !sent.isNonceTaken(err)) throw err;
      this.#log.warn({ from, nonce: known }, "the wallet's kept nonce was taken; reading it again");
      recorded = await record(undefined);
    }
    const last = recorded.at(-1);
    if (last) this.#nextNonce.set(wallet, last.nonce + 1);
    return recorded;
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
      reason = await this.#broadcast(tx);
      if (reason !== null && (await this.#fillGapBelow(privateKey, from, tx.nonce)))
        reason = await this.#broadcast(tx);
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
      const reason = await this.#broadcast(tx);
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
    const refusal = await this.#broadcast(cancel);
    if (refusal === null) return cancel.txHash;
    this.#log.error(
      { txHash: tx.txHash, cancelHash: cancel.txHash, refusal },
      "the node refuses the cancellation too; the nonce stays open",
    );
    return null;
  }

  /** Null once the node has it, else the node's refusal (broadcast.ts). */
  #broadcast(tx: sent.RecordedTransaction): Promise<string | null> {
    return broadcastRecorded(this.#network, this.#log, tx);
  }
}
