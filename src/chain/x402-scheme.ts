import type { SchemeNetworkFacilitator } from "@x402/core/types";
import type { Log } from "viem";
import type { X402Scheme } from "../domain/x402.ts";
import type { EventLog, Hex, ReceiptStatus } from "./network.ts";

// What the x402 facilitator (modules/x402, D23) asks of a network: the x402 scheme that verifies
// and settles a payer's authorization there. The scheme is x402's own (@x402/evm's ExactEvmScheme
// and UptoEvmScheme: EIP-712 checks, simulation, the settle call); each network hands it a signer over its own chain
// (chain/evm/x402-signer.ts) or over the simulated ledger (chain/simulated/x402-signer.ts), so a
// network of another family would be one more implementation. What the settle sends goes through
// the facilitator wallet given here: the module records it before it is broadcast.

/** A contract call the scheme wants sent from the facilitator wallet. */
export interface FacilitatorCall {
  to: Hex;
  data: Hex;
  /** The gas limit, estimated by the network's signer. */
  gas: bigint;
}

/** How a transaction the facilitator sent ended, as far as is known. */
export interface FacilitatorOutcome {
  status: ReceiptStatus;
  /** The events of a mined transaction. */
  logs: readonly EventLog[];
}

/** The workspace's facilitator wallet on a network: where settlements are sent from. */
export interface FacilitatorWallet {
  address: Hex;
  /** Records the call before broadcasting it (nonce-ordered), and resolves to its hash once sent. */
  send(call: FacilitatorCall): Promise<Hex>;
  /** Waits (bounded) for the outcome of a transaction `send` answered. */
  outcome(hash: Hex): Promise<FacilitatorOutcome>;
}

/** Whether an EIP-3009 authorization was used; its transaction when it can be found. */
export type AuthorizationUse = { used: false } | { used: true; txHash: Hex | null };

/** Makes x402's `scheme` of a network for one settle or verify, with the wallet it sends from. */
export type X402SchemeFactory = (wallet: FacilitatorWallet, scheme: X402Scheme) => SchemeNetworkFacilitator;

/** A log as x402 reads a receipt's (viem's Log): where it was mined does not matter to it. */
export function receiptLog(log: EventLog, transactionHash: Hex): Log {
  return {
    ...log,
    blockHash: null,
    blockNumber: null,
    logIndex: null,
    transactionHash,
    transactionIndex: null,
    removed: false,
  };
}
