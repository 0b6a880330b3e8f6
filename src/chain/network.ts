import type { Environment } from "../config.ts";
import type { AuthorizationUse, X402SchemeFactory } from "./x402-scheme.ts";

// The port the modules use to talk to an environment's network. One production implementation
// (chain/evm, viem); the sandbox ledger (chain/simulated) arrives with payouts.

import type { ChainToken } from "../domain/money.ts";

export type { ChainToken };
export type Hex = `0x${string}`;

export interface IncomingTransfer {
  token: ChainToken;
  from: Hex;
  to: Hex;
  amount: bigint;
  txHash: Hex;
  /** Log index of an ERC-20 Transfer; -1 for a native ETH transfer (one per transaction). */
  logIndex: number;
  blockNumber: bigint;
  blockHash: Hex;
}

/** An event a mined move emitted, as its chain reports it (what a kind reads its results from). */
export interface EventLog {
  address: Hex;
  topics: [Hex, ...Hex[]] | [];
  data: Hex;
}

export interface BlockRef {
  number: bigint;
  hash: Hex;
}

/** The confirmations of a transaction in block `block` with the chain's head at `head`: its own block counts one. */
export function confirmationsAt(head: bigint, block: bigint): bigint {
  return head - block + 1n;
}

export interface TransferRequest {
  token: ChainToken;
  to: Hex;
  amount: bigint;
  /**
   * A contract call instead of a transfer (a swap's approval or its router call): sent to `to`
   * with `call.data` and `call.value` wei. `token` and `amount` then say what the call may take
   * from the wallet at most, which is what the records reserve of its balance.
   */
  call?: ContractCall;
  /**
   * The gas limit to sign a transfer with (`Network.transferGas`); absent: its kind's default
   * (21,000 for plain ETH, 100,000 for an ERC-20 transfer). A contract call has its own.
   */
  gas?: bigint;
}

/** The gas limit a transfer is signed with, and whether its recipient will take it at all. */
export interface TransferGas {
  gas: bigint;
  /**
   * Why the recipient's code will not take this plain ETH transfer within the gas allowed to it
   * (the node's estimate reverts, or needs more than the cap); null when nothing says so. A
   * refused transfer is not sent; `gas` is then the cap, should a caller send it all the same.
   */
  refusal: string | null;
}

export interface ContractCall {
  data: Hex;
  /** Wei sent with the call. */
  value: bigint;
  /** The gas limit of the call's transaction (an EOA's); a user operation's call gas is at least the sum of its calls'. */
  gas: bigint;
}

/** EIP-1559 fees per gas, in wei. */
export interface FeeQuote {
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

export interface SignedTransaction {
  raw: Hex;
  hash: Hex;
  nonce: number;
  /** Its gas limit: at most this many units of gas are paid for it. */
  gas: bigint;
}

/** An account as of one block: reading balances and the nonce at one block keeps them consistent. */
export interface AccountState {
  balances: Partial<Record<ChainToken, bigint>>;
  /** Transactions of the account mined up to that block (its nonce there). */
  minedNonce: number;
}

export type ReceiptStatus = "success" | "reverted" | "not_found";

/** The network a chain record belongs to (D22): its environment, and its id there. */
export type OnNetwork = Pick<Network, "environment" | "id">;

export interface Network {
  readonly environment: Environment;
  /** The short id the API names it by (D22), unique in its environment. */
  readonly id: string;
  /** Its CAIP-2 chain id (`eip155:8453`): the chain's namespace and reference. */
  readonly caip2: string;
  readonly name: string;
  readonly chainId: number;
  readonly confirmations: number;
  readonly treasuryAddress: Hex;
  readonly tokens: readonly ChainToken[];

  head(): Promise<BlockRef>;
  block(number: bigint): Promise<BlockRef | null>;
  /** Transfers of every token to any of `recipients` in the inclusive block range. */
  incomingTransfers(
    fromBlock: bigint,
    toBlock: bigint,
    recipients: readonly Hex[],
  ): Promise<IncomingTransfer[]>;
  /** Whether a transaction is (still) in the canonical chain, and at which block. */
  transactionBlock(txHash: Hex): Promise<BlockRef | null>;
  balance(address: Hex, token: ChainToken): Promise<bigint>;
  /** Balances of `tokens` and the mined nonce of `address`, all read at the latest block. */
  accountAt(address: Hex, tokens: readonly ChainToken[]): Promise<AccountState>;
  /**
   * Next nonce of an account including its pending transactions; asked in a request of its own
   * (never in a batch of reads): it depends on the node's pool, and a node slow to answer it must
   * hold up no other read (an EOA asks for it beside a transfer's balance check).
   */
  pendingNonce(address: Hex): Promise<number>;
  /**
   * Transactions of an account mined up to the block `depth` blocks below the latest (its nonce
   * there); depth 0: the latest block.
   */
  minedNonce(address: Hex, depth?: number): Promise<number>;
  /** What transactions signed now pay for gas; read before signing, outside any transaction. */
  fees(): Promise<FeeQuote>;
  /**
   * The gas limit `request` from `from` will be signed with, read before signing (outside any
   * transaction): a contract call's own, an ERC-20 transfer's; plain ETH 21,000 to an account
   * without code, more to a contract (a multisig, a smart wallet), whose receiving code runs, up
   * to a cap, beyond which (or where its code reverts) the recipient refuses it.
   */
  transferGas(from: Hex, request: TransferRequest): Promise<TransferGas>;
  /** Signs without sending, so the caller can record the transaction before broadcast. */
  signTransfer(
    privateKey: Hex,
    request: TransferRequest,
    nonce: number,
    fees: FeeQuote,
  ): Promise<SignedTransaction>;
  /**
   * Signs a transaction that takes `replaced`'s nonce and moves nothing (0 ETH to the account
   * itself), priced at `fees` and above `replaced`, so that a node holding that one accepts it as
   * a replacement.
   */
  signCancel(privateKey: Hex, from: Hex, replaced: Hex, fees: FeeQuote): Promise<SignedTransaction>;
  /** Whether the node has the transaction: in its pool or mined. */
  known(txHash: Hex): Promise<boolean>;
  /** Worst-case gas cost (wei) of one transfer of `token` at current prices, for pre-send checks. */
  transferGasCost(token: ChainToken): Promise<bigint>;
  /** Worst-case cost (wei) of `units` of gas at current prices (a contract call's limit). */
  gasCost(units: bigint): Promise<bigint>;
  /** Sends a signed transaction; sending one the node already knows is not an error. */
  broadcast(raw: Hex): Promise<void>;
  receipt(txHash: Hex): Promise<ReceiptStatus>;
  /** The events a mined transaction emitted (its receipt's logs). */
  transactionLogs(txHash: Hex): Promise<EventLog[]>;
  /** The hashes of the ERC-4337 user operations a mined transaction carried (none: not a bundle, or not mined). */
  userOperationsIn(txHash: Hex): Promise<Hex[]>;
  waitForReceipt(txHash: Hex, timeoutMs: number): Promise<ReceiptStatus>;
  /** x402's settlement scheme here (D23, chain/x402-scheme.ts), sending through the wallet given. */
  readonly x402: X402SchemeFactory;
  /** Whether an EIP-3009 authorization of `token` was used here (an agent's x402 payment), and by which transaction. */
  authorizationUse(token: ChainToken, authorizer: Hex, nonce: Hex): Promise<AuthorizationUse>;
  close(): Promise<void>;
}
