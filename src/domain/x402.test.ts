import { describe, expect, it } from "vitest";
import {
  checkRequirements,
  type RequirementsShape,
  X402_PAYMENT_GRACE_MS,
  x402PaymentExpiry,
} from "./x402.ts";

const USDC = "0xE948B10A290BF5Ee274cF0B50d1387fb7049B9f3";
const NETWORKS = [
  { id: "sandbox-a", caip2: "eip155:73570001", tokens: [{ symbol: "USDC", address: USDC }] },
  { id: "sandbox-b", caip2: "eip155:73570002", tokens: [] },
];
const WALLET = "0x46A082a2E2E8188b605B068260CB6F60F1fc60DB";

function requirements(fields: Partial<RequirementsShape> = {}): RequirementsShape {
  return {
    scheme: "exact",
    network: "eip155:73570001",
    asset: USDC,
    payTo: WALLET,
    amount: "10000",
    ...fields,
  };
}

describe("what a settle request must name (D23)", () => {
  it("takes a requirement of the environment's network, its USDC and the workspace's wallet, in any case", () => {
    expect(
      checkRequirements(
        requirements({ asset: USDC.toLowerCase(), payTo: WALLET.toUpperCase().replace("0X", "0x") }),
        "eip3009",
        NETWORKS,
        [WALLET],
      ),
    ).toMatchObject({
      ok: true,
      scheme: "exact",
      network: { id: "sandbox-a" },
      token: "USDC",
      amount: 10_000n,
    });
  });

  it("takes upto signed with Permit2, and a zero amount for it (the resource used nothing)", () => {
    expect(
      checkRequirements(requirements({ scheme: "upto", amount: "0" }), "permit2", NETWORKS, [WALLET]),
    ).toMatchObject({ ok: true, scheme: "upto", amount: 0n });
  });

  it.each<[string, string, string | null]>([
    ["exact", "signed with Permit2", "permit2"],
    ["exact", "signed with nothing known", null],
    ["upto", "signed with EIP-3009", "eip3009"],
  ])("refuses %s %s as invalid_payload", (scheme, _, signedAs) => {
    expect(checkRequirements(requirements({ scheme }), signedAs, NETWORKS, [WALLET])).toMatchObject({
      ok: false,
      reason: "invalid_payload",
    });
  });

  it.each<[string, Partial<RequirementsShape>, string]>([
    ["another scheme", { scheme: "batch-settlement" }, "unsupported_scheme"],
    ["a network of no environment here", { network: "eip155:1" }, "invalid_network"],
    [
      "a token the network does not have",
      { asset: "0x2222222222222222222222222222222222222222" },
      "invalid_payment_requirements",
    ],
    ["a network without USDC", { network: "eip155:73570002" }, "invalid_payment_requirements"],
    ["a zero amount", { amount: "0" }, "invalid_payment_requirements"],
    ["a decimal amount", { amount: "1.5" }, "invalid_payment_requirements"],
    [
      "another payee",
      { payTo: "0x2222222222222222222222222222222222222222" },
      "invalid_payment_requirements",
    ],
  ])("refuses %s", (_, fields, reason) => {
    expect(checkRequirements(requirements(fields), "eip3009", NETWORKS, [WALLET])).toMatchObject({
      ok: false,
      reason,
    });
  });

  it("keeps an x402 payment open for a grace period after its authorization's validity", () => {
    expect(x402PaymentExpiry(1_700_000_000n).getTime()).toBe(1_700_000_000_000 + X402_PAYMENT_GRACE_MS);
  });
});
