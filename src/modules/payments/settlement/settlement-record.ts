import type { ChainToken, Hex } from "../../../chain/network.ts";
import type { Environment } from "../../../config.ts";
import { formatAmount, TOKEN_DECIMALS, type TokenSymbol } from "../../../domain/money.ts";
import { carve, type SettledSplit, type SettlementRecord, type SplitShare } from "../../../domain/splits.ts";
import type { PaymentRow } from "../../../platform/db/schema.ts";
import type { Leg } from "../../../rails/rail.ts";
import type { OutboxEvent } from "../../webhooks/outbox.ts";
import { deterministicUuid } from "../checkout-keys.ts";

// A payment's one settlement (D15): its legs as data (the merchant's part of the net, the fee,
// each split of the payment's snapshot), what is recorded on the payment when it ends, and the
// settlement.recorded / split.recorded events and the settlements API's view built from that
// record. A leg of amount 0 (1 bps of a tiny net) is never sent: it is reported as sent, with no
// transaction.

export const MERCHANT_LEG = "settlement_net";
export const FEE_LEG = "settlement_fee";
/** The purpose of a split's leg: unique per payment, like the merchant's and the fee's. */
export const splitLeg = (splitId: string) => `split:${splitId}`;

/** A payment's settlement id: derived from the payment, so it is the same on every attempt. */
export function settlementIdOf(paymentId: string): string {
  return deterministicUuid(`settlement:${paymentId}`);
}

export interface CarvedSettlement {
  merchant: bigint;
  splits: Array<{ share: SplitShare; amount: bigint }>;
}

/** The net carved into the merchant's part and the snapshot's splits. */
export function carveSettlement(
  payment: Pick<PaymentRow, "net_amount" | "split_snapshot">,
): CarvedSettlement {
  const shares = payment.split_snapshot ?? [];
  const carved = carve(BigInt(payment.net_amount), shares);
  return {
    merchant: carved.merchant,
    splits: shares.map((share, i) => ({ share, amount: carved.amounts[i] ?? 0n })),
  };
}

/** The settlement's transfers from the receiving wallet, each leg of amount 0 left out. */
export function settlementLegs(payment: PaymentRow, treasury: Hex): Leg[] {
  const token = payment.token_symbol as ChainToken;
  const carved = carveSettlement(payment);
  const legs: Leg[] = [];
  if (carved.merchant > 0n)
    legs.push({ token, to: payment.merchant_wallet as Hex, amount: carved.merchant, purpose: MERCHANT_LEG });
  const fee = BigInt(payment.fee_amount);
  if (fee > 0n) legs.push({ token, to: treasury, amount: fee, purpose: FEE_LEG });
  for (const { share, amount } of carved.splits) {
    if (amount > 0n)
      legs.push({ token, to: share.destination as Hex, amount, purpose: splitLeg(share.splitId) });
  }
  return legs;
}

/** How each leg ended: its transaction, and whether it was mined with a success receipt. */
export type LegOutcomes = ReadonlyMap<string, { txHash: string | null; sent: boolean }>;

/** What is recorded on the payment when its settlement ends, from how each leg ended. */
export function settlementRecord(payment: PaymentRow, legs: LegOutcomes): SettlementRecord {
  const carved = carveSettlement(payment);
  const splits: SettledSplit[] = carved.splits.map(({ share, amount }) => {
    const leg = legs.get(splitLeg(share.splitId));
    return {
      ...share,
      amount: amount.toString(),
      status: amount === 0n || leg?.sent ? "sent" : "failed",
      txRef: amount === 0n ? null : (leg?.txHash ?? null),
    };
  });
  return {
    merchantAmount: carved.merchant.toString(),
    txRef: legs.get(MERCHANT_LEG)?.txHash ?? null,
    splits,
  };
}

/** The columns that record the settlement, set with the payment's forwarded or failed transition. */
export function settlementColumns(payment: PaymentRow, legs: LegOutcomes, at: Date) {
  return {
    settlement_id: settlementIdOf(payment.id),
    settled_at: at,
    settlement: JSON.stringify(settlementRecord(payment, legs)),
  };
}

/** The settlement of part D15's `settlement.recorded` (and of GET /api/v1/settlements). */
export interface SettlementView {
  settlementId: string;
  paymentIds: string[];
  /** The network its transfers moved on (D22): its payment's. */
  network: string | null;
  tokenSymbol: string;
  grossAmount: string;
  feeAmount: string;
  netAmount: string;
  merchantAmount: string;
  merchantWallet: string | null;
  txRef: string | null;
  splits: Array<{
    splitId: string;
    label: string;
    amount: string;
    percent_bps: number;
    destination: string;
    status: "sent" | "failed";
    txRef: string | null;
  }>;
}

/** The view of a payment whose settlement is recorded (settlement_id and settlement set). */
export function toSettlementView(row: PaymentRow): SettlementView {
  const record = row.settlement;
  if (!row.settlement_id || !record) throw new Error(`payment ${row.id} has no recorded settlement`);
  const decimals = TOKEN_DECIMALS[row.token_symbol as TokenSymbol];
  const amount = (units: string | bigint) => formatAmount(BigInt(units), decimals);
  return {
    settlementId: row.settlement_id,
    paymentIds: [row.id],
    network: row.network,
    tokenSymbol: row.token_symbol,
    // What was settled: an attached transfer's amount (D19), else the gross asked.
    grossAmount: amount(row.amount_received ?? row.gross_amount),
    feeAmount: amount(row.fee_amount),
    netAmount: amount(row.net_amount),
    merchantAmount: amount(record.merchantAmount),
    merchantWallet: row.merchant_wallet,
    txRef: record.txRef,
    splits: record.splits.map((split) => ({
      splitId: split.splitId,
      label: split.label,
      amount: amount(split.amount),
      percent_bps: split.percentBps,
      destination: split.destination,
      status: split.status,
      txRef: split.txRef,
    })),
  };
}

/**
 * The events of a recorded settlement, to write with its transition: `settlement.recorded` and
 * one `split.recorded` per split, only when the payment's snapshot had splits enabled (D15).
 */
export function settlementEvents(row: PaymentRow): OutboxEvent[] {
  if (row.split_snapshot === null) return [];
  const view = toSettlementView(row);
  const scope = { workspaceId: row.workspace_id, environment: row.environment as Environment };
  return [
    { ...scope, type: "settlement.recorded", payload: { ...view } },
    ...view.splits.map((split) => ({
      ...scope,
      type: "split.recorded",
      payload: {
        settlementId: view.settlementId,
        splitId: split.splitId,
        label: split.label,
        amount: split.amount,
        percent_bps: split.percent_bps,
        destination: split.destination,
        status: split.status,
        txRef: split.txRef,
        paymentIds: view.paymentIds,
        network: view.network,
      },
    })),
  ];
}
