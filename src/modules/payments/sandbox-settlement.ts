import type { ChainToken } from "../../chain/network.ts";
import { type LedgerCredit, sandboxTxHash } from "../../chain/simulated/ledger.ts";
import type { SettlementRecord, SplitShare } from "../../domain/splits.ts";
import { carveSettlement, settlementIdOf } from "./settlement/settlement-record.ts";

// A sandbox crypto payment settles as it is created (D5), on the simulated ledger: the merchant's
// part of the net lands in the workspace's sandbox wallet (so the merchant can pay it out), each
// split's part at its destination, in the payment's one statement. Parts of 0 move nothing.

export interface SandboxSettlement {
  settlement: { id: string; at: Date; record: SettlementRecord };
  credits: LedgerCredit[];
}

export function sandboxSettlement(
  payment: {
    id: string;
    /** The simulated network it is paid on. */
    network: string;
    net: bigint;
    token: ChainToken;
    splitSnapshot: SplitShare[] | null;
    wallet: string;
  },
  at: Date,
): SandboxSettlement {
  const carved = carveSettlement({
    net_amount: payment.net.toString(),
    split_snapshot: payment.splitSnapshot,
  });
  const credits: LedgerCredit[] = [];
  const credit = (address: string, amount: bigint, reference: string): string | null => {
    if (amount === 0n) return null;
    credits.push({ network: payment.network, address, token: payment.token, amount, reference });
    return sandboxTxHash(reference);
  };
  const txRef = credit(payment.wallet, carved.merchant, `payment:${payment.id}`);
  const splits = carved.splits.map(({ share, amount }) => ({
    ...share,
    amount: amount.toString(),
    status: "sent" as const,
    txRef: credit(share.destination, amount, `payment:${payment.id}:split:${share.splitId}`),
  }));
  return {
    settlement: {
      id: settlementIdOf(payment.id),
      at,
      record: { merchantAmount: carved.merchant.toString(), txRef, splits },
    },
    credits,
  };
}
