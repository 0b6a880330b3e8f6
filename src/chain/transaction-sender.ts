import type { FastifyBaseLogger } from "fastify";
import { SharedReads } from "../platform/concurrency/shared-reads.ts";
import type { Db } from "../platform/db/database.ts";
import { NOT_FREE, SessionTurns } from "../platform/db/wallet-lock.ts";
import type { Hex, Network } from "./network.ts";
import { WalletNonces } from "./nonce-records.ts";
import { OrderedBroadcasts, type RecordedSend } from "./ordered-broadcasts.ts";
import { awaitReceipts, receiptRecorder, recordReceipts } from "./receipts.ts";
import * as sent from "./sent-transactions.ts";
import type {
  OutgoingTransfer,
  RecordRequest,
  SentTransfer,
  SubmitOptions,
  SubmittedTransfer,
  TurnReads,
} from "./sent-types.ts";

// Nonce-ordered sending from service-held wallets, by any number of instances. Every transaction
// is signed with an explicit nonce and recorded BEFORE it is broadcast, so a crash can neither
// lose it nor send a second one. A wallet's transactions are signed, recorded and broadcast under
// one lock held across instances (SessionTurns), so they reach the node in nonce order
// (nonce-records.ts signs and records, ordered-broadcasts.ts broadcasts and handles refusals).
// The sends of a wallet that arrive while its turn is held share its next turn (a batch).

/** The reconciler broadcasts again only what its sender, if alive, has had time to broadcast. */
const REBROADCAST_AFTER_MS = 3_000;
/** Calls of one wallet sent in one turn, at most (they share its database transaction). */
const MAX_BATCH = 32;

/** A submit waiting for its wallet's turn, with the gas limits it began reading before the turn. */
interface QueuedSend {
  privateKey: Hex;
  transfers: Promise<OutgoingTransfer[]>;
  options: SubmitOptions;
  resolve: (submitted: SubmittedTransfer[]) => void;
  reject: (err: unknown) => void;
}

/** The calls of one wallet's next turn, and the node reads begun for it when its first call came. */
interface Batch {
  calls: QueuedSend[];
  reads: Promise<TurnReads>;
}

export class TransactionSender {
  readonly #db: Db;
  readonly #network: Network;
  readonly #log: FastifyBaseLogger;
  readonly #turns: SessionTurns;
  readonly #nonces: WalletNonces;
  readonly #broadcasts: OrderedBroadcasts;
  readonly #recordReceipt: ReturnType<typeof receiptRecorder>;
  /** Per wallet, the calls waiting for a turn that has not started yet (the next batch). */
  readonly #batches = new Map<string, Batch>();
  /** Per wallet, the count and fees being read (readAhead): callers meanwhile share it. */
  readonly #reads = new SharedReads<TurnReads>();

  constructor(db: Db, network: Network, log: FastifyBaseLogger) {
    this.#db = db;
    this.#network = network;
    this.#log = log;
    this.#turns = new SessionTurns(db, log);
    this.#nonces = new WalletNonces(db, network, log);
    this.#broadcasts = new OrderedBroadcasts(db, network, log);
    this.#recordReceipt = receiptRecorder(db);
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
   *
   * Calls for one wallet that arrive while its turn is held are sent together in its next turn
   * (a batch): one read of the node's count and fees, one database transaction recording all of
   * them when each has a `claim`, then the broadcasts in nonce order.
   */
  submit(
    privateKey: Hex,
    from: Hex,
    transfers: OutgoingTransfer[],
    options: SubmitOptions = {},
  ): Promise<SubmittedTransfer[]> {
    // The gas limit of each plain ETH transfer its caller did not set (a gas top-up; a
    // rail sets every leg's), which depends on whether its recipient has code. A recipient that
    // would refuse it gets the capped limit here: the chain's receipt decides.
    const limited = Promise.all(
      transfers.map(async (transfer) =>
        transfer.token === "ETH" && !transfer.call && transfer.gas === undefined
          ? { ...transfer, gas: (await this.#network.transferGas(from, transfer)).gas }
          : transfer,
      ),
    );
    // It is awaited in the turn; meanwhile a rejection is not an unhandled one.
    limited.catch(() => undefined);
    return new Promise((resolve, reject) => {
      this.#enqueue(from, { privateKey, transfers: limited, options, resolve, reject });
    });
  }

  /** Adds `call` to the wallet's batch not started yet, or starts one with a turn of its own. */
  #enqueue(from: Hex, call: QueuedSend): void {
    const wallet = this.#walletKey(from);
    const waiting = this.#batches.get(wallet);
    if (waiting && waiting.calls.length < MAX_BATCH) {
      waiting.calls.push(call);
      return;
    }
    const batch = { calls: [call], reads: call.options.reads ?? this.readAhead(from) };
    this.#batches.set(wallet, batch);
    this.#holdWallet(from, async () => {
      // Calls from now on wait for the next turn.
      if (this.#batches.get(wallet) === batch) this.#batches.delete(wallet);
      await this.#sendBatch(wallet, from, batch);
    }).catch((err: unknown) => {
      // The turn could not be had (the lock's connection): nothing of the batch was recorded.
      for (const queued of batch.calls) queued.reject(err);
    });
  }

  /**
   * The node's count and fees for a turn of `from`, read before the turn (never inside a database
   * transaction), once for the whole batch: the count matters only when it is ahead of what is
   * recorded (transactions sent from the wallet by something other than this service), so any
   * count read before the turn is as good as another. A caller may begin it before its submit
   * (SubmitOptions.reads), while it records; the callers meanwhile share the read in flight.
   */
  readAhead(from: Hex): Promise<TurnReads> {
    const reads = this.#reads.share(this.#walletKey(from), async () => {
      const [pendingNonce, fees] = await Promise.all([
        this.#network.pendingNonce(from),
        this.#network.fees(),
      ]);
      return { pendingNonce, fees };
    });
    reads.catch(() => undefined); // awaited in the turn; not an unhandled rejection meanwhile
    return reads;
  }

  /**
   * One turn of the wallet: records the batch's calls (each refused alone when its own reads,
   * claim or fences refuse it), then broadcasts them in nonce order, answering each call once
   * its transactions are sent.
   */
  async #sendBatch(wallet: string, from: Hex, batch: Batch): Promise<void> {
    let reads: TurnReads;
    try {
      reads = await batch.reads;
    } catch (err) {
      for (const call of batch.calls) call.reject(err); // nothing recorded: each caller sees why
      return;
    }
    const ready: { call: QueuedSend; request: RecordRequest }[] = [];
    for (const call of batch.calls) {
      try {
        const request = {
          privateKey: call.privateKey,
          transfers: await call.transfers,
          options: call.options,
        };
        ready.push({ call, request });
      } catch (err) {
        call.reject(err);
      }
    }
    if (ready.length === 0) return;
    if (ready.length > 1 && ready.every(({ request }) => request.options.claim)) {
      let recorded: (sent.NewTransaction[] | Error)[];
      try {
        recorded = await this.#nonces.recordClaimed(
          wallet,
          from,
          ready.map(({ request }) => request),
          reads,
        );
      } catch (err) {
        for (const { call } of ready) call.reject(err); // one transaction: nothing recorded
        return;
      }
      const sends: { call: QueuedSend; send: RecordedSend }[] = [];
      for (const [i, { call, request }] of ready.entries()) {
        const txs = recorded[i];
        if (txs === undefined || txs instanceof Error) call.reject(txs ?? new Error("not recorded"));
        else sends.push({ call, send: { request, txs } });
      }
      const submitted = await this.#broadcasts.sendTogether(
        from,
        sends.map(({ send }) => send),
      );
      for (const [i, { call }] of sends.entries()) call.resolve(submitted[i] ?? []);
      return;
    }
    for (const { call, request } of ready) {
      let txs: sent.NewTransaction[];
      try {
        txs = await this.#nonces.record(wallet, from, request, reads);
      } catch (err) {
        call.reject(err);
        continue;
      }
      call.resolve(await this.#broadcasts.sendAll(request, from, txs));
    }
  }

  /** Who has a transaction of `purpose` on its way from any wallet (signed, not settled yet). */
  openRecipients(purpose: string): Promise<Set<string>> {
    return sent.openRecipients(this.#db, this.#network, purpose);
  }

  /** Waits for the receipts of submitted transfers and records their outcome. */
  receipts(submitted: SubmittedTransfer[]): Promise<SentTransfer[]> {
    return awaitReceipts(this.#db, this.#network, submitted, this.#recordReceipt);
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
        const refusal = await this.#broadcasts.broadcast(tx);
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
      if (fresh) this.#nonces.forget(wallet);
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
}
