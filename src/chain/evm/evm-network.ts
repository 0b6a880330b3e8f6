import {
  type Chain,
  createPublicClient,
  encodeFunctionData,
  erc20Abi,
  http,
  keccak256,
  type PublicClient,
  parseAbiItem,
  parseTransaction,
  TransactionNotFoundError,
  TransactionReceiptNotFoundError,
} from "viem";
import { signTransaction } from "viem/accounts";
import type { NetworkConfig } from "../../config.ts";
import type {
  AccountState,
  BlockRef,
  ChainToken,
  EventLog,
  FeeQuote,
  Hex,
  IncomingTransfer,
  Network,
  ReceiptStatus,
  SignedTransaction,
  TransferGas,
  TransferRequest,
} from "../network.ts";
import type { AuthorizationUse, X402SchemeFactory } from "../x402-scheme.ts";
import { chainOf } from "./chain-of.ts";
import { ETH_TRANSFER_GAS, ethTransferGas } from "./eth-transfer-gas.ts";
import { userOperationsIn } from "./user-operations.ts";
import { authorizationUse, evmX402Scheme } from "./x402-signer.ts";

// The viem implementation of the Network port. Reads are batched over HTTP (one round trip for
// many blocks); transactions are signed locally with an explicit nonce and broadcast raw.

const TRANSFER_EVENT = parseAbiItem(
  "event Transfer(address indexed from, address indexed to, uint256 value)",
);
/** Enough for an ERC-20 transfer on any common token; ETH transfers use exactly 21000. */
const ERC20_TRANSFER_GAS = 100_000n;

const FEE_ESTIMATE_TTL_MS = 1_000;

function maxOf(first: bigint, ...rest: bigint[]): bigint {
  let max = first;
  for (const value of rest) if (value > max) max = value;
  return max;
}

export class EvmNetwork implements Network {
  readonly environment;
  readonly id;
  readonly caip2;
  readonly name;
  readonly chainId;
  readonly confirmations;
  readonly treasuryAddress: Hex;
  readonly tokens: readonly ChainToken[];
  readonly #client: PublicClient;
  /** The same node without batching: for what must not wait on, or hold up, other reads. */
  readonly #alone: PublicClient;
  readonly x402: X402SchemeFactory;
  readonly #chain: Chain;
  readonly #tokenAddress: Map<ChainToken, Hex>;
  readonly #tokenBySymbolAddress: Map<string, ChainToken>;
  #fees: { at: number; estimate: Promise<FeeQuote> } | undefined;

  constructor(config: NetworkConfig) {
    this.environment = config.environment;
    this.id = config.id;
    this.caip2 = config.caip2;
    this.name = config.name;
    this.chainId = config.chainId;
    this.confirmations = config.confirmations;
    this.treasuryAddress = config.treasuryAddress as Hex;
    this.#chain = chainOf(config);
    this.#client = createPublicClient({
      chain: this.#chain,
      transport: http(config.rpcUrl, { batch: { batchSize: 200, wait: 0 }, retryCount: 2, timeout: 15_000 }),
    }) as PublicClient;
    this.#alone = createPublicClient({
      chain: this.#chain,
      transport: http(config.rpcUrl, { retryCount: 2, timeout: 15_000 }),
    }) as PublicClient;
    this.x402 = evmX402Scheme(this.#client);
    this.#tokenAddress = new Map<ChainToken, Hex>([
      ["USDC", config.tokens.USDC as Hex],
      ["ADAO", config.tokens.ADAO as Hex],
    ]);
    if (config.tokens.DAI) this.#tokenAddress.set("DAI", config.tokens.DAI as Hex);
    this.#tokenBySymbolAddress = new Map(
      [...this.#tokenAddress].map(([symbol, address]) => [address.toLowerCase(), symbol]),
    );
    this.tokens = ["ETH", ...this.#tokenAddress.keys()];
  }

  async head(): Promise<BlockRef> {
    const block = await this.#client.getBlock({ blockTag: "latest" });
    return { number: block.number, hash: block.hash };
  }

  async block(number: bigint): Promise<BlockRef | null> {
    try {
      const block = await this.#client.getBlock({ blockNumber: number });
      return { number: block.number, hash: block.hash };
    } catch {
      return null;
    }
  }

  async incomingTransfers(
    fromBlock: bigint,
    toBlock: bigint,
    recipients: readonly Hex[],
  ): Promise<IncomingTransfer[]> {
    if (recipients.length === 0 || toBlock < fromBlock) return [];
    const wanted = new Set(recipients.map((r) => r.toLowerCase()));
    const [logs, blocks] = await Promise.all([
      this.#client.getLogs({
        address: [...this.#tokenAddress.values()],
        event: TRANSFER_EVENT,
        args: { to: [...recipients] },
        fromBlock,
        toBlock,
      }),
      Promise.all(
        Array.from({ length: Number(toBlock - fromBlock + 1n) }, (_, i) =>
          this.#client.getBlock({ blockNumber: fromBlock + BigInt(i), includeTransactions: true }),
        ),
      ),
    ]);
    const transfers: IncomingTransfer[] = [];
    for (const log of logs) {
      const token = this.#tokenBySymbolAddress.get(log.address.toLowerCase());
      if (!token || log.removed || log.args.to === undefined || log.args.value === undefined) continue;
      transfers.push({
        token,
        from: log.args.from as Hex,
        to: log.args.to as Hex,
        amount: log.args.value,
        txHash: log.transactionHash,
        logIndex: log.logIndex,
        blockNumber: log.blockNumber,
        blockHash: log.blockHash,
      });
    }
    // Native ETH sent directly by a transaction (value transfers made inside contracts are not
    // visible here without tracing; docs/operations.md says so).
    for (const block of blocks) {
      for (const tx of block.transactions) {
        if (!tx.to || tx.value === 0n || !wanted.has(tx.to.toLowerCase())) continue;
        transfers.push({
          token: "ETH",
          from: tx.from,
          to: tx.to,
          amount: tx.value,
          txHash: tx.hash,
          logIndex: -1,
          blockNumber: block.number,
          blockHash: block.hash,
        });
      }
    }
    // Native transfers to contracts can revert; keep only transactions that succeeded.
    const native = transfers.filter((t) => t.logIndex === -1);
    if (native.length > 0) {
      const statuses = await Promise.all(native.map((t) => this.receipt(t.txHash)));
      const failed = new Set(native.filter((_, i) => statuses[i] !== "success").map((t) => t.txHash));
      return transfers.filter((t) => !(t.logIndex === -1 && failed.has(t.txHash)));
    }
    return transfers;
  }

  async transactionBlock(txHash: Hex): Promise<BlockRef | null> {
    try {
      const receipt = await this.#client.getTransactionReceipt({ hash: txHash });
      return { number: receipt.blockNumber, hash: receipt.blockHash };
    } catch (err) {
      if (err instanceof TransactionReceiptNotFoundError) return null;
      throw err;
    }
  }

  async balance(address: Hex, token: ChainToken, blockNumber?: bigint): Promise<bigint> {
    if (token === "ETH") return this.#client.getBalance({ address, blockNumber });
    const tokenAddress = this.#tokenAddress.get(token);
    if (!tokenAddress) throw new Error(`${token} is not configured on the ${this.environment} network`);
    return this.#client.readContract({
      address: tokenAddress,
      abi: erc20Abi,
      functionName: "balanceOf",
      args: [address],
      blockNumber,
    });
  }

  async accountAt(address: Hex, tokens: readonly ChainToken[]): Promise<AccountState> {
    // The block is pinned first: "latest" read twice may be two different blocks.
    const block = await this.#client.getBlockNumber({ cacheTime: 0 });
    const [minedNonce, ...values] = await Promise.all([
      this.#client.getTransactionCount({ address, blockNumber: block }),
      ...tokens.map((token) => this.balance(address, token, block)),
    ]);
    const balances: AccountState["balances"] = {};
    for (const [i, token] of tokens.entries()) balances[token] = values[i] as bigint;
    return { balances, minedNonce: minedNonce as number };
  }

  async pendingNonce(address: Hex): Promise<number> {
    return this.#alone.getTransactionCount({ address, blockTag: "pending" });
  }

  async minedNonce(address: Hex, depth = 0): Promise<number> {
    if (depth === 0) return this.#client.getTransactionCount({ address, blockTag: "latest" });
    const head = await this.#client.getBlockNumber({ cacheTime: 0 });
    const block = head > BigInt(depth) ? head - BigInt(depth) : 0n;
    return this.#client.getTransactionCount({ address, blockNumber: block });
  }

  fees(): Promise<FeeQuote> {
    return this.#feeEstimate();
  }

  async signCancel(privateKey: Hex, from: Hex, replaced: Hex, fees: FeeQuote): Promise<SignedTransaction> {
    const original = parseTransaction(replaced);
    if (original.nonce === undefined) throw new Error("the replaced transaction has no nonce");
    // A node replaces a pooled transaction only for at least 10% more on both fees.
    const above = (fee: bigint | undefined) => ((fee ?? 0n) * 1125n) / 1000n + 1n;
    const maxPriorityFeePerGas = maxOf(fees.maxPriorityFeePerGas, above(original.maxPriorityFeePerGas));
    const raw = await signTransaction({
      privateKey,
      transaction: {
        chainId: this.chainId,
        nonce: original.nonce,
        type: "eip1559",
        to: from,
        value: 0n,
        gas: ETH_TRANSFER_GAS,
        maxPriorityFeePerGas,
        maxFeePerGas: maxOf(fees.maxFeePerGas, above(original.maxFeePerGas), maxPriorityFeePerGas),
      },
    });
    return { raw, hash: keccak256(raw), nonce: original.nonce, gas: ETH_TRANSFER_GAS };
  }

  async known(txHash: Hex): Promise<boolean> {
    try {
      await this.#client.getTransaction({ hash: txHash });
      return true;
    } catch (err) {
      if (err instanceof TransactionNotFoundError) return false;
      throw err;
    }
  }

  async transferGas(from: Hex, request: TransferRequest): Promise<TransferGas> {
    if (request.call) return { gas: request.call.gas, refusal: null };
    if (request.token !== "ETH") return { gas: ERC20_TRANSFER_GAS, refusal: null };
    return ethTransferGas(this.#client, from, request.to, request.amount);
  }

  async signTransfer(
    privateKey: Hex,
    request: TransferRequest,
    nonce: number,
    fees: FeeQuote,
  ): Promise<SignedTransaction> {
    // Signed with the key directly: deriving the account's address first would cost a second
    // elliptic-curve multiplication per transaction, and the signature does not need it.
    const common = {
      chainId: this.chainId,
      nonce,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
      type: "eip1559" as const,
    };
    let raw: Hex;
    let gas: bigint;
    if (request.call) {
      const { data, value } = request.call;
      gas = request.call.gas;
      raw = await signTransaction({
        privateKey,
        transaction: { ...common, to: request.to, value, gas, data },
      });
    } else if (request.token === "ETH") {
      gas = request.gas ?? ETH_TRANSFER_GAS;
      raw = await signTransaction({
        privateKey,
        transaction: { ...common, to: request.to, value: request.amount, gas },
      });
    } else {
      const tokenAddress = this.#tokenAddress.get(request.token);
      if (!tokenAddress)
        throw new Error(`${request.token} is not configured on the ${this.environment} network`);
      gas = request.gas ?? ERC20_TRANSFER_GAS;
      raw = await signTransaction({
        privateKey,
        transaction: {
          ...common,
          to: tokenAddress,
          value: 0n,
          gas,
          data: encodeFunctionData({
            abi: erc20Abi,
            functionName: "transfer",
            args: [request.to, request.amount],
          }),
        },
      });
    }
    return { raw, hash: keccak256(raw), nonce, gas };
  }

  /**
   * The fee estimate (viem's: the latest base fee with 20% headroom, plus the priority fee),
   * shared for up to a second: a payout's gas check and its signature, and a wallet's payouts in a
   * row, price their gas alike without two RPC calls each. A base fee rises at most 12.5% per
   * block, within the headroom, so an estimate a second old still gets its transaction mined.
   */
  #feeEstimate(): Promise<FeeQuote> {
    const now = Date.now();
    if (!this.#fees || now - this.#fees.at > FEE_ESTIMATE_TTL_MS) {
      const estimate = this.#client.estimateFeesPerGas();
      this.#fees = { at: now, estimate };
      // A failed estimate is not kept: the next caller asks again.
      estimate.catch(() => {
        if (this.#fees?.estimate === estimate) this.#fees = undefined;
      });
    }
    return this.#fees.estimate;
  }

  async transferGasCost(token: ChainToken): Promise<bigint> {
    const fees = await this.#feeEstimate();
    return (token === "ETH" ? ETH_TRANSFER_GAS : ERC20_TRANSFER_GAS) * fees.maxFeePerGas;
  }

  async gasCost(units: bigint): Promise<bigint> {
    return units * (await this.#feeEstimate()).maxFeePerGas;
  }

  async broadcast(raw: Hex): Promise<void> {
    try {
      await this.#client.sendRawTransaction({ serializedTransaction: raw });
    } catch (err) {
      const message = String((err as Error).message).toLowerCase();
      // A rebroadcast of a transaction the node has, or has mined, is what reconciliation wants.
      if (
        message.includes("already known") ||
        message.includes("known transaction") ||
        message.includes("nonce too low")
      ) {
        return;
      }
      throw err;
    }
  }

  async receipt(txHash: Hex): Promise<ReceiptStatus> {
    try {
      const receipt = await this.#client.getTransactionReceipt({ hash: txHash });
      return receipt.status === "success" ? "success" : "reverted";
    } catch (err) {
      if (err instanceof TransactionReceiptNotFoundError) return "not_found";
      throw err;
    }
  }

  async transactionLogs(txHash: Hex): Promise<EventLog[]> {
    return (await this.#client.getTransactionReceipt({ hash: txHash })).logs;
  }

  userOperationsIn(txHash: Hex): Promise<Hex[]> {
    return userOperationsIn(this.#client, txHash);
  }

  async waitForReceipt(txHash: Hex, timeoutMs: number): Promise<ReceiptStatus> {
    try {
      const receipt = await this.#client.waitForTransactionReceipt({
        hash: txHash,
        timeout: timeoutMs,
        pollingInterval: 50,
      });
      return receipt.status === "success" ? "success" : "reverted";
    } catch (err) {
      if ((err as Error).name === "WaitForTransactionReceiptTimeoutError") return "not_found";
      throw err;
    }
  }

  authorizationUse(token: ChainToken, authorizer: Hex, nonce: Hex): Promise<AuthorizationUse> {
    const address = this.#tokenAddress.get(token);
    if (!address) throw new Error(`${token} is not configured on the ${this.id} network`);
    return authorizationUse(this.#client, address, authorizer, nonce);
  }

  async close(): Promise<void> {}
}
