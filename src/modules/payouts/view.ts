import type { ChainToken } from "../../chain/network.ts";
import { formatAmount, TOKEN_DECIMALS } from "../../domain/money.ts";
import type { TransferRow } from "../transfers/repo.ts";

/** What the API answers and events carry for a payout (part 2, "Payout (response object)"). */
export interface PayoutView {
  txHash: string | null;
  userOpHash?: string;
  amount: string;
  tokenSymbol: string;
  destinationAddress: string;
  fromAddress: string;
  environment: string;
  /** The network it moves on (D22). */
  network: string;
  status: string;
  description: string | null;
  metadata: Record<string, string>;
}

export function toPayoutView(row: TransferRow): PayoutView {
  return {
    txHash: row.tx_hash,
    amount: formatAmount(BigInt(row.amount), TOKEN_DECIMALS[row.token_symbol as ChainToken]),
    tokenSymbol: row.token_symbol,
    destinationAddress: row.destination_address,
    fromAddress: row.from_address,
    environment: row.environment,
    network: row.network,
    status: row.status,
    description: row.description,
    metadata: row.metadata,
    // Smart wallet payouts: txHash is the bundle transaction that carried the operation (D13).
    ...(row.user_op_hash ? { userOpHash: row.user_op_hash } : {}),
  };
}
