// payments/incoming: money arriving on chain. The watcher (this file) matches each transfer to a
// pending payment or holds it for ../inbox/ (chain-repo.ts), claims it once (claims-repo.ts), and
// undoes what a reorganisation took back (reorg-repo.ts); status changes go through ../transitions.ts.

import { setTimeout as sleep } from "node:timers/promises";
import type { FastifyBaseLogger } from "fastify";
import type { BlockRef, Hex, IncomingTransfer, Network } from "../../../chain/network.ts";
import { confirmationsAt } from "../../../chain/network.ts";
import { inChainOrder, transferOrdinals } from "../../../chain/transfer-order.ts";
import type { Environment } from "../../../config.ts";
import { formatAmount, TOKEN_DECIMALS, type TokenSymbol } from "../../../domain/money.ts";
import type { Db } from "../../../platform/db/database.ts";
import type { PaymentRow } from "../../../platform/db/schema.ts";
import type { Metrics } from "../../../platform/metrics/metrics.ts";
import { watchedWallets } from "../../wallets/service.ts";
import { recordEvents } from "../../webhooks/outbox.ts";
import { receivingWallets } from "../../workspaces/service.ts";
import { UNMATCHED_REASON } from "../inbox/unmatched-repo.ts";
import { batchTransition, emitPaymentEvents } from "../transitions.ts";
import * as chainRepo from "./chain-repo.ts";
import { InboxCheck } from "./inbox-check.ts";
import * as reorgRepo from "./reorg-repo.ts";

// Follows an environment's chain: scans new blocks for transfers to the service's receiving
// addresses, matches them to pending payments (D5) → detected, and counts confirmations →
// confirmed. Both are set-based: a block range's transfers are claimed, matched and recorded by one
// statement (chainRepo.matchTransfers), a tick's confirmations by a few. The cursor and the
// matches of a block range commit together, so a restart resumes exactly where it stopped. A reorg
// is noticed by the cursor's block hash; detections whose transaction left the canonical chain go
// back to pending.

const MAX_BLOCKS_PER_SCAN = 200;
const MAX_BLOCKS_PER_TICK = 5_000n;
/** How far to step back when the chain under the cursor changed. */
const REORG_REWIND = 64n;
/** Detected payments checked against the chain per tick. */
const CONFIRM_BATCH = 500;
/**
 * Detection latency. The watcher runs in a periodic job that ticks start to start every polling
 * interval (1 s by default), so a block seen only when a tick starts could wait a whole interval
 * before its scan even begins. A tick therefore keeps following the head for most of the interval:
 * it reads the head (one cheap call) every HEAD_POLL_MS and scans at once when it moved. With the
 * default interval the head is read at 0, 250, 500 and 750 ms of each tick and at the next tick's
 * start, so a transfer is detected within about 250 ms plus one scan.
 * The watcher is given the job's interval and stops reading FOLLOW_MARGIN_MS before the next
 * tick is due, so the next tick keeps its time as long as the rest of the tick (the last scan,
 * confirmations, then the job's settlement) fits in what is left. A short interval (tests poll
 * every 100 ms) leaves no room for a head read: one scan per tick. MAX_FOLLOW_MS keeps a long
 * interval, chosen to save RPC calls, close to one scan per interval.
 */
const HEAD_POLL_MS = 250;
/** Room for the scan a last head read may start; more than the jitter of a job's tick starts. */
const FOLLOW_MARGIN_MS = 100;
const MAX_FOLLOW_MS = 750;

const DETECT = batchTransition("transfer_detected");
const CONFIRM = batchTransition("confirmations_met");
const REVERT = batchTransition("detection_reverted");

/**
 * Transfers of a scan that on-ramp sessions account for (onramp/service.ts): `named` deliveries
 * (`txHash|recipient|token`, lower-case) are the sessions' (claimed as theirs, not payments);
 * `expected` transfers (`recipient|token|amount`) may be a delivery not named yet: they pay no
 * payment (the inbox holds them), and the value names the session, for the log.
 */
export interface Deliveries {
  named: ReadonlySet<string>;
  expected: ReadonlyMap<string, string>;
}

/** Why a transfer from one of its own workspace's wallets is in the inbox: it never pays a payment. */
export const OWN_WALLET_REASON = "sent from a wallet of this workspace: never a payment";

/** Why a transfer that may be an on-ramp session's delivery is in the inbox (the session named). */
export const onrampHoldReason = (sessionId: string) =>
  `may be the delivery of on-ramp session ${sessionId}: held from payments`;

const NO_DELIVERIES: Deliveries = { named: new Set(), expected: new Map() };

export class ChainWatcher {
  readonly #db: Db;
  readonly #network: Network;
  readonly #log: FastifyBaseLogger;
  readonly #now: () => Date;
  readonly #environment: Environment;
  readonly #ignoredSenders: Set<string>;
  readonly #inbox = new InboxCheck();
  readonly #deliveries: ((transfers: readonly IncomingTransfer[]) => Promise<Deliveries>) | undefined;
  readonly #ownTransactions:
    | ((transfers: readonly IncomingTransfer[]) => Promise<ReadonlySet<string>>)
    | undefined;
  /** How long a tick keeps following the head (see HEAD_POLL_MS). */
  readonly #followMs: number;
  readonly #metrics: Metrics | undefined;

  /**
   * `ignoredSenders`: the service's own accounts whose transfers are not payments (the gas
   * funder's top-ups). `ownTransactions`: which of a scan's transfers the service's own recorded
   * transactions made (what a swap bought reaches its wallet from the public router: only the
   * service's own swaps are skipped, by transaction, never every transfer from the router).
   * `deliveries`: which of a scan's transfers on-ramp sessions account for (Deliveries).
   * `pollIntervalMs`: the interval of the job that ticks this watcher; without it a tick scans
   * once and does not follow the head.
   */
  constructor(
    db: Db,
    network: Network,
    log: FastifyBaseLogger,
    now: () => Date,
    options: {
      ignoredSenders?: readonly string[];
      ownTransactions?: (transfers: readonly IncomingTransfer[]) => Promise<ReadonlySet<string>>;
      deliveries?: (transfers: readonly IncomingTransfer[]) => Promise<Deliveries>;
      pollIntervalMs?: number;
      metrics?: Metrics;
    } = {},
  ) {
    this.#deliveries = options.deliveries;
    this.#ownTransactions = options.ownTransactions;
    this.#metrics = options.metrics;
    this.#ignoredSenders = new Set((options.ignoredSenders ?? []).map((a) => a.toLowerCase()));
    this.#followMs = followTime(options.pollIntervalMs);
    this.#db = db;
    this.#network = network;
    this.#log = log;
    this.#now = now;
    this.#environment = network.environment;
  }

  /**
   * Scans what is new, again whenever the head moves while the tick follows it (HEAD_POLL_MS),
   * then checks the detections and the inbox's unconfirmed transfers against the chain once (each
   * costs a receipt call), right before the job settles what this confirmed.
   */
  async tick(): Promise<void> {
    const started = performance.now();
    let seen = await this.#network.head();
    let cursor = await this.#scan(seen.number);
    // Head reads at fixed offsets from the tick's start, so they stay HEAD_POLL_MS apart however
    // long a scan took (a slot a scan ran over is skipped).
    for (let at = started + HEAD_POLL_MS; at <= started + this.#followMs; at += HEAD_POLL_MS) {
      const wait = at - performance.now();
      if (wait < 0) continue;
      await sleep(wait);
      const head = await this.#network.head();
      if (head.hash === seen.hash) continue;
      seen = head;
      cursor = (await this.#scan(head.number)) ?? cursor;
    }
    await this.#confirm(seen.number);
    await this.#inbox.run(this.#db, this.#network, this.#log, seen, this.#now());
    if (cursor !== undefined) this.#metrics?.chainWatcherTicked(this.#network, seen.number, cursor);
  }

  /** Processes the blocks up to `headNumber`; the block the cursor is at afterwards. */
  async #scan(headNumber: bigint): Promise<bigint | undefined> {
    const [stored, wallets, agentWallets] = await Promise.all([
      chainRepo.readCursor(this.#db, this.#network),
      receivingWallets(this.#db),
      watchedWallets(this.#db, this.#environment),
    ]);
    let cursor = stored;
    if (!cursor) {
      // First start: watch from the current head on (older history was before this service).
      const start = headNumber > 0n ? headNumber - 1n : 0n;
      const block = await this.#network.block(start);
      if (!block) return;
      await chainRepo.writeCursor(this.#db, this.#network, block.number, block.hash);
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
      await chainRepo.writeCursor(this.#db, this.#network, rewound.number, rewound.hash);
      cursor = { block: rewound.number, hash: rewound.hash };
    }

    const owner = new Map(wallets.map((w) => [w.address.toLowerCase(), w.workspaceId]));
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
      const forWallets: Array<[AgentWallet, IncomingTransfer]> = [];
      const forPayments: Array<IncomingTransfer & { ordinal: number }> = [];
      // Ordinals over every transfer of the range, before any is set aside: they identify transfers.
      const ordered = inChainOrder(transfers);
      const ordinals = transferOrdinals(ordered);
      ordered.forEach((transfer, i) => {
        const wallet = agentWallet.get(transfer.to.toLowerCase());
        if (wallet) forWallets.push([wallet, transfer]);
        else if (!this.#ignoredSenders.has(transfer.from.toLowerCase()))
          forPayments.push({ ...transfer, ordinal: ordinals[i] ?? 0 });
      });
      const observed = await this.#observe(forPayments, (address) => owner.get(address) ?? null);
      const detected = await this.#db.transaction().execute(async (trx) => {
        for (const [wallet, transfer] of forWallets) await this.#walletBalanceChanged(trx, wallet, transfer);
        const detected = await this.#detect(trx, observed);
        await chainRepo.writeCursor(trx, this.#network, toBlock.number, toBlock.hash);
        return detected;
      });
      this.#metrics?.paymentsMoved(detected, DETECT.to);
      cursor = { block: toBlock.number, hash: toBlock.hash };
      from = to + 1n;
    }
    return cursor.block;
  }

  /**
   * What each transfer to a receiving wallet is to the watcher: skipped (the service's own swap),
   * an on-ramp session's named delivery, held from payments (sent from its own workspace's wallet,
   * or possibly a session's delivery not named yet: each logged), or free to pay a payment.
   * `ownerOf`: the workspace whose receiving wallet (EOA or smart wallet) a lower-case address is,
   * null for none. (An agent wallet's transfer may pay its workspace: an agent is a payer.)
   */
  async #observe(
    transfers: ReadonlyArray<IncomingTransfer & { ordinal: number }>,
    ownerOf: (address: string) => string | null,
  ): Promise<chainRepo.ObservedTransfer[]> {
    if (transfers.length === 0) return [];
    const [deliveries, own] = await Promise.all([
      this.#deliveries ? this.#deliveries(transfers) : NO_DELIVERIES,
      this.#ownTransactions ? this.#ownTransactions(transfers) : new Set<string>(),
    ]);
    const observed: chainRepo.ObservedTransfer[] = [];
    for (const transfer of transfers) {
      const txHash = transfer.txHash.toLowerCase();
      if (own.has(txHash)) continue;
      const to = transfer.to.toLowerCase();
      const workspaceId = ownerOf(to);
      const seen = { ...transfer, workspaceId };
      if (deliveries.named.has(`${txHash}|${to}|${transfer.token}`)) {
        observed.push({ ...seen, onramp: true });
        continue;
      }
      if (workspaceId !== null && ownerOf(transfer.from.toLowerCase()) === workspaceId) {
        observed.push({ ...seen, heldBecause: OWN_WALLET_REASON });
        continue;
      }
      const session = deliveries.expected.get(`${to}|${transfer.token}|${transfer.amount}`);
      if (session !== undefined) {
        this.#log.info(
          { txHash, token: transfer.token, to, amount: transfer.amount.toString(), onrampId: session },
          "transfer held from payments: it may be an on-ramp session's delivery",
        );
        observed.push({ ...seen, heldBecause: onrampHoldReason(session) });
        continue;
      }
      observed.push(seen);
    }
    return observed;
  }

  /** Claims and matches a block range's transfers; records the detections' events with them. */
  async #detect(trx: Db, transfers: chainRepo.ObservedTransfer[]): Promise<PaymentRow[]> {
    const results = await chainRepo.matchTransfers(
      trx,
      this.#network,
      transfers,
      DETECT,
      this.#now(),
      UNMATCHED_REASON,
    );
    const detected = results.flatMap((r) => (r.payment ? [r.payment] : []));
    if (DETECT.event) await emitPaymentEvents(trx, detected, DETECT.event);
    for (const { index, payment } of results) {
      if (payment) continue;
      const transfer = transfers[index] as chainRepo.ObservedTransfer;
      this.#log.info(
        { txHash: transfer.txHash, token: transfer.token, to: transfer.to },
        "unmatched transfer recorded",
      );
    }
    return detected;
  }

  /** A transfer into an agent or user wallet: wallet.balance.updated with the balances around it. */
  async #walletBalanceChanged(trx: Db, wallet: AgentWallet, transfer: IncomingTransfer): Promise<void> {
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
          network: this.#network.id,
          currency: transfer.token,
          balance: formatAmount(balance, decimals),
          previousBalance: formatAmount(balance - transfer.amount, decimals),
          updatedAt: this.#now().toISOString(),
        },
      },
    ]);
  }

  /** Checks detected payments against the chain: confirmed, moved to another block, or reverted. */
  async #confirm(headNumber: bigint): Promise<void> {
    const detected = await chainRepo.paymentsInStatus(this.#db, this.#network, CONFIRM.from, CONFIRM_BATCH);
    if (detected.length === 0) return;
    // One batched round trip for all receipts (the client batches concurrent calls).
    const included = await Promise.all(
      detected.map((p) => this.#network.transactionBlock(p.detected_tx_hash as Hex)),
    );
    const plan = planConfirmations(detected, included, headNumber, this.#network.confirmations);
    if (plan.confirm.length + plan.move.length + plan.revert.length === 0) return;
    const { confirmed, reverted } = await this.#db.transaction().execute(async (trx) => {
      const now = this.#now();
      const confirmed = await chainRepo.confirmDetections(trx, plan.confirm, CONFIRM, now);
      if (CONFIRM.event) await emitPaymentEvents(trx, confirmed, CONFIRM.event);
      await chainRepo.moveDetections(trx, plan.move, CONFIRM);
      const { payments: reverted, dropped } = await reorgRepo.revertDetections(
        trx,
        this.#network,
        plan.revert,
        REVERT,
        now,
      );
      if (REVERT.event) await emitPaymentEvents(trx, reverted, REVERT.event);
      const revertedTx = new Map(plan.revert.map((d) => [d.paymentId, d.txHash]));
      for (const row of reverted)
        this.#log.warn(
          { paymentId: row.id, txHash: revertedTx.get(row.id) },
          "detection reverted by a reorg",
        );
      for (const row of dropped)
        this.#log.warn(
          { unmatchedId: row.id, txHash: row.tx_hash },
          "attached transfer dropped by a reorg: its payment waits again, the transfer is dropped until mined again",
        );
      return { confirmed, reverted };
    });
    this.#metrics?.paymentsMoved(confirmed, CONFIRM.to);
    this.#metrics?.paymentsMoved(reverted, REVERT.to);
  }
}

type AgentWallet = Awaited<ReturnType<typeof watchedWallets>>[number];

/** How long a tick of a job ticking every `intervalMs` follows the head. */
export function followTime(intervalMs: number | undefined): number {
  if (intervalMs === undefined) return 0;
  return Math.max(0, Math.min(MAX_FOLLOW_MS, intervalMs - FOLLOW_MARGIN_MS));
}

export interface ConfirmationPlan {
  /** Enough confirmations: → confirmed, at the block the transfer is in now. */
  confirm: chainRepo.CheckedDetection[];
  /** Still waiting, but the transfer is now in another block (a reorg re-included it). */
  move: chainRepo.CheckedDetection[];
  /** The transfer is no longer in the chain: → pending again. */
  revert: reorgRepo.RevertedDetection[];
}

/**
 * What the chain says about each detected payment: `included[i]` is the block now holding the
 * transaction of `detected[i]` (null: in no block); a transfer in block b has head − b + 1
 * confirmations.
 */
export function planConfirmations(
  detected: readonly PaymentRow[],
  included: ReadonlyArray<BlockRef | null>,
  headNumber: bigint,
  required: number,
): ConfirmationPlan {
  const plan: ConfirmationPlan = { confirm: [], move: [], revert: [] };
  const needed = BigInt(required);
  detected.forEach((payment, i) => {
    if (payment.detected_tx_hash === null || payment.detected_log_index === null) return;
    const detection = {
      paymentId: payment.id,
      txHash: payment.detected_tx_hash,
      logIndex: payment.detected_log_index,
    };
    const block = included[i];
    if (!block) plan.revert.push({ ...detection, gross: BigInt(payment.gross_amount) });
    else if (confirmationsAt(headNumber, block.number) >= needed) plan.confirm.push({ ...detection, block });
    else if (block.hash !== payment.detected_block_hash) plan.move.push({ ...detection, block });
  });
  return plan;
}
