import { describe, expect, it } from "vitest";
import {
  type AskedPayment,
  amountsFromStored,
  capWindows,
  decide,
  NO_POLICY,
  originOf,
  parsePolicy,
  policyView,
  type SpendingPolicy,
  storedAmounts,
} from "./spending-policy.ts";

const PAYEE = "0x2222222222222222222222222222222222222222";
const usdc = (text: string) => BigInt(Math.round(Number(text) * 1_000_000));
const asked = (amount: string, more: Partial<AskedPayment> = {}): AskedPayment => ({
  currency: "USDC",
  amount: usdc(amount),
  payTo: PAYEE,
  origin: "https://api.example.com",
  ...more,
});
const nothing = { today: 0n, thisMonth: 0n };
const policy = (fields: Partial<SpendingPolicy>): SpendingPolicy => ({ ...NO_POLICY, ...fields });

describe("parsePolicy", () => {
  it("reads amounts per currency as smallest units, lists normalised, absent or null as no limit", () => {
    const parsed = parsePolicy({
      maxPerPayment: { USDC: "5.00", DAI: "1" },
      daily: { USDC: "10" },
      monthly: null,
      allowedPayees: [PAYEE.toUpperCase().replace("0X", "0x"), PAYEE],
      allowedOrigins: ["https://API.example.com/", "http://localhost:8080"],
      approvalAbove: { USDC: "0" },
    });
    expect(parsed).toEqual({
      maxPerPayment: { USDC: 5_000_000n, DAI: 10n ** 18n },
      daily: { USDC: 10_000_000n },
      monthly: null,
      allowedPayees: [PAYEE],
      allowedOrigins: ["https://api.example.com", "http://localhost:8080"],
      approvalAbove: { USDC: 0n },
    });
    expect(parsePolicy({})).toEqual(NO_POLICY);
  });

  it.each([
    [[], "Request body must be a JSON object"],
    [{ limit: {} }, "Unknown field in policy: limit"],
    [{ ["k".repeat(41)]: 1 }, `Unknown field in policy: ${"k".repeat(41)}`],
    [{ daily: "5" }, /^daily must be an object/],
    [{ daily: { EUR: "5" } }, /^daily names an unknown currency EUR/],
    [{ daily: { USDC: "1.0000001" } }, /^daily\.USDC must be a decimal string of at most 6 decimals/],
    [{ monthly: { USDC: -1 } }, /^monthly\.USDC must be a decimal string/],
    [{ maxPerPayment: { USDC: "1e3" } }, /^maxPerPayment\.USDC/],
    [{ approvalAbove: { DAI: "9".repeat(101) } }, /^approvalAbove\.DAI/],
    [{ allowedPayees: "0x22" }, /^allowedPayees must be a list/],
    [{ allowedPayees: ["0x22"] }, /^allowedPayees must list addresses/],
    [{ allowedPayees: [`0x${"0".repeat(40)}`] }, /^allowedPayees must list addresses/],
    [{ allowedPayees: Array(101).fill(PAYEE) }, /^allowedPayees must be a list of at most 100/],
    [{ allowedOrigins: ["https://api.example.com/path"] }, /^allowedOrigins must list origins/],
    [{ allowedOrigins: ["ftp://api.example.com"] }, /^allowedOrigins must list origins/],
    [{ allowedOrigins: ["https://user:pw@api.example.com"] }, /^allowedOrigins must list origins/],
    [{ allowedOrigins: ["api.example.com"] }, /^allowedOrigins must list origins/],
  ])("refuses %j naming the field", (body, message) => {
    expect(() => parsePolicy(body)).toThrow(message);
  });
});

describe("policyView and the stored form", () => {
  it("shows decimal strings and leaves absent fields out", () => {
    const parsed = parsePolicy({
      daily: { USDC: "10" },
      allowedPayees: [PAYEE],
      approvalAbove: { DAI: "0.5" },
    });
    expect(policyView(parsed)).toEqual({
      daily: { USDC: "10.00" },
      allowedPayees: [PAYEE],
      approvalAbove: { DAI: "0.50" },
    });
    expect(policyView(NO_POLICY)).toEqual({});
  });

  it("stores amounts as integer strings and reads them back", () => {
    const amounts = { USDC: 5_000_000n, ETH: 10n ** 30n };
    const stored = storedAmounts(amounts);
    expect(stored).toEqual({ USDC: "5000000", ETH: "1000000000000000000000000000000" });
    expect(amountsFromStored(stored)).toEqual(amounts);
    expect(storedAmounts(null)).toBeNull();
    expect(amountsFromStored(null)).toBeNull();
  });
});

describe("decide", () => {
  it("authorizes anything without a policy", () => {
    expect(decide(NO_POLICY, asked("1000000"), nothing)).toEqual({ outcome: "authorized" });
  });

  it("refuses above maxPerPayment, naming the rule; at the maximum is allowed", () => {
    const p = policy({ maxPerPayment: { USDC: usdc("5") } });
    expect(decide(p, asked("5"), nothing)).toEqual({ outcome: "authorized" });
    expect(decide(p, asked("5.000001"), nothing)).toMatchObject({
      outcome: "refused",
      rule: "maxPerPayment",
    });
    // Another currency has no limit.
    expect(decide(p, asked("50", { currency: "DAI", amount: 50n }), nothing)).toEqual({
      outcome: "authorized",
    });
  });

  it("refuses payees and origins the allow-lists leave out; an empty list allows none", () => {
    const p = policy({ allowedPayees: [PAYEE], allowedOrigins: ["https://api.example.com"] });
    expect(decide(p, asked("1", { payTo: PAYEE.toUpperCase().replace("0X", "0x") }), nothing).outcome).toBe(
      "authorized",
    );
    expect(decide(p, asked("1", { payTo: `0x${"3".repeat(40)}` }), nothing)).toMatchObject({
      rule: "allowedPayees",
    });
    expect(decide(p, asked("1", { origin: "https://evil.example" }), nothing)).toMatchObject({
      rule: "allowedOrigins",
    });
    expect(decide(policy({ allowedPayees: [] }), asked("1"), nothing)).toMatchObject({
      rule: "allowedPayees",
    });
  });

  it("counts what is reserved today and this month against the caps", () => {
    const p = policy({ daily: { USDC: usdc("10") }, monthly: { USDC: usdc("100") } });
    expect(decide(p, asked("4"), { today: usdc("6"), thisMonth: usdc("6") }).outcome).toBe("authorized");
    const daily = decide(p, asked("4.01"), { today: usdc("6"), thisMonth: usdc("6") });
    expect(daily).toMatchObject({ outcome: "refused", rule: "daily" });
    expect(daily.outcome === "refused" && daily.message).toContain("6.00 USDC reserved today");
    expect(decide(p, asked("4"), { today: 0n, thisMonth: usdc("97") })).toMatchObject({ rule: "monthly" });
  });

  it("checks the amount and the allow-lists before approvalAbove, and the caps too", () => {
    const p = policy({
      maxPerPayment: { USDC: usdc("50") },
      allowedPayees: [PAYEE],
      daily: { USDC: usdc("60") },
      approvalAbove: { USDC: usdc("20") },
    });
    expect(decide(p, asked("51"), nothing)).toMatchObject({ rule: "maxPerPayment" });
    expect(decide(p, asked("30", { payTo: `0x${"4".repeat(40)}` }), nothing)).toMatchObject({
      rule: "allowedPayees",
    });
    expect(decide(p, asked("30"), { today: usdc("40"), thisMonth: 0n })).toMatchObject({ rule: "daily" });
    expect(decide(p, asked("30"), nothing)).toEqual({ outcome: "approval_required" });
    expect(decide(p, asked("20"), nothing)).toEqual({ outcome: "authorized" });
  });
});

describe("capWindows and originOf", () => {
  it("starts the day and the month at midnight UTC", () => {
    expect(capWindows(new Date("2025-03-31T23:59:59.999Z"))).toEqual({
      dayStart: new Date("2025-03-31T00:00:00Z"),
      monthStart: new Date("2025-03-01T00:00:00Z"),
    });
    expect(capWindows(new Date("2025-04-01T00:00:00Z")).monthStart).toEqual(new Date("2025-04-01T00:00:00Z"));
  });

  it("gives the origin of http(s) URLs only", () => {
    expect(originOf("https://API.Example.com:443/a?b#c")).toBe("https://api.example.com");
    expect(originOf("http://localhost:8080/x")).toBe("http://localhost:8080");
    expect(originOf("javascript:alert(1)")).toBeNull();
    expect(originOf("not a url")).toBeNull();
  });
});
