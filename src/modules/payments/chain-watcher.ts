import type { FastifyBaseLogger } from "fastify";
import type { Hex, IncomingTransfer, Network } from "../../chain/network.ts";
import type { Environment } from "../../config.ts";
import { formatAmount, TOKEN_DECIMALS, type TokenSymbol } from "../../domain/money.ts";
import type { Db } from "../../platform/db/database.ts";
import type { PaymentRow } from "../../platform/db/schema.ts";
import { recordEvents } from "../webhooks/outbox.ts";
import * as chainRepo from "./chain-repo.ts";
import { applyTransition } from "./transitions.ts";

// Follows an environment's chain: scans new blocks for transfers to the service's receiving
// addresses, matches them to pending payments (D5) → detected, and counts confirmations →
// confirmed. The cursor and the matches of a block range commit together, so a restart resumes
// exactly where it stopped. A reorg is noticed by the cursor's block hash; detections whose
// transaction left the canonical chain go back to pending.

const MAX_BLOCKS_PER_SCAN = 200;
const MAX_BLOCKS_PER_TICK = 5_000n;
/** How far to step back when the chain under the cursor changed. */
const REORG_REWIND = 64n;
const UNMATCHED_REASON = "no pending payment for this token and amount at this address";

export class ChainWatcher {
  readonly #db: Db;
  readonly #network: Network;
  readonly #log: FastifyBaseLogger;
  readonly #now: () => Date;
  readonly #environment: Environment;
  readonly #ignoredSenders: Set<string>;

  /** `ignoredSenders`: the service's own funding accounts (gas top-ups are not payments). */
  constructor(
    db: Db,
    network: Network,
    log: FastifyBaseLogger,
    now: () => Date,
    ignoredSenders: readonly string[] = [],
  ) {
    this.#ignoredSenders = new Set(ignoredSenders.map((a) => a.toLowerCase()));
    this.#db = db;
    this.#network = network;
    this.#log = log;
    this.#now = now;
    this.#environment = network.environment;
  }

  /** One pass: scan what is new, then move detected payments on or back. */
  async tick(): Promise<void> {
    const head = await this.#network.head();
    await this.#scan(head.number);
    await this.#confirm(head.number);
  }

  async #scan(headNumber: bigint): Promise<void> {
    let cursor = await chainRepo.readCursor(this.#db, this.#environment);
    if (!cursor) {
      // First start: watch from the current head on (older history was before this service).
      const start = headNumber > 0n ? headNumber - 1n : 0n;
      const block = await this.#network.block(start);
      if (!block) return;
      await chainRepo.writeCursor(this.#db, this.#environment, block.number, block.hash);
      cursor = { block: block.number, hash: block.hash };
    }
    const atCursor = cursor.block <= headNumber ? await this.#network.block(cursor.block) : null;
    if (!atCursor || atCursor.hash !== cursor.hash) {
      const back = (cursor.block < headNumber ? cursor.block : headNumber) - REORG_REWIND;
      const rewound = await this.#network.block(back > 0n ? back : 0n);
      if (!rewound) return;
      this.#log.warn(
        { environment: this.#environment, from: cursor.block, to: rewound.number },
        "chain reorganised: rescanning",
      );
      await chainRepo.writeCursor(this.#db, this.#environment, rewound.number, rewound.hash);
      cursor = { block: rewound.number, hash: rewound.hash };
    }

    const wallets = await chainRepo.receivingAddresses(this.#db);
    const owner = new Map(wallets.map((w) => [w.address.toLowerCase(), w.workspaceId]));
    const agentWallets = await chainRepo.agentWalletAddresses(this.#db, this.#environment);
    const agentWallet = new Map(agentWallets.map((w) => [w.address.toLowerCase(), w]));
    const addresses = [...wallets, ...agentWallets].map((w) => w.address as Hex);
    const last =
      headNumber < cursor.block + MAX_BLOCKS_PER_TICK ? headNumber : cursor.block + MAX_BLOCKS_PER_TICK;
    let from = cursor.block + 1n;
    while (from <= last) {
      const to =
        from + BigInt(MAX_BLOCKS_PER_SCAN) - 1n < last ? from + BigInt(MAX_BLOCKS_PER_SCAN) - 1n : last;
      const [transfers, toBlock] = await Promise.all([
        this.#network.incomingTransfers(from, to, addresses),
        this.#network.block(to),
      ]);
      if (!toBlock) return;
      transfers.sort((a, b) =>
        a.blockNumber === b.blockNumber ? a.logIndex - b.logIndex : a.blockNumber < b.blockNumber ? -1 : 1,
      );
      await this.#db.transaction().execute(async (trx) => {
        for (const transfer of transfers) {
          const wallet = agentWallet.get(transfer.to.toLowerCase());
          if (wallet) await this.#walletBalanceChanged(trx, wallet, transfer);
          else await this.#apply(trx, transfer, owner.get(transfer.to.toLowerCase()) ?? null);
        }
        await chainRepo.writeCursor(trx, this.#environment, toBlock.number, toBlock.hash);
      });
      from = to + 1n;
    }
  }

  async #apply(trx: Db, transfer: IncomingTransfer, workspaceId: string | null): Promise<void> {
    if (this.#ignoredSenders.has(transfer.from.toLowerCase())) return;
    if (await chainRepo.transferAlreadyRecorded(trx, this.#environment, transfer)) return;
    const now = this.#now();
    const payment = await chainRepo.lockMatchingPayment(trx, this.#environment, transfer, now);
    if (!payment) {
      await chainRepo.recordUnmatched(trx, this.#environment, workspaceId, transfer, UNMATCHED_REASON);
      this.#log.info(
        { txHash: transfer.txHash, token: transfer.token, to: transfer.to },
        "unmatched transfer recorded",
      );
      return;
    }
    await applyTransition(trx, payment, "transfer_detected", now, {
      detected_tx_hash: transfer.txHash,
      detected_log_index: transfer.logIndex,
      detected_block: transfer.blockNumber.toString(),
      detected_block_hash: transfer.blockHash,
      payer_address: transfer.from,
      detected_at: now,
    });
  }

  /** A transfer into an agent or user wallet: wallet.balance.updated with the balances around it. */
  async #walletBalanceChanged(
    trx: Db,
    wallet: { id: string; address: string; workspaceId: string; currencies: string[] },
    transfer: IncomingTransfer,
  ): Promise<void> {
    if (!wallet.currencies.includes(transfer.token)) return;
    // The cursor commits with this event, so a block is reported once (a reorg rescan may repeat it:
    // deliveries are at least once anyway).
    const balance = await this.#network.balance(wallet.address as Hex, transfer.token);
    const decimals = TOKEN_DECIMALS[transfer.token as TokenSymbol];
    await recordEvents(trx, [
      {
        workspaceId: wallet.workspaceId,
        environment: this.#environment,
        type: "wallet.balance.updated",
        payload: {
          walletId: wallet.id,
          address: wallet.address,
          currency: transfer.token,
          balance: formatAmount(balance, decimals),
          previousBalance: formatAmount(balance - transfer.amount, decimals),
          updatedAt: this.#now().toISOString(),
        },
      },
    ]);
  }

  async #confirm(headNumber: bigint): Promise<void> {
    const detected = await chainRepo.paymentsInStatus(this.#db, this.#environment, "detected", 500);
    for (const payment of detected) {
      const included = await this.#network.transactionBlock(payment.detected_tx_hash as Hex);
      await this.#db.transaction().execute(async (trx) => {
        const now = this.#now();
        if (!included) {
          await this.#revert(trx, payment, now);
          return;
        }
        const confirmations = headNumber - included.number + 1n;
        if (confirmations >= BigInt(this.#network.confirmations)) {
          await applyTransition(trx, payment, "confirmations_met", now, {
            detected_block: included.number.toString(),
            detected_block_hash: included.hash,
            confirmed_at: now,
          });
        } else if (included.hash !== payment.detected_block_hash) {
          await trx
            .updateTable("payments")
            .set({ detected_block: included.number.toString(), detected_block_hash: included.hash })
            .where("id", "=", payment.id)
            .execute();
        }
      });
    }
  }

  /** The detecting transaction left the chain: wait for funds again, forget the detection. */
  async #revert(trx: Db, payment: PaymentRow, now: Date): Promise<void> {
    this.#log.warn(
      { paymentId: payment.id, txHash: payment.detected_tx_hash },
      "detection reverted by a reorg",
    );
    await applyTransition(trx, payment, "detection_reverted", now, {
      detected_tx_hash: null,
      detected_log_index: null,
      detected_block: null,
      detected_block_hash: null,
      payer_address: null,
      detected_at: null,
    });
  }
}
