import type { TypedData } from "viem";

// EIP-3009's signed message (transferWithAuthorization), as x402's `exact` scheme signs it on every
// EVM network: the one definition the sandbox's token, the tests and the benches share.

export const TRANSFER_WITH_AUTHORIZATION_TYPES = {
  TransferWithAuthorization: [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "value", type: "uint256" },
    { name: "validAfter", type: "uint256" },
    { name: "validBefore", type: "uint256" },
    { name: "nonce", type: "bytes32" },
  ],
} as const satisfies TypedData;
