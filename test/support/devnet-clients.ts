import {
  type Address,
  type Chain,
  createPublicClient,
  createWalletClient,
  erc20Abi,
  type Hex,
  http,
  type PublicClient,
  parseEther,
  parseUnits,
  type Transport,
  type WalletClient,
} from "viem";
import { type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import type { Devnet } from "../../src/devnet/chain.ts";
import { credit } from "./devnet-credit.ts";

// A test devnet seen from outside the service: its public client, and the payer's wallet (it
// holds the devnet's test USDC and ETH) to fund the wallets a test pays from. No vitest here: the
// benches use it too.

export interface DevnetClients {
  /** Reads the chain; polls every 50 ms while it waits for a receipt. */
  chain: PublicClient;
  /** The devnet payer's wallet. */
  payer: WalletClient<Transport, Chain, PrivateKeyAccount>;
  /** The USDC balance of `address`, in the token's smallest unit. */
  usdcBalance(address: string): Promise<bigint>;
  /** Sends `amount` USDC (smallest unit) from the payer, without waiting for it to be mined. */
  sendUsdc(to: string, amount: bigint): Promise<Hex>;
  /** Sends the payer's USDC, then ETH (decimal amounts), each awaited to a successful receipt. */
  fund(address: string, amounts: { USDC?: string; ETH?: string }): Promise<void>;
  /**
   * Puts USDC and ETH on `address` with no transaction (devnet-credit.ts): the workspace's own
   * money to spend, which the watcher never sees as a payer's transfer held in the inbox.
   */
  credit(address: string, amounts: { USDC?: string; ETH?: string }): Promise<void>;
}

/** Gas for the payer's USDC transfer: an ERC-20 transfer into an empty balance takes ~52,000. */
const USDC_TRANSFER_GAS = 100_000n;

export function devnetClients(devnet: Devnet): DevnetClients {
  const chain = createPublicClient({
    chain: devnet.chain,
    transport: http(devnet.rpcUrl),
    pollingInterval: 50,
  }) as PublicClient;
  const payer = createWalletClient({
    account: privateKeyToAccount(devnet.accounts.payer.privateKey),
    chain: devnet.chain,
    transport: http(devnet.rpcUrl),
  });
  // A fixed limit, not an estimate: an estimate made while the recipient still holds tokens (a
  // balance slot to overwrite) ran out of gas once a settlement had emptied it before the
  // transfer was mined (storing into an empty slot costs about 17,000 more).
  const sendUsdc = (to: string, amount: bigint) =>
    payer.writeContract({
      address: devnet.tokens.USDC,
      abi: erc20Abi,
      functionName: "transfer",
      args: [to as Address, amount],
      gas: USDC_TRANSFER_GAS,
    });
  const succeeded = async (hash: Hex) => {
    const { status } = await chain.waitForTransactionReceipt({ hash });
    if (status !== "success") throw new Error(`funding transaction ${hash} ended ${status}`);
  };
  return {
    chain,
    payer,
    usdcBalance: (address) =>
      chain.readContract({
        address: devnet.tokens.USDC,
        abi: erc20Abi,
        functionName: "balanceOf",
        args: [address as Address],
      }),
    sendUsdc,
    credit: (address, amounts) => credit(devnet, address, amounts),
    async fund(address, amounts) {
      if (amounts.USDC) {
        await succeeded(await sendUsdc(address, parseUnits(amounts.USDC, 6)));
      }
      if (amounts.ETH) {
        await succeeded(
          await payer.sendTransaction({ to: address as Address, value: parseEther(amounts.ETH) }),
        );
      }
    },
  };
}
