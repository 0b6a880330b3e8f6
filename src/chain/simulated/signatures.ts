import secp256k1 from "secp256k1";
import { type Hex, hashTypedData, hexToBytes, isAddressEqual, parseSignature, toHex } from "viem";
import { publicKeyToAddress } from "viem/accounts";

// The simulated contracts' ecrecover. They check every authorization's signature as the chain's
// contracts do, and x402 has checked it once already with viem (@noble/curves, about 1.5 ms of
// CPU on this machine's kind). libsecp256k1 (the `secp256k1` package: a prebuilt native binding,
// falling back to pure JS where there is none) recovers in about 0.05 ms, so the sandbox's own
// checks no longer double the cost of a verify or a settle.

/** Whether `signature` over the typed data was made by `address`'s key; false for any malformed one. */
export function signedBy(
  address: Hex,
  typedData: Parameters<typeof hashTypedData>[0],
  signature: Hex,
): boolean {
  try {
    const { r, s, yParity } = parseSignature(signature);
    const compact = new Uint8Array(64);
    compact.set(hexToBytes(r, { size: 32 }), 0);
    compact.set(hexToBytes(s, { size: 32 }), 32);
    const digest = hexToBytes(hashTypedData(typedData));
    const publicKey = secp256k1.ecdsaRecover(compact, yParity ?? 0, digest, false);
    return isAddressEqual(publicKeyToAddress(toHex(publicKey)), address);
  } catch {
    return false;
  }
}
