// payments/inbox: the unmatched inbox, transfers that paid no payment. The watcher holds them here
// (unmatched-repo.ts); the merchant lists them and attaches one to a payment (unmatched-routes.ts,
// this file); the refunds module returns one, an on-ramp session claims its delivery, and the
// sandbox simulates an incoming one, each through UnmatchedInbox.

import { type CompiledQuery, sql } from "kysely";
import { confirmationsAt, type Hex, type OnNetwork } from "../../../chain/network.ts";
import { SimulatedLedger, sandboxTxHash } from "../../../chain/simulated/ledger.ts";
import type { Environment } from "../../../config.ts";
import type { AppContext } from "../../../context.ts";
import {
  type AppError,
  badRequest,
  conflict,
  forbidden,
  notFound,
  serviceUnavailable,
} from "../../../domain/errors.ts";
import { splitFee } from "../../../domain/money.ts";
import { isOwnWallet } from "../../../domain/own-wallets.ts";
import { type PaymentStatus, transition } from "../../../domain/payment-state.ts";
import { validateSandboxCredit } from "../../../domain/sandbox-credit.ts";
import { CLAIM_TRANSITIONS, onrampMayCredit } from "../../../domain/transfer-claim.ts";
import {
  isActionable,
  UNMATCHED_TRANSITIONS,
  type UnmatchedStatus,
} from "../../../domain/unmatched-state.ts";
import { isAddress, isPlainObject, isUuid } from "../../../domain/validation.ts";
import { walletAddress, walletTypeFor } from "../../../domain/wallet-choice.ts";
import { columnList } from "../../../platform/db/columns.ts";
import type { Db } from "../../../platform/db/database.ts";
import type { Fence } from "../../../platform/db/fences.ts";
import type { Tenant } from "../../../platform/http/auth.ts";
import type { WorkspacesService } from "../../workspaces/service.ts";
import * as claims from "../incoming/claims-repo.ts";
import * as repo from "../repo.ts";
import { applyTransition } from "../transitions.ts";
import { type PaymentView, toPaymentView, toUnmatchedView } from "../view.ts";
import * as unmatchedRepo from "./unmatched-repo.ts";

// The unmatched inbox (D13, D19): transfers to a workspace wallet that matched no payment, and
// what the merchant does with them. Attaching one to a pending or expired payment of the same
// token and wallet moves that payment on as if the watcher had matched it (detected, then
// confirmed and settled as usual) with what the transfer actually carried: amountReceived, the fee
// and the net (and the splits, at settlement) computed on it. Returning one is a transfer out of
// the wallet ordered by the refunds module, which claims it here (claimForReturn) in the
// transaction that records that transfer, and reopens it if the transfer fails. Each happens once:
// the transfer's row is locked and moved by a compare-and-set from `open`.

export type UnmatchedView = ReturnType<typeof toUnmatchedView>;

/** The name of a return's claim of its transfer among the return's fences. */
export const RETURN_FENCE = "inbox-open";

/** An on-ramp session's delivery: its transaction, to its wallet, of its currency. */
export interface OnrampDelivery {
  txHash: string;
  wallet: string;
  token: string;
}

/** A transfer of a delivery as the chain shows it: its identity, where it is, its block. */
export type ClaimedTransfer = claims.TransferKey & claims.TransferPlace & { blockNumber: bigint };

export class UnmatchedInbox {
  readonly #ctx: AppContext;
  readonly #workspaces: WorkspacesService;

  constructor(ctx: AppContext, workspaces: WorkspacesService) {
    this.#ctx = ctx;
    this.#workspaces = workspaces;
  }

  async list(tenant: Tenant, page: { limit: number; offset: number }) {
    const { rows, total } = await unmatchedRepo.listUnmatched(this.#ctx.db, tenant, page);
    return { transfers: rows.map(toUnmatchedView), total };
  }

  /** One transfer of the tenant's inbox; 404 for anyone else's. */
  async get(tenant: Tenant, id: string): Promise<unmatchedRepo.UnmatchedRow> {
    const row = isUuid(id) ? await unmatchedRepo.findUnmatched(this.#ctx.db, tenant, id) : undefined;
    if (!row) throw notFound("Unmatched transfer not found");
    return row;
  }

  /** POST …/unmatched/{id}/attach `{paymentId}`: the payment then settles what the transfer carried. */
  async attach(
    tenant: Tenant,
    id: string,
    body: unknown,
  ): Promise<{ transfer: UnmatchedView; payment: PaymentView }> {
    const paymentId = isPlainObject(body) ? body.paymentId : undefined;
    if (paymentId === undefined || paymentId === null || paymentId === "")
      throw badRequest("paymentId is required");
    if (!isUuid(paymentId)) throw badRequest("paymentId must be a payment id (a UUID)");
    // 404 before anything is locked, and a transfer the chain has not confirmed is not attached.
    const found = await this.get(tenant, id);
    this.assertActionable(found);
    await this.assertConfirmed(found);
    if (!(await repo.findPayment(this.#ctx.db, tenant, paymentId))) throw notFound("Payment not found");
    const workspace = await this.#workspaces.profile(tenant.workspaceId);
    const own = [workspace.eoaAddress, workspace.smartWalletAddress];
    const now = this.#ctx.now();
    const { transfer, payment } = await this.#ctx.db.transaction().execute(async (trx) => {
      const locked = await this.#lockOpen(trx, tenant, id);
      const row = await repo.findPayment(trx, tenant, paymentId, true);
      if (!row) throw notFound("Payment not found");
      if (row.payment_method !== "crypto")
        throw badRequest("Only a crypto payment can take an unmatched transfer", {
          paymentMethod: row.payment_method,
        });
      if (!transition(row.status as PaymentStatus, "unmatched_attached").ok)
        throw badRequest("Only a pending or expired payment can take an unmatched transfer", {
          status: row.status,
        });
      if (row.token_symbol !== locked.token_symbol)
        throw badRequest(
          `The transfer carried ${locked.token_symbol}, the payment asks for ${row.token_symbol}`,
        );
      // A payment of several networks not yet paid takes a transfer on any of them (D22).
      const payable = row.network === null ? (row.networks ?? []) : [row.network];
      if (!payable.includes(locked.network))
        throw badRequest(
          `The transfer arrived on network ${locked.network}, the payment is on ${payable.join(", ")}`,
          { transferNetwork: locked.network, paymentNetwork: row.network, paymentNetworks: payable },
        );
      if (row.receiving_address?.toLowerCase() !== locked.to_address.toLowerCase())
        throw badRequest("The transfer reached another wallet than the payment's receivingAddress", {
          transferTo: locked.to_address,
          receivingAddress: row.receiving_address,
        });
      if (isOwnWallet(locked.from_address, own))
        throw badRequest(
          "The transfer was sent from a wallet of this workspace: it moved the workspace's own money and cannot pay a payment",
          { from: locked.from_address },
        );
      const received = splitFee(BigInt(locked.amount));
      const moved = await applyTransition(trx, row, "unmatched_attached", now, {
        amount_received: received.gross.toString(),
        fee_amount: received.fee.toString(),
        net_amount: received.net.toString(),
        detected_tx_hash: locked.tx_hash,
        detected_log_index: locked.log_index,
        detected_block: locked.block_number,
        payer_address: locked.from_address,
        detected_at: now,
        network: locked.network,
      });
      const attached = await unmatchedRepo.moveUnmatched(trx, id, "attached", {
        payment_id: moved.id,
        resolved_at: now,
      });
      if (!attached) throw conflict("Unmatched transfer changed concurrently; retry");
      // Its claim is the payment's now (a simulated ledger's transfer has none).
      await claims.moveClaimsAt(
        trx,
        { environment: tenant.environment, id: locked.network },
        [{ txHash: locked.tx_hash, logIndex: locked.log_index }],
        "attached",
      );
      return { transfer: attached, payment: moved };
    });
    this.#ctx.metrics.paymentsMoved([payment], payment.status);
    return { transfer: toUnmatchedView(transfer), payment: toPaymentView(payment) };
  }

  /**
   * POST …/unmatched/{id}/keep: the merchant keeps the transfer as the wallet's own money (its own
   * top-up): no longer held from payouts, refunds and swaps; once, and only once the chain has
   * confirmed it (issue 39).
   */
  async keep(tenant: Tenant, id: string): Promise<{ transfer: UnmatchedView }> {
    const found = await this.get(tenant, id);
    this.assertActionable(found);
    await this.assertConfirmed(found);
    const kept = await this.#ctx.db.transaction().execute(async (trx) => {
      await this.#lockOpen(trx, tenant, id);
      const moved = await unmatchedRepo.moveUnmatched(trx, id, "kept", { resolved_at: this.#ctx.now() });
      if (!moved) throw conflict("Unmatched transfer changed concurrently; retry");
      return moved;
    });
    return { transfer: toUnmatchedView(kept) };
  }

  /** 409 unless the merchant may act on `row` (it is open), saying why not. */
  assertActionable(row: unmatchedRepo.UnmatchedRow): void {
    if (!isActionable(row.status as UnmatchedStatus)) throw notActionable(row);
  }

  /**
   * A transfer seen on a network is attached or returned only once the chain confirms it as it
   * confirms a payment: still included, under the network's confirmations. Otherwise a
   * reorganisation could drop a transfer whose money was already sent back. The simulated
   * ledger's are final.
   */
  async assertConfirmed(row: unmatchedRepo.UnmatchedRow): Promise<void> {
    const environment = row.environment as Environment;
    const network = this.#ctx.chains.of(environment, row.network)?.network;
    if (!network) {
      // The simulated ledger's transfers are final.
      if (environment === "sandbox" && this.#ctx.chains.in("sandbox").length === 0) return;
      throw serviceUnavailable(`Network ${row.network} is not configured`);
    }
    const [head, included] = await Promise.all([
      network.head(),
      network.transactionBlock(row.tx_hash as Hex),
    ]);
    if (!included)
      throw conflict(
        "The transfer is no longer on chain (a reorganisation dropped it): nothing to attach or return",
      );
    const confirmations = confirmationsAt(head.number, included.number);
    if (confirmations < BigInt(network.confirmations))
      throw conflict("The transfer is not confirmed yet: attach or return it once it is", {
        confirmations: Number(confirmations < 0n ? 0n : confirmations),
        required: network.confirmations,
      });
  }

  /**
   * The claim of an open transfer of the tenant for its return, as a fence of the return's record
   * (platform/db/fences.ts): refused (fence `inbox-open`) unless the transfer is open;
   * `returnRefused` then says why.
   */
  returnFence(tenant: Tenant, id: string): Fence {
    const statement = unmatchedRepo.moveStatement(this.#ctx.db, tenant, id, "return_recorded", {
      resolved_at: this.#ctx.now(),
    });
    return { name: RETURN_FENCE, statement, required: true };
  }

  /** Why a return's claim of transfer `id` was refused, as it stands now: 404, or 409 with its status. */
  async returnRefused(tenant: Tenant, id: string): Promise<AppError> {
    const row = await unmatchedRepo.findUnmatched(this.#ctx.db, tenant, id);
    if (!row) return notFound("Unmatched transfer not found");
    if (!isActionable(row.status as UnmatchedStatus)) return notActionable(row);
    return conflict("Unmatched transfer changed concurrently; retry");
  }

  /**
   * The provider named `delivery.txHash` as an on-ramp session's delivery (D17), in the caller's
   * transaction, the session's row locked first: the open inbox items of that transaction to the
   * session's wallet, of its currency, are the session's now (items and their claims), no longer
   * the merchant's to attach or return. Crediting them is claimForOnramp's, once the chain confirms.
   */
  async onrampNamed(trx: Db, on: OnNetwork, delivery: OnrampDelivery): Promise<void> {
    const moved = await unmatchedRepo.moveUnmatchedOfTransaction(
      trx,
      on,
      { txHash: delivery.txHash, to: delivery.wallet.toLowerCase(), token: delivery.token },
      "onramp_delivered",
      this.#ctx.now(),
    );
    await claims.moveClaimsAt(
      trx,
      on,
      moved.map((row) => ({ txHash: row.tx_hash, logIndex: row.log_index })),
      "onramp_named",
    );
  }

  /**
   * Claims an on-ramp session's delivery for its credit (onramp/confirm.ts), in the credit's
   * transaction, the session's row locked first; then the inbox items, then the claims. True when
   * every transfer of it is the session's: claimed by nobody yet (claimed now), already the
   * session's, or an inbox item still open (the session's now). False, changing nothing, when a
   * payment took one (the watcher matched it, or the merchant attached it) or the merchant returned
   * it: a transfer counts once, and that money is not the session's to credit.
   */
  async claimForOnramp(
    trx: Db,
    on: OnNetwork,
    delivery: OnrampDelivery & { transfers: readonly ClaimedTransfer[] },
  ): Promise<boolean> {
    const items = await unmatchedRepo.lockOfTransaction(trx, on, {
      txHash: delivery.txHash,
      to: delivery.wallet.toLowerCase(),
      token: delivery.token,
    });
    const held = await claims.lockClaims(trx, on, delivery.transfers);
    const open = new Set(
      items
        .filter((i) => isActionable(i.status as UnmatchedStatus))
        .map((i) => `${i.tx_hash}|${i.log_index}`),
    );
    const unclaimed: ClaimedTransfer[] = [];
    for (const transfer of delivery.transfers) {
      const found = held.get(claims.claimKey(transfer));
      const itemOpen = found !== undefined && open.has(`${found.place.txHash}|${found.place.logIndex}`);
      if (!onrampMayCredit(found?.claim, itemOpen)) return false;
      if (!found) unclaimed.push(transfer);
    }
    await this.onrampNamed(trx, on, delivery);
    const inserted = await claims.insertClaims(trx, on, unclaimed, CLAIM_TRANSITIONS.onramp_named.to);
    // The watcher claimed one meanwhile (and committed first): decide again on the next look.
    if (inserted !== unclaimed.length) throw conflict("A transfer of the delivery was claimed concurrently");
    return true;
  }

  /** Its return failed (nothing left the wallet): the statement that opens the transfer again, in the failure's transaction. */
  reopenStatement(scope: { workspaceId: string; environment: Environment }, id: string): CompiledQuery {
    return unmatchedRepo.moveStatement(this.#ctx.db, scope, id, "return_failed", { resolved_at: null });
  }

  /**
   * POST /api/v1/sandbox/incoming-transfer (D19): a payer's transfer to the workspace wallet on
   * the simulated ledger. Sandbox payments settle at creation, so none is ever pending: it lands
   * in the inbox, credited and recorded in one statement.
   */
  async sandboxIncoming(tenant: Tenant, body: unknown): Promise<{ transfer: UnmatchedView }> {
    if (tenant.environment !== "sandbox")
      throw forbidden("Incoming transfers are simulated only in the sandbox: use a svc_test_ key");
    const input = isPlainObject(body) ? body : {};
    const credit = validateSandboxCredit(input);
    if (!credit.ok) throw badRequest(credit.message);
    const network = this.#ctx.directory.resolveIn(tenant.environment, input);
    if (network === null) throw new Error("the sandbox always has a network");
    const { token, amount } = credit.value;
    const from = input.fromAddress ?? SANDBOX_PAYER;
    if (!isAddress(from)) throw badRequest("Invalid fromAddress format");
    const workspace = await this.#workspaces.profile(tenant.workspaceId);
    // Unnamed, the wallet the workspace's sandbox payments reach: its default (D21).
    const walletType = walletTypeFor(credit.value.walletType, workspace, tenant.environment);
    const to = walletAddress(workspace, walletType);
    if (!to)
      throw badRequest(
        walletType === "smart_wallet"
          ? "No smart wallet for this workspace: create one with POST /api/v1/workspaces/{id}/smart-wallet"
          : "No workspace wallet found. Provision a wallet first.",
      );
    const reference = `incoming:${crypto.randomUUID()}`;
    const row = await sql<unmatchedRepo.UnmatchedRow>`
      WITH ${SimulatedLedger.creditCtes({ network, address: to, token, amount, reference })},
      inbox AS (${unmatchedRepo.insertUnmatchedQuery({
        workspaceId: tenant.workspaceId,
        environment: tenant.environment,
        network,
        tokenSymbol: token,
        amount,
        fromAddress: from,
        toAddress: to,
        txHash: sandboxTxHash(reference),
        reason: unmatchedRepo.UNMATCHED_REASON,
      })})
      SELECT ${columnList(unmatchedRepo.UNMATCHED_COLUMNS)} FROM inbox`.execute(this.#ctx.db);
    const transfer = row.rows[0];
    if (!transfer) throw new Error("the sandbox transfer was not recorded");
    return { transfer: toUnmatchedView(transfer) };
  }

  async #lockOpen(trx: Db, tenant: Tenant, id: string): Promise<unmatchedRepo.UnmatchedRow> {
    const row = await unmatchedRepo.findUnmatched(trx, tenant, id, true);
    if (!row) throw notFound("Unmatched transfer not found");
    if (!isActionable(row.status as UnmatchedStatus)) throw notActionable(row);
    return row;
  }
}

/** The 409 for a transfer the merchant may not act on, saying why. */
function notActionable(row: unmatchedRepo.UnmatchedRow): AppError {
  if (row.status === UNMATCHED_TRANSITIONS.mined_again.from)
    return conflict(
      "The transfer was dropped by a reorganisation: nothing to attach or return until its transaction is mined again",
      { status: row.status },
    );
  return conflict(`Unmatched transfer is already ${row.status}`, {
    status: row.status,
    paymentId: row.payment_id,
  });
}

/** The sender of a sandbox incoming transfer that names none: a fixed, recognisable address. */
const SANDBOX_PAYER = "0x000000000000000000000000000000000000bEEF";
