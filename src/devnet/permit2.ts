import { type Address, type Hex, parseAbi } from "viem";
import type { Artifact } from "./compile.ts";
import { rpc } from "./rpc.ts";

// Permit2 and x402's `upto` Permit2 proxy at their canonical addresses, as on real chains: @x402/evm's
// upto client signs for Permit2 there (its EIP-712 domain's verifyingContract) with the proxy as
// spender, and its facilitator calls the proxy there. Neither exists as an npm artifact, so the
// devnet's own contracts (src/devnet/contracts/Permit2.sol, X402UptoPermit2Proxy.sol) stand in.

export const PERMIT2_ADDRESS: Address = "0x000000000022D473030F116dDEE9F6B43aC78BA3";
export const X402_UPTO_PROXY_ADDRESS: Address = "0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002";

/** The SignatureTransfer functions and errors of src/devnet/contracts/Permit2.sol (Uniswap's ABI). */
export const PERMIT2_ABI = parseAbi([
  "struct TokenPermissions { address token; uint256 amount; }",
  "struct PermitTransferFrom { TokenPermissions permitted; uint256 nonce; uint256 deadline; }",
  "struct SignatureTransferDetails { address to; uint256 requestedAmount; }",
  "function DOMAIN_SEPARATOR() view returns (bytes32)",
  "function nonceBitmap(address owner, uint256 wordPos) view returns (uint256)",
  "function invalidateUnorderedNonces(uint256 wordPos, uint256 mask)",
  "function permitTransferFrom(PermitTransferFrom permit, SignatureTransferDetails transferDetails, address owner, bytes signature)",
  "function permitWitnessTransferFrom(PermitTransferFrom permit, SignatureTransferDetails transferDetails, address owner, bytes32 witness, string witnessTypeString, bytes signature)",
  "event UnorderedNonceInvalidation(address indexed owner, uint256 word, uint256 mask)",
  "error SignatureExpired(uint256 signatureDeadline)",
  "error InvalidNonce()",
  "error InvalidAmount(uint256 maxAmount)",
  "error LengthMismatch()",
  "error InvalidSignatureLength()",
  "error InvalidSignature()",
  "error InvalidSigner()",
  "error InvalidContractSignature()",
]);

/**
 * Puts Permit2's and the upto proxy's runtime code at {@link PERMIT2_ADDRESS} and
 * {@link X402_UPTO_PROXY_ADDRESS} (`hardhat_setCode`).
 */
export async function installPermit2(
  rpcUrl: string,
  artifacts: { permit2: Artifact; uptoProxy: Artifact },
): Promise<void> {
  await Promise.all([
    setRuntimeCode(rpcUrl, PERMIT2_ADDRESS, artifacts.permit2),
    setRuntimeCode(rpcUrl, X402_UPTO_PROXY_ADDRESS, artifacts.uptoProxy),
  ]);
}

async function setRuntimeCode(rpcUrl: string, address: Address, artifact: Artifact): Promise<void> {
  // The creation code run by eth_call returns the runtime code: no transaction, so the deployer's
  // nonce, and with it the address of everything it deploys later, stays as it was. Neither
  // contract has a constructor or immutables, so the code does not depend on where it ran.
  const code = (await rpc(rpcUrl, "eth_call", [{ data: artifact.bytecode }, "latest"])) as Hex;
  if (!/^0x[0-9a-f]{2,}$/i.test(code)) {
    throw new Error(`${artifact.contractName}'s creation code returned ${code}`);
  }
  await rpc(rpcUrl, "hardhat_setCode", [address, code]);
}
