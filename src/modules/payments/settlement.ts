import type { FastifyBaseLogger } from "fastify";
import type { PreparedOperation, SmartAccounts } from "../../chain/evm/smart-accounts.ts";
import type { ChainToken, Hex, Network } from "../../chain/network.ts";
import type { TransactionSender } from "../../chain/transaction-sender.ts";
import type { Db } from "../../platform/db/database.ts";
import type { PaymentRow } from "../../platform/db/schema.ts";
import { LeaseLost } from "../../platform/jobs/periodic-job.ts";
import type { Metrics } from "../../platform/metrics/metrics.ts";
import type { WorkspacesService } from "../workspaces/service.ts";
import * as chainRepo from "./chain-repo.ts";
import * as settlementRepo from "./settlement-repo.ts";
import { applyTransition } from "./transitions.ts";

// Settles confirmed payments from the receiving wallet: net to the merchant, fee to the treasury,
// both recorded before broadcast (TransactionSender). `forwarded` only once both are mined with
// success receipts (D13); a failure is `failed` with the reason. A payment whose transfers were
// already recorded (a restart mid-settlement) is finished from those records, never sent again.
// Recording is fenced: the payment must still be confirmed with nothing recorded for it, and this
// worker must still hold its job's lease, all checked under the payment's row lock in the
// transaction that records the transfers; and a payment's legs are unique in the schema. So a
// worker that was paused past its lease, or two workers at once, can never settle one twice.

const SETTLE_PER_TICK = 50;

/** Throws when the caller's transaction may no longer record a send (the job's lease is gone). */
export type Fence = (trx: Db) => Promise<void>;

export interface SettlementOptions {
  /** Funds a receiving wallet with gas on demand (false when it cannot). */
  topUp?: (address: Hex, neededWei: bigint) => Promise<boolean>;
  smartAccounts?: SmartAccounts | undefined;
  /** Throws in a transaction once this worker may no longer send (its job's lease is gone). */
  fence?: Fence;
  metrics?: Metrics;
}

/** Nothing to record: another worker settled the payment, or it moved on meanwhile. */
class SettlementNotDue extends Error {
  override name = "SettlementNotDue";
}

export class Settlement {
  readonly #db: Db;
  readonly #network: Network;
  readonly #sender: TransactionSender;
  readonly #workspaces: WorkspacesService;
  readonly #log: FastifyBaseLogger;
  readonly #now: () => Date;
  readonly #topUp: (address: Hex, neededWei: bigint) => Promise<boolean>;
  readonly #smartAccounts: SmartAccounts | undefined;
  readonly #fence: Fence;
  readonly #metrics: Metrics | undefined;

  constructor(
    db: Db,
    network: Network,
    sender: TransactionSender,
    workspaces: WorkspacesService,
    log: FastifyBaseLogger,
    now: () => Date,
    options: SettlementOptions = {},
  ) {
    this.#fence = options.fence ?? (async () => {});
    this.#smartAccounts = options.smartAccounts;
    this.#topUp = options.topUp ?? (async () => false);
    this.#metrics = options.metrics;
    this.#db = db;
    this.#network = network;
    this.#sender = sender;
    this.#workspaces = workspaces;
    this.#log = log;
    this.#now = now;
  }

  async tick(): Promise<void> {
    await this.#sender.reconcile();
    const confirmed = await chainRepo.paymentsInStatus(
      this.#db,
      this.#network.environment,
      "confirmed",
      SETTLE_PER_TICK,
    );
    // Different wallets settle in parallel; one wallet's settlements queue in the sender.
    await Promise.all(
      confirmed.map((payment) =>
        this.#settle(payment).catch((err: unknown) => {
          if (err instanceof LeaseLost) {
            // Paused past the lease: another instance settles from now on; nothing was sent.
            this.#log.warn(
              { paymentId: payment.id, reason: err.message },
              "settlement left to the new leader",
            );
          } else {
            this.#log.error({ err, paymentId: payment.id }, "settlement attempt failed; retried next tick");
          }
        }),
      ),
    );
  }

  async #settle(payment: PaymentRow): Promise<void> {
    const recorded = await settlementRepo.settlementTransfers(this.#db, payment.id);
    if (recorded.length > 0) {
      if (recorded.some((t) => t.status === "signed")) return; // reconcile() is still waiting on it
      // Reverted, refused and replaced by a cancellation, or refused before migration 016.
      const failed = recorded.find((t) => t.status !== "mined");
      if (failed)
        return this.#fail(
          payment,
          `settlement transaction ${failed.tx_hash} failed: ${failed.error ?? "reverted"}`,
        );
      return this.#forward(payment, recorded);
    }

    const from = payment.receiving_address as Hex;
    const token = payment.token_symbol as "USDC" | "ETH" | "ADAO";
    const gross = BigInt(payment.gross_amount);
    const fee = BigInt(payment.fee_amount);
    const net = BigInt(payment.net_amount);
    const transfers = [
      {
        token,
        to: payment.merchant_wallet as Hex,
        amount: net,
        purpose: "settlement_net",
        paymentId: payment.id,
      },
      ...(fee > 0n
        ? [
            {
              token,
              to: this.#network.treasuryAddress,
              amount: fee,
              purpose: "settlement_fee",
              paymentId: payment.id,
            },
          ]
        : []),
    ];
    if (payment.wallet_type === "smart_wallet") return this.#settleFromSmartWallet(payment, transfers);

    const [tokenBalance, ethBalance, gasPerTransfer] = await Promise.all([
      this.#network.balance(from, token),
      this.#network.balance(from, "ETH"),
      this.#network.transferGasCost(token),
    ]);
    const gasNeeded = gasPerTransfer * BigInt(transfers.length);
    const ethNeeded = gasNeeded + (token === "ETH" ? gross : 0n);
    if (tokenBalance < gross) {
      return this.#failUnsent(payment, `insufficient ${token} balance in the receiving wallet`);
    }
    if (ethBalance < ethNeeded && !(await this.#topUp(from, ethNeeded))) {
      return this.#failUnsent(payment, "insufficient ETH for gas in the receiving wallet");
    }

    const key = await this.#workspaces.signingKey(payment.workspace_id, from);
    let sent: Awaited<ReturnType<TransactionSender["send"]>>;
    try {
      sent = await this.#sender.send(key, from, transfers, {
        together: true,
        guard: async (trx) => {
          await this.#stillDue(trx, payment.id);
        },
      });
    } catch (err) {
      // Nothing recorded means nothing was sent; recorded transactions are reconciled next tick.
      if (err instanceof SettlementNotDue || err instanceof LeaseLost) {
        this.#log.warn({ paymentId: payment.id, reason: err.message }, "settlement not sent");
      } else {
        this.#log.error({ err, paymentId: payment.id }, "settlement send failed");
      }
      return;
    }
    if (sent.some((s) => s.status === "not_found")) return; // still pending: the next tick finishes it
    const failed = sent.find((s) => s.status === "reverted");
    if (failed) {
      return this.#fail(payment, `settlement transaction ${failed.txHash} ${failed.error ?? "reverted"}`);
    }
    return this.#forward(
      payment,
      sent.map((s) => ({ purpose: s.purpose, tx_hash: s.txHash })),
    );
  }

  /**
   * A payment received on the smart wallet settles as ONE user operation (net + fee batched),
   * gas sponsored by the paymaster; the signed operation is recorded on the payment before it is
   * sent, and a restart sends that same operation again.
   */
  async #settleFromSmartWallet(
    payment: PaymentRow,
    transfers: Array<{ token: ChainToken; to: Hex; amount: bigint }>,
  ) {
    if (!this.#smartAccounts)
      return this.#failUnsent(payment, "smart wallets are not configured on this network (no bundler)");
    let prepared: PreparedOperation;
    if (payment.settlement_user_operation && payment.settlement_user_op_hash) {
      prepared = {
        userOpHash: payment.settlement_user_op_hash as Hex,
        serialized: payment.settlement_user_operation,
      };
    } else {
      const from = payment.receiving_address as Hex;
      const token = payment.token_symbol as ChainToken;
      if ((await this.#network.balance(from, token)) < BigInt(payment.gross_amount)) {
        return this.#failUnsent(payment, `insufficient ${token} balance in the smart wallet`);
      }
      const owner = (await this.#workspaces.profile(payment.workspace_id)).eoaAddress as Hex;
      const key = await this.#workspaces.signingKey(payment.workspace_id, owner);
      try {
        // Nobody waits on a settlement: the bundler's own estimate every time, and no second
        // operation to record should the bundler refuse one with reused limits (SmartAccounts.prepare).
        prepared = await this.#smartAccounts.prepare(key, transfers, { estimate: "bundler" });
      } catch (err) {
        return this.#failUnsent(
          payment,
          `bundler or paymaster failure: ${(err as Error).message.split("\n")[0]}`,
        );
      }
      // Recorded only if no operation is recorded yet, by a worker that still holds the lease:
      // a second worker's operation would be a second settlement (another nonce key).
      const recorded = await this.#db.transaction().execute(async (trx) => {
        await this.#fence(trx);
        return settlementRepo.recordSettlementOperation(
          trx,
          payment.id,
          prepared.userOpHash,
          prepared.serialized,
        );
      });
      if (!recorded) return; // another worker recorded one, and sends it
    }
    const resend = Boolean(payment.settlement_user_operation);
    const outcome = await this.#smartAccounts.send(prepared, { resend });
    if (outcome.status === "pending") return; // the next tick sends it again
    if (outcome.status === "reverted") return this.#fail(payment, outcome.error);
    return this.#forward(payment, [
      { purpose: "settlement_net", tx_hash: outcome.txHash },
      { purpose: "settlement_fee", tx_hash: outcome.txHash },
    ]);
  }

  /**
   * The fence of a settlement's record: this worker holds the lease, and the payment, locked, is
   * still confirmed with no settlement transfer recorded.
   */
  async #stillDue(trx: Db, paymentId: string): Promise<PaymentRow> {
    await this.#fence(trx);
    const current = await settlementRepo.lockPayment(trx, paymentId);
    if (current?.status !== "confirmed")
      throw new SettlementNotDue(`payment is ${current?.status ?? "gone"}`);
    const recorded = await settlementRepo.settlementRecorded(trx, paymentId);
    if (recorded) throw new SettlementNotDue("its transfers are already recorded");
    return current;
  }

  async #forward(payment: PaymentRow, txs: Array<{ purpose: string; tx_hash: string }>): Promise<void> {
    const now = this.#now();
    const moved = await this.#db.transaction().execute(async (trx) => {
      const current = await settlementRepo.lockPayment(trx, payment.id);
      if (current?.status !== "confirmed") return [];
      return [
        await applyTransition(trx, current, "settlement_completed", now, {
          settlement_net_tx_hash: txs.find((t) => t.purpose === "settlement_net")?.tx_hash ?? null,
          settlement_fee_tx_hash: txs.find((t) => t.purpose === "settlement_fee")?.tx_hash ?? null,
          forwarded_at: now,
        }),
      ];
    });
    this.#metrics?.paymentsMoved(moved, "forwarded");
  }

  /** Fails a settlement on what the chain or the bundler said of its recorded transfers. */
  async #fail(payment: PaymentRow, reason: string): Promise<void> {
    this.#log.warn({ paymentId: payment.id, reason }, "settlement failed");
    const moved = await this.#db.transaction().execute(async (trx) => {
      const current = await settlementRepo.lockPayment(trx, payment.id);
      if (current?.status !== "confirmed") return [];
      return [
        await applyTransition(trx, current, "settlement_failed", this.#now(), { failure_reason: reason }),
      ];
    });
    this.#metrics?.paymentsMoved(moved, "failed");
  }

  /**
   * Fails a settlement before anything was sent (a check on the wallet, the bundler's refusal to
   * prepare it), under the fence of a record: a worker that lost its lease, or that another
   * worker overtook (it recorded the transfers meanwhile, and sends them), changes nothing.
   */
  async #failUnsent(payment: PaymentRow, reason: string): Promise<void> {
    try {
      const failed = await this.#db.transaction().execute(async (trx) => {
        const current = await this.#stillDue(trx, payment.id);
        if (current.settlement_user_operation)
          throw new SettlementNotDue("its operation is already recorded");
        return applyTransition(trx, current, "settlement_failed", this.#now(), { failure_reason: reason });
      });
      this.#metrics?.paymentsMoved([failed], "failed");
      this.#log.warn({ paymentId: payment.id, reason }, "settlement failed");
    } catch (err) {
      if (!(err instanceof SettlementNotDue || err instanceof LeaseLost)) throw err;
      this.#log.warn({ paymentId: payment.id, reason, overtaken: err.message }, "settlement not failed");
    }
  }
}
