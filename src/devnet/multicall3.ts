import { type Address, type Hex, parseAbi } from "viem";
import type { Artifact } from "./compile.ts";
import { rpc } from "./rpc.ts";

// Multicall3 at its canonical address, as on every real chain: viem's multicall and x402's
// facilitator (which diagnoses a failed EIP-3009 simulation with tryAggregate) call it there.

export const MULTICALL3_ADDRESS: Address = "0xcA11bde05977b3631167028862bE2a173976CA11";

/**
 * The functions of src/devnet/contracts/Multicall3.sol. The aggregates are payable in the contract
 * but declared view here, as viem's own multicall3Abi does, so that readContract takes them.
 */
export const MULTICALL3_ABI = parseAbi([
  "struct Call { address target; bytes callData; }",
  "struct Call3 { address target; bool allowFailure; bytes callData; }",
  "struct Result { bool success; bytes returnData; }",
  "function aggregate(Call[] calls) view returns (uint256 blockNumber, bytes[] returnData)",
  "function tryAggregate(bool requireSuccess, Call[] calls) view returns (Result[] returnData)",
  "function aggregate3(Call3[] calls) view returns (Result[] returnData)",
  "function getEthBalance(address addr) view returns (uint256 balance)",
  "function getBlockNumber() view returns (uint256 blockNumber)",
  "function getCurrentBlockTimestamp() view returns (uint256 timestamp)",
  "function getChainId() view returns (uint256 chainid)",
]);

/** Puts Multicall3's runtime code at {@link MULTICALL3_ADDRESS} (`hardhat_setCode`). */
export async function installMulticall3(rpcUrl: string, artifact: Artifact): Promise<void> {
  // The creation code run by eth_call returns the runtime code: no transaction, so the deployer's
  // nonce, and with it the address of everything it deploys later, stays as it was.
  const code = (await rpc(rpcUrl, "eth_call", [{ data: artifact.bytecode }, "latest"])) as Hex;
  if (!/^0x[0-9a-f]{2,}$/i.test(code)) throw new Error(`Multicall3's creation code returned ${code}`);
  await rpc(rpcUrl, "hardhat_setCode", [MULTICALL3_ADDRESS, code]);
}
