import { describe, expect, it } from "vitest";
import { type WorkspaceWallets, walletAddress, walletTypeAt, walletTypeFor } from "./wallet-choice.ts";

const EOA = "0x00000000000000000000000000000000000000aA";
const SMART = "0x00000000000000000000000000000000000000bB";
const both = (defaults: Record<string, string>): WorkspaceWallets => ({
  eoaAddress: EOA,
  smartWalletAddress: SMART,
  defaultWalletTypes: defaults,
});

describe("the wallet a movement uses", () => {
  it("is the one asked for, whatever the default", () => {
    expect(walletTypeFor("eoa", both({ live: "smart_wallet" }), "live")).toBe("eoa");
    expect(walletTypeFor("smart_wallet", both({ live: "eoa" }), "live")).toBe("smart_wallet");
  });

  it("else the default of the request's own environment: a sandbox setting never steers live", () => {
    const wallets = both({ sandbox: "smart_wallet", live: "eoa" });
    expect(walletTypeFor(null, wallets, "sandbox")).toBe("smart_wallet");
    expect(walletTypeFor(null, wallets, "live")).toBe("eoa");
    expect(walletTypeFor(null, both({}), "live")).toBe("eoa");
  });

  it("has the address of its type, or none", () => {
    expect(walletAddress(both({}), "eoa")).toBe(EOA);
    expect(walletAddress(both({}), "smart_wallet")).toBe(SMART);
    expect(walletAddress({ ...both({}), smartWalletAddress: null }, "smart_wallet")).toBeNull();
  });

  it("tells which wallet an address is, in any case of its letters", () => {
    expect(walletTypeAt(both({}), SMART.toLowerCase())).toBe("smart_wallet");
    expect(walletTypeAt(both({}), EOA.toUpperCase().replace("0X", "0x"))).toBe("eoa");
    expect(walletTypeAt(both({}), "0x00000000000000000000000000000000000000cc")).toBeNull();
  });
});
