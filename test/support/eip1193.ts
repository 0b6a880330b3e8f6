import type { BrowserContext } from "playwright-core";
import { type Address, createWalletClient, type Hex, http, numberToHex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { type Devnet, rpc } from "../../src/devnet/chain.ts";

// An injected EIP-1193 provider (window.ethereum) for a Playwright page, backed by a devnet
// account held in Node: the page's script talks to it as to a browser wallet, and every request
// crosses to Node through one exposed binding, where the account signs and sends on the devnet's
// RPC (127.0.0.1). The provider records what it was asked, so a test can assert the exact transfer.

/** A request the page made of the wallet, as it made it. */
export interface WalletRequest {
  method: string;
  params: unknown[];
}

/** An EIP-1193 provider error (https://eips.ethereum.org/EIPS/eip-1193#provider-errors). */
export class ProviderRpcError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}

export interface InjectedWallet {
  address: Address;
  /** Every request the page made, in order. */
  requests: WalletRequest[];
  /** The hashes eth_sendTransaction returned, in order. */
  sent: Hex[];
  /** The next calls of `method` (all when `times` is omitted) fail with EIP-1193 code 4001 (user rejected). */
  reject(method: string, times?: number): void;
  /** Requests of `method`, in order. */
  calls(method: string): WalletRequest[];
}

export interface TransactionRequest {
  from?: string;
  to?: string;
  data?: string;
  value?: string;
  gas?: string;
}

const BINDING = "__devnetWallet";

/** Reads a wallet answers from its node, as injected wallets do: passed through to the devnet. */
const READS = new Set([
  "eth_blockNumber",
  "eth_call",
  "eth_estimateGas",
  "eth_gasPrice",
  "eth_maxPriorityFeePerGas",
  "eth_feeHistory",
  "eth_getBalance",
  "eth_getCode",
  "eth_getTransactionByHash",
  "eth_getTransactionReceipt",
  "eth_getTransactionCount",
  "eth_getBlockByNumber",
]);

// The page-side half: window.ethereum forwards each request to the binding and turns an error
// reply back into an Error carrying its EIP-1193 code, as wallets do. Runs before any page script.
const initScript = (binding: string) => `(() => {
  const listeners = new Map();
  const provider = {
    isMetaMask: false,
    async request(args) {
      if (!args || typeof args.method !== "string") {
        const error = new Error("invalid request"); error.code = -32600; throw error;
      }
      const reply = await window[${JSON.stringify(binding)}]({ method: args.method, params: args.params ?? [] });
      if (reply.error) {
        const error = new Error(reply.error.message); error.code = reply.error.code; throw error;
      }
      if (args.method === "wallet_switchEthereumChain" || args.method === "wallet_addEthereumChain") {
        for (const listener of listeners.get("chainChanged") ?? []) listener(reply.chainId);
      }
      return reply.result;
    },
    on(event, listener) {
      if (!listeners.has(event)) listeners.set(event, new Set());
      listeners.get(event).add(listener);
      return provider;
    },
    removeListener(event, listener) {
      listeners.get(event)?.delete(listener);
      return provider;
    },
  };
  Object.defineProperty(window, "ethereum", { value: provider, configurable: true });
})();`;

/**
 * Injects a wallet into every page of `context` (call before the page is opened; once per
 * context, the binding's name is fixed). `privateKey` must hold the devnet's ETH for gas and the
 * tokens it will send.
 */
export async function injectWallet(
  context: BrowserContext,
  devnet: Devnet,
  privateKey: Hex,
  options: { knowsNetwork?: boolean } = {},
): Promise<InjectedWallet> {
  const account = privateKeyToAccount(privateKey);
  const wallet = createWalletClient({ account, chain: devnet.chain, transport: http(devnet.rpcUrl) });
  const chainIdHex = numberToHex(devnet.chainId);
  const requests: WalletRequest[] = [];
  const sent: Hex[] = [];
  const rejections = new Map<string, number>();
  // A wallet that does not know the devnet yet (knowsNetwork: false) sits on Ethereum mainnet and
  // answers a switch with 4902 until the page adds the network.
  let known = options.knowsNetwork ?? true;
  let currentChain = known ? chainIdHex : "0x1";

  const handle = async ({ method, params }: WalletRequest): Promise<unknown> => {
    const left = rejections.get(method) ?? 0;
    if (left > 0) {
      rejections.set(method, left - 1);
      throw new ProviderRpcError(4001, "User rejected the request.");
    }
    switch (method) {
      case "eth_requestAccounts":
      case "eth_accounts":
        return [account.address];
      case "eth_chainId":
        return currentChain;
      case "net_version":
        return String(devnet.chainId);
      case "wallet_switchEthereumChain": {
        const wanted = (params[0] as { chainId?: string } | undefined)?.chainId?.toLowerCase();
        // 4902: the wallet does not know that chain; a page then offers wallet_addEthereumChain.
        if (wanted !== chainIdHex || !known)
          throw new ProviderRpcError(4902, `Unrecognized chain ID "${wanted}".`);
        currentChain = chainIdHex;
        return null;
      }
      case "wallet_addEthereumChain": {
        const wanted = (params[0] as { chainId?: string } | undefined)?.chainId?.toLowerCase();
        const rpcUrls = (params[0] as { rpcUrls?: string[] } | undefined)?.rpcUrls ?? [];
        if (wanted !== chainIdHex || !rpcUrls.includes(devnet.rpcUrl))
          throw new ProviderRpcError(4901, `This wallet cannot reach ${wanted}.`);
        known = true;
        currentChain = chainIdHex;
        return null;
      }
      case "eth_sendTransaction": {
        const tx = (params[0] ?? {}) as TransactionRequest;
        if (currentChain !== chainIdHex) throw new ProviderRpcError(4901, "Not connected to the chain.");
        if (tx.from && tx.from.toLowerCase() !== account.address.toLowerCase())
          throw new ProviderRpcError(4100, "Unauthorized sender.");
        if (!tx.to) throw new ProviderRpcError(-32602, "A transaction needs a recipient.");
        const hash = await wallet.sendTransaction({
          to: tx.to as Address,
          ...(tx.data ? { data: tx.data as Hex } : {}),
          value: tx.value ? BigInt(tx.value) : 0n,
          // A fixed limit, as devnet-clients.ts explains: an estimate can fall short once a
          // recipient's balance slot changes between estimate and mining.
          gas: tx.gas ? BigInt(tx.gas) : 200_000n,
        });
        sent.push(hash);
        return hash;
      }
      default:
        if (READS.has(method)) return rpc(devnet.rpcUrl, method, params);
        throw new ProviderRpcError(4200, `The wallet does not support ${method}.`);
    }
  };

  await context.exposeBinding(BINDING, async (_source, request: WalletRequest) => {
    requests.push({ method: request.method, params: request.params });
    try {
      return { result: (await handle(request)) ?? null };
    } catch (err) {
      if (err instanceof ProviderRpcError) return { error: { code: err.code, message: err.message } };
      // A devnet failure reaches the page as an internal error (-32603), as a wallet's would.
      return { error: { code: -32603, message: err instanceof Error ? err.message : String(err) } };
    }
  });
  await context.addInitScript(initScript(BINDING));

  return {
    address: account.address,
    requests,
    sent,
    reject(method, times = Number.POSITIVE_INFINITY) {
      rejections.set(method, times);
    },
    calls: (method) => requests.filter((r) => r.method === method),
  };
}

/** The calldata of an ERC-20 `transfer(to, amount)`: selector 0xa9059cbb, then both words. */
export function erc20TransferData(to: string, amount: bigint): Hex {
  const word = (hex: string) => hex.toLowerCase().replace(/^0x/, "").padStart(64, "0");
  return `0xa9059cbb${word(to)}${word(amount.toString(16))}`;
}
