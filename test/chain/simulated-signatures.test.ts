import { type Hex, recoverTypedDataAddress } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from "../../src/chain/eip3009.ts";
import { signedBy } from "../../src/chain/simulated/signatures.ts";

// The simulated contracts' ecrecover (libsecp256k1) must agree with viem's on every signature.

const payer = privateKeyToAccount(generatePrivateKey());
const other = privateKeyToAccount(generatePrivateKey());
const typedData = {
  domain: {
    name: "USDC",
    version: "2",
    chainId: 31_337,
    verifyingContract: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
  },
  types: TRANSFER_WITH_AUTHORIZATION_TYPES,
  primaryType: "TransferWithAuthorization",
  message: {
    from: payer.address,
    to: other.address,
    value: 10_000n,
    validAfter: 0n,
    validBefore: 2_000_000_000n,
    nonce: `0x${"ab".repeat(32)}`,
  },
} as const;

describe("signedBy (the sandbox's ecrecover)", () => {
  it("accepts the signer's signature, as viem recovers it, and only for the signer", async () => {
    for (let i = 0; i < 5; i++) {
      const message = { ...typedData.message, value: BigInt(i + 1) };
      const signature = await payer.signTypedData({ ...typedData, message });
      expect(await recoverTypedDataAddress({ ...typedData, message, signature })).toBe(payer.address);
      expect(signedBy(payer.address, { ...typedData, message }, signature)).toBe(true);
      expect(signedBy(other.address, { ...typedData, message }, signature)).toBe(false);
    }
  });

  it("refuses a signature over other data, and a v of 27/28 or a yParity of 0/1 alike", async () => {
    const signature = await payer.signTypedData(typedData);
    const changed = { ...typedData, message: { ...typedData.message, value: 10_001n } };
    expect(signedBy(payer.address, changed, signature)).toBe(false);
    // viem signs with v 27/28; the same signature with a yParity byte (0/1) is the same key's.
    const v = Number.parseInt(signature.slice(130), 16);
    const withParity = `${signature.slice(0, 130)}${(v - 27).toString(16).padStart(2, "0")}` as Hex;
    expect(signedBy(payer.address, typedData, withParity)).toBe(true);
  });

  it("answers false, never throws, for malformed signatures", () => {
    for (const bad of ["0x", "0x1234", `0x${"00".repeat(65)}`, `0x${"ff".repeat(65)}`, "nothex"] as Hex[])
      expect(signedBy(payer.address, typedData, bad)).toBe(false);
  });
});
