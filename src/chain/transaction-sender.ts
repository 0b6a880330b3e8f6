import type { FastifyBaseLogger } from "fastify";
import { sql } from "kysely";
import { KeyedQueue } from "../platform/concurrency/keyed-queue.ts";
import type { Db } from "../platform/db/database.ts";
import type { ChainToken, Hex, Network, ReceiptStatus, TransferRequest } from "./network.ts";

// Nonce-ordered sending from service-held wallets. Every transaction is signed with an explicit
// nonce and written to chain_transactions BEFORE it is broadcast, so a crash can neither lose it
// nor send a second one: on restart, `reconcile` finds it by hash and rebroadcasts the same bytes.
// Nonces of one wallet are assigned under a per-wallet advisory lock (all instances), and in this
// process one wallet signs and broadcasts one batch at a time; receipts are awaited outside that
// queue, so the wallet's next batch does not wait for the previous one to be mined.

export interface OutgoingTransfer extends TransferRequest {
  purpose: string;
  paymentId?: string | null;
  payoutId?: string | null;
}

export interface SubmittedTransfer {
  txHash: Hex;
  nonce: number;
  token: ChainToken;
  purpose: string;
  /** Why the node refused it (it was never sent, its nonce is free again); null when broadcast. */
  refusal: string | null;
}

export interface SentTransfer {
  txHash: Hex;
  status: ReceiptStatus;
  token: ChainToken;
  purpose: string;
  /** Why it failed, when the node refused it outright. */
  error: string | null;
}

/** A JSON-RPC error object from the node (as opposed to a timeout or a refused connection). */
function isNodeAnswer(err: unknown): boolean {
  for (
    let e = err as { name?: string; code?: unknown; cause?: unknown } | undefined;
    e;
    e = e.cause as typeof e
  ) {
    if (e.name === "RpcRequestError" || (typeof e.code === "number" && e.code < 0)) return true;
  }
  return false;
}

function errorText(err: unknown): string {
  const e = err as { details?: string; shortMessage?: string; message?: string };
  return (e.details || e.shortMessage || e.message || "rejected").split("\n")[0]?.slice(0, 300) ?? "rejected";
}

const RECEIPT_TIMEOUT_MS = 60_000;
const NOT_SENT_AFTER_REFUSAL = "not sent: an earlier transaction of its batch was refused";

export class TransactionSender {
  readonly #db: Db;
  readonly #network: Network;
  readonly #log: FastifyBaseLogger;
  readonly #walletQueue = new KeyedQueue();

  constructor(db: Db, network: Network, log: FastifyBaseLogger) {
    this.#db = db;
    this.#network = network;
    this.#log = log;
  }

  /** Signs, records, broadcasts and waits for the receipts of `transfers`, in order. */
  async send(privateKey: Hex, from: Hex, transfers: OutgoingTransfer[]): Promise<SentTransfer[]> {
    return this.receipts(await this.submit(privateKey, from, transfers));
  }

  /**
   * Signs, records and broadcasts `transfers` (consecutive nonces), and resolves once the node
   * has them, without waiting for their receipts: the wallet's next transactions can be signed
   * while these are mined (a nonce pipeline). `receipts` then waits for the outcomes.
   */
  async submit(privateKey: Hex, from: Hex, transfers: OutgoingTransfer[]): Promise<SubmittedTransfer[]> {
    return this.#walletQueue.run(from.toLowerCase(), async () => {
      const recorded = await this.#signAndRecord(privateKey, from, transfers);
      const submitted: SubmittedTransfer[] = [];
      for (const tx of recorded) {
        const sent = {
          txHash: tx.hash,
          nonce: tx.nonce,
          token: tx.token,
          purpose: tx.purpose,
          refusal: null,
        };
        try {
          await this.#network.broadcast(tx.raw);
          submitted.push(sent);
        } catch (err) {
          // Some nodes answer an error for a transaction they still mine (a revert under
          // automine); only the receipt tells. No receipt after an answer from the node means it
          // refused the bytes: never rebroadcast those, and free their nonce before the wallet's
          // next transaction is signed. No answer at all (network) stays open for reconcile.
          const status = await this.#network.waitForReceipt(tx.hash, 2_000).catch(() => "not_found" as const);
          if (status === "not_found" && isNodeAnswer(err)) {
            const refusal = errorText(err);
            await this.#settle(tx.hash, "rejected", `rejected by the node: ${refusal}`);
            submitted.push({ ...sent, refusal });
            // Later transactions of this batch were signed with the nonces after it.
            for (const later of recorded.slice(recorded.indexOf(tx) + 1)) {
              await this.#settle(later.hash, "rejected", NOT_SENT_AFTER_REFUSAL);
              submitted.push({
                txHash: later.hash,
                nonce: later.nonce,
                token: later.token,
                purpose: later.purpose,
                refusal: NOT_SENT_AFTER_REFUSAL,
              });
            }
            break;
          }
          if (status === "not_found")
            this.#log.warn(
              { err, txHash: tx.hash },
              "broadcast failed; the transaction stays open for reconcile",
            );
          submitted.push(sent);
        }
      }
      return submitted;
    });
  }

  /** Waits for the receipts of submitted transfers and records their outcome. */
  async receipts(submitted: SubmittedTransfer[]): Promise<SentTransfer[]> {
    const results: SentTransfer[] = [];
    for (const tx of submitted) {
      if (tx.refusal !== null) {
        results.push({
          txHash: tx.txHash,
          status: "reverted",
          token: tx.token,
          purpose: tx.purpose,
          error: tx.refusal,
        });
        continue;
      }
      const status = await this.#network.waitForReceipt(tx.txHash, RECEIPT_TIMEOUT_MS);
      await this.#settle(tx.txHash, status);
      results.push({ txHash: tx.txHash, status, token: tx.token, purpose: tx.purpose, error: null });
    }
    return results;
  }

  /**
   * Brings every recorded-but-unsettled transaction of this network to a final state: mined ones
   * are marked, missing ones are rebroadcast (same signed bytes, same hash) and awaited.
   */
  async reconcile(): Promise<void> {
    const open = await this.#db
      .selectFrom("chain_transactions")
      .select(["tx_hash", "raw_tx", "from_address"])
      .where("environment", "=", this.#network.environment)
      .where("status", "=", "signed")
      .orderBy("from_address")
      .orderBy("nonce")
      .execute();
    for (const tx of open) {
      await this.#walletQueue.run(tx.from_address.toLowerCase(), async () => {
        let status = await this.#network.receipt(tx.tx_hash as Hex);
        if (status === "not_found") {
          this.#log.warn({ txHash: tx.tx_hash }, "rebroadcasting a recorded transaction");
          await this.#network.broadcast(tx.raw_tx as Hex);
          status = await this.#network.waitForReceipt(tx.tx_hash as Hex, RECEIPT_TIMEOUT_MS);
        }
        await this.#settle(tx.tx_hash as Hex, status);
      });
    }
  }

  async #signAndRecord(privateKey: Hex, from: Hex, transfers: OutgoingTransfer[]) {
    // The node's count is read while the lock is taken: transactions of other instances are in
    // chain_transactions (recorded before broadcast), which is read under the lock.
    const pendingNonce = this.#network.pendingNonce(from);
    pendingNonce.catch(() => undefined); // awaited below; not an unhandled rejection meanwhile
    return this.#db.transaction().execute(async (trx) => {
      await sql`SELECT pg_advisory_xact_lock(hashtext(${`wallet:${this.#network.environment}:${from.toLowerCase()}`}))`.execute(
        trx,
      );
      const last = await trx
        .selectFrom("chain_transactions")
        .select((eb) => eb.fn.max("nonce").as("nonce"))
        .where("environment", "=", this.#network.environment)
        .where("from_address", "=", from)
        .where("status", "<>", "rejected")
        .executeTakeFirst();
      const recordedNext = last?.nonce === null || last?.nonce === undefined ? 0 : Number(last.nonce) + 1;
      let nonce = Math.max(recordedNext, await pendingNonce);
      const recorded = [];
      for (const transfer of transfers) {
        const signed = await this.#network.signTransfer(privateKey, transfer, nonce);
        await trx
          .insertInto("chain_transactions")
          .values({
            environment: this.#network.environment,
            from_address: from,
            nonce: String(nonce),
            purpose: transfer.purpose,
            payment_id: transfer.paymentId ?? null,
            payout_id: transfer.payoutId ?? null,
            to_address: transfer.to,
            token_symbol: transfer.token,
            amount: transfer.amount.toString(),
            raw_tx: signed.raw,
            tx_hash: signed.hash,
          })
          .execute();
        recorded.push({ ...signed, token: transfer.token, purpose: transfer.purpose });
        nonce++;
      }
      return recorded;
    });
  }

  async #settle(
    txHash: Hex,
    status: ReceiptStatus | "rejected",
    error = "transaction reverted",
  ): Promise<void> {
    if (status === "not_found") return; // still open: the next reconcile looks again
    await this.#db
      .updateTable("chain_transactions")
      .set({
        status: status === "success" ? "mined" : status === "rejected" ? "rejected" : "failed",
        error: status === "success" ? null : error,
        mined_at: new Date(),
      })
      .where("tx_hash", "=", txHash)
      .where("status", "=", "signed")
      .execute();
  }
}
