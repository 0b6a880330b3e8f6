import {
  type Address,
  createPublicClient,
  encodeAbiParameters,
  erc20Abi,
  http,
  keccak256,
  numberToHex,
  parseEther,
  parseUnits,
} from "viem";
import { type Devnet, rpc, TOKENS, type TokenSymbol } from "../../src/devnet/chain.ts";

// The merchant's own money on a workspace wallet, put there by writing the node's state: no
// transaction, so no transfer for the service's watcher to see. Money a payer sends in arrives
// in the unmatched inbox and is held there for its sender (issue 39) until the merchant attaches,
// returns or keeps it; a test that means "the wallet has this much to spend" credits it instead.

/** Balances of the test tokens (OpenZeppelin 5 ERC20): `_balances` is the contract's slot 0. */
const BALANCES_SLOT = 0n;

/** Adds `amount` (decimal, or smallest unit) of a test token to `to`'s balance. */
export async function creditToken(
  devnet: Devnet,
  symbol: TokenSymbol,
  to: Address,
  amount: bigint | string,
): Promise<void> {
  const units = typeof amount === "bigint" ? amount : parseUnits(amount, TOKENS[symbol].decimals);
  const chain = createPublicClient({ chain: devnet.chain, transport: http(devnet.rpcUrl) });
  const token = devnet.tokens[symbol];
  const balanceOf = () =>
    chain.readContract({ address: token, abi: erc20Abi, functionName: "balanceOf", args: [to] });
  const before = await balanceOf();
  const slot = keccak256(
    encodeAbiParameters([{ type: "address" }, { type: "uint256" }], [to, BALANCES_SLOT]),
  );
  await rpc(devnet.rpcUrl, "hardhat_setStorageAt", [token, slot, numberToHex(before + units, { size: 32 })]);
  // The layout is the token's: a write to the wrong slot would fund nothing, and say so here.
  const after = await balanceOf();
  if (after !== before + units) throw new Error(`crediting ${symbol} to ${to} left its balance at ${after}`);
}

/** Adds `amount` ETH (decimal) to `to`'s balance. */
export async function creditEth(devnet: Devnet, to: Address, amount: string): Promise<void> {
  const chain = createPublicClient({ chain: devnet.chain, transport: http(devnet.rpcUrl) });
  const before = await chain.getBalance({ address: to });
  await rpc(devnet.rpcUrl, "hardhat_setBalance", [to, numberToHex(before + parseEther(amount))]);
}

/** USDC and then ETH, as DevnetClients.fund takes them, credited rather than sent. */
export async function credit(devnet: Devnet, to: string, amounts: { USDC?: string; ETH?: string }) {
  if (amounts.USDC) await creditToken(devnet, "USDC", to as Address, amounts.USDC);
  if (amounts.ETH) await creditEth(devnet, to as Address, amounts.ETH);
}
