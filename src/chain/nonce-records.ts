import type { FastifyBaseLogger } from "fastify";
import type { Db } from "../platform/db/database.ts";
import { runFences } from "../platform/db/fences.ts";
import type { FeeQuote, Hex, Network } from "./network.ts";
import * as sent from "./sent-transactions.ts";
import { RecordRefused, type RecordRequest, type TurnReads } from "./sent-types.ts";

// Signing a wallet's transactions with explicit nonces and recording them, before anything is
// broadcast, in the wallet's turn (transaction-sender.ts holds it meanwhile). The nonce after the
// last one this process recorded is kept in memory while the wallet's lock has been held since,
// so that a turn usually reads no nonce from the database.

/** One claim of a batch returned nothing: the batch's transaction is rolled back. */
class BatchClaimRefused extends Error {
  override name = "BatchClaimRefused";
}

export class WalletNonces {
  readonly #db: Db;
  readonly #network: Network;
  readonly #log: FastifyBaseLogger;
  /** Per wallet, the nonce after the last one this process recorded (valid while its lock is held). */
  readonly #next = new Map<string, number>();

  constructor(db: Db, network: Network, log: FastifyBaseLogger) {
    this.#db = db;
    this.#network = network;
    this.#log = log;
  }

  /** The wallet's lock was taken anew: another instance may have recorded nonces meanwhile. */
  forget(wallet: string): void {
    this.#next.delete(wallet);
  }

  /** Signs and records one request's transfers; its claim or fences refuse it (nothing recorded). */
  record(
    wallet: string,
    from: Hex,
    request: RecordRequest,
    reads: TurnReads,
  ): Promise<sent.NewTransaction[]> {
    return this.#withNextNonce(
      wallet,
      from,
      (next) => this.#recordOne(from, request, reads, next),
      (txs) => txs.at(-1)?.nonce,
    );
  }

  /**
   * Signs the transfers of several claimed requests with consecutive nonces, in their order, and
   * records them in ONE database transaction: every claim holds and all are recorded, or nothing
   * is. When one claim refuses (rare: the reconciler ended its payout meanwhile), each request is
   * recorded alone instead, so that only its own claim decides it. Per request, its transactions
   * or the error that refused it.
   */
  async recordClaimed(
    wallet: string,
    from: Hex,
    requests: readonly RecordRequest[],
    reads: TurnReads,
  ): Promise<(sent.NewTransaction[] | Error)[]> {
    try {
      return await this.#withNextNonce(
        wallet,
        from,
        (next) => this.#recordBatch(from, requests, reads, next),
        (batch) => batch.at(-1)?.at(-1)?.nonce,
      );
    } catch (err) {
      if (!(err instanceof BatchClaimRefused)) throw err;
    }
    const recorded: (sent.NewTransaction[] | Error)[] = [];
    for (const request of requests) {
      recorded.push(await this.record(wallet, from, request, reads).catch((err: unknown) => toError(err)));
    }
    return recorded;
  }

  /**
   * Runs `record` from the kept nonce (undefined: read it from the database). If another
   * instance took that nonce after all (the wallet's lock was lost unseen, its session ended),
   * nothing was recorded: once more from the nonce the database says.
   */
  async #withNextNonce<T>(
    wallet: string,
    from: Hex,
    record: (next: number | undefined) => Promise<T>,
    lastNonce: (recorded: T) => number | undefined,
  ): Promise<T> {
    const known = this.#next.get(wallet);
    this.#next.delete(wallet); // until this record has committed
    let recorded: T;
    try {
      recorded = await record(known);
    } catch (err) {
      if (known === undefined || !sent.isNonceTaken(err)) throw err;
      this.#log.warn({ from, nonce: known }, "the wallet's kept nonce was taken; reading it again");
      recorded = await record(undefined);
    }
    const last = lastNonce(recorded);
    if (last !== undefined) this.#next.set(wallet, last + 1);
    return recorded;
  }

  async #recordOne(
    from: Hex,
    request: RecordRequest,
    reads: TurnReads,
    next: number | undefined,
  ): Promise<sent.NewTransaction[]> {
    const on = this.#network;
    const { claim, fences, signedFences } = request.options;
    if (claim) {
      const first = Math.max(next ?? (await sent.nextRecordedNonce(this.#db, on, from)), reads.pendingNonce);
      const txs = await this.#sign(from, request, first, reads.fees);
      if (!(await sent.recordClaimed(this.#db, on, txs, claim))) {
        throw new RecordRefused("the send's claim returned nothing: nothing recorded, nothing sent");
      }
      return txs;
    }
    return this.#db.transaction().execute(async (trx) => {
      if (fences) await runFences(trx, fences);
      const first = Math.max(next ?? (await sent.nextRecordedNonce(trx, on, from)), reads.pendingNonce);
      const txs = await this.#sign(from, request, first, reads.fees);
      for (const tx of txs) await sent.recordTransaction(trx, on, tx);
      if (signedFences) await runFences(trx, signedFences(txs.map((tx) => tx.txHash)));
      return txs;
    });
  }

  async #recordBatch(
    from: Hex,
    requests: readonly RecordRequest[],
    reads: TurnReads,
    next: number | undefined,
  ): Promise<sent.NewTransaction[][]> {
    const on = this.#network;
    let nonce = Math.max(next ?? (await sent.nextRecordedNonce(this.#db, on, from)), reads.pendingNonce);
    const signed = await Promise.all(
      requests.map((request) => {
        const first = nonce;
        nonce += request.transfers.length;
        return this.#sign(from, request, first, reads.fees);
      }),
    );
    const sends = requests.map(({ options }, i) => {
      const txs = signed[i];
      if (!options.claim || !txs) throw new Error("a batch records claimed requests only");
      return { txs, claim: options.claim };
    });
    // One statement; in a transaction so that a claim that refuses rolls the others back.
    await this.#db.transaction().execute(async (trx) => {
      if (!(await sent.recordEachClaimed(trx, on, sends))) throw new BatchClaimRefused();
    });
    return signed;
  }

  #sign(
    from: Hex,
    request: RecordRequest,
    firstNonce: number,
    fees: FeeQuote,
  ): Promise<sent.NewTransaction[]> {
    return Promise.all(
      request.transfers.map(async (transfer, i): Promise<sent.NewTransaction> => {
        const nonce = firstNonce + i;
        const signed = await this.#network.signTransfer(request.privateKey, transfer, nonce, fees);
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
  }
}

function toError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}
