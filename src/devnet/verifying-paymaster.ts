import {
  type Address,
  concat,
  encodeAbiParameters,
  type Hex,
  keccak256,
  numberToHex,
  pad,
  parseAbiParameters,
  slice,
} from "viem";
import { toPackedUserOperation, type UserOperation } from "viem/account-abstraction";

// The off-chain half of src/devnet/contracts/VerifyingPaymaster.sol: the hash its signer signs and
// the layout of its paymasterData (validUntil | validAfter | signature), written once for the
// devnet's ERC-7677 endpoint (paymaster-service.ts) and the tests that check it against the
// contract's own getHash.

const HASHED = parseAbiParameters(
  "address, uint256, bytes32, bytes32, bytes32, bytes32, uint256, bytes32, uint256, address, uint48, uint48",
);

export interface Validity {
  /** Last second the signature is good for (0: no end). */
  validUntil: number;
  /** First second it is good for. */
  validAfter: number;
}

/**
 * VerifyingPaymaster.getHash: the operation's fields but its signatures, every gas limit among
 * them (the paymaster's two as packed in paymasterAndData), the chain, the paymaster, the window.
 */
export function verifyingPaymasterHash(
  operation: UserOperation<"0.8">,
  at: { chainId: number; paymaster: Address } & Validity,
): Hex {
  const packed = toPackedUserOperation({ ...operation, paymaster: at.paymaster, paymasterData: "0x" });
  return keccak256(
    encodeAbiParameters(HASHED, [
      packed.sender,
      packed.nonce,
      keccak256(packed.initCode),
      keccak256(packed.callData),
      packed.accountGasLimits,
      slice(packed.paymasterAndData, 20, 52),
      packed.preVerificationGas,
      packed.gasFees,
      BigInt(at.chainId),
      at.paymaster,
      at.validUntil,
      at.validAfter,
    ]),
  );
}

/** The paymasterData the contract reads: validUntil (6 bytes) | validAfter (6) | signature (65). */
export function verifyingPaymasterData(validity: Validity, signature: Hex): Hex {
  return concat([
    pad(numberToHex(validity.validUntil), { size: 6 }),
    pad(numberToHex(validity.validAfter), { size: 6 }),
    signature,
  ]);
}
