import type { FastifyBaseLogger } from "fastify";
import { sql } from "kysely";
import { KeyedQueue } from "../platform/concurrency/keyed-queue.ts";
import type { Db } from "../platform/db/database.ts";
import type { ChainToken, Hex, Network, ReceiptStatus, TransferRequest } from "./network.ts";

// Nonce-ordered sending from service-held wallets. Every transaction is signed with an explicit
// nonce and written to chain_transactions BEFORE it is broadcast, so a crash can neither lose it
// nor send a second one: on restart, `reconcile` finds it by hash and rebroadcasts the same bytes.
// Nonces of one wallet are assigned under a per-wallet advisory lock (all instances), and in this
// process one wallet sends one batch at a time.

export interface OutgoingTransfer extends TransferRequest {
  purpose: string;
  paymentId?: string | null;
  payoutId?: string | null;
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
    return this.#walletQueue.run(from.toLowerCase(), async () => {
      const recorded = await this.#signAndRecord(privateKey, from, transfers);
      const rejected = new Map<Hex, string>();
      for (const tx of recorded) {
        try {
          await this.#network.broadcast(tx.raw);
        } catch (err) {
          // Some nodes answer an error for a transaction they still mine (a revert under
          // automine); only the receipt tells. No receipt after an answer from the node means it
          // refused the bytes: never rebroadcast those. No answer at all (network) stays open.
          const status = await this.#network.waitForReceipt(tx.hash, 2_000).catch(() => "not_found" as const);
          if (status !== "not_found") continue;
          if (isNodeAnswer(err)) rejected.set(tx.hash, errorText(err));
          else
            this.#log.warn(
              { err, txHash: tx.hash },
              "broadcast failed; the transaction stays open for reconcile",
            );
        }
      }
      const results: SentTransfer[] = [];
      for (const tx of recorded) {
        const refusal = rejected.get(tx.hash);
        if (refusal !== undefined) {
          await this.#settle(tx.hash, "reverted", `rejected by the node: ${refusal}`);
          results.push({
            txHash: tx.hash,
            status: "reverted",
            token: tx.token,
            purpose: tx.purpose,
            error: refusal,
          });
          continue;
        }
        const status = await this.#network.waitForReceipt(tx.hash, RECEIPT_TIMEOUT_MS);
        await this.#settle(tx.hash, status);
        results.push({ txHash: tx.hash, status, token: tx.token, purpose: tx.purpose, error: null });
      }
      return results;
    });
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
    return this.#db.transaction().execute(async (trx) => {
      await sql`SELECT pg_advisory_xact_lock(hashtext(${`wallet:${this.#network.environment}:${from.toLowerCase()}`}))`.execute(
        trx,
      );
      const last = await trx
        .selectFrom("chain_transactions")
        .select((eb) => eb.fn.max("nonce").as("nonce"))
        .where("environment", "=", this.#network.environment)
        .where("from_address", "=", from)
        .executeTakeFirst();
      const recordedNext = last?.nonce === null || last?.nonce === undefined ? 0 : Number(last.nonce) + 1;
      let nonce = Math.max(recordedNext, await this.#network.pendingNonce(from));
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

  async #settle(txHash: Hex, status: ReceiptStatus, error = "transaction reverted"): Promise<void> {
    if (status === "not_found") return; // still open: the next reconcile looks again
    await this.#db
      .updateTable("chain_transactions")
      .set({
        status: status === "success" ? "mined" : "failed",
        error: status === "reverted" ? error : null,
        mined_at: new Date(),
      })
      .where("tx_hash", "=", txHash)
      .where("status", "=", "signed")
      .execute();
  }
}
