import { describe, expect, it } from "vitest";
import { InvalidRequest } from "../../domain/errors.ts";
import { parseInstant } from "../../domain/validation.ts";
import { decodeCursor, encodeCursor } from "../../platform/db/page.ts";
import { parsePaymentFilter } from "./browse.ts";

// The payments browser's inputs: the filter of a query string and the opaque cursor (browse.ts).

function refused(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidRequest);
    return (err as InvalidRequest).message;
  }
  throw new Error("expected a 400");
}

describe("parsePaymentFilter", () => {
  it("reads every field", () => {
    expect(
      parsePaymentFilter({
        status: "forwarded",
        tokenSymbol: "USDC",
        paymentMethod: "crypto",
        createdFrom: "2025-01-01",
        createdTo: "2025-02-01T12:30:00+02:00",
        search: "order 42",
      }),
    ).toEqual({
      status: "forwarded",
      tokenSymbol: "USDC",
      paymentMethod: "crypto",
      createdFrom: new Date("2025-01-01T00:00:00.000Z"),
      createdTo: new Date("2025-02-01T10:30:00.000Z"),
      search: "order 42",
    });
  });

  it("treats absent and empty parameters as unset, and ignores parameters it does not know", () => {
    expect(parsePaymentFilter({})).toEqual({});
    expect(
      parsePaymentFilter({
        status: "",
        tokenSymbol: "",
        createdFrom: "",
        search: "",
        limit: "5",
        other: "x",
      }),
    ).toEqual({});
  });

  it("card payments are found by their currency, USD", () => {
    expect(parsePaymentFilter({ tokenSymbol: "USD", paymentMethod: "card" })).toEqual({
      tokenSymbol: "USD",
      paymentMethod: "card",
    });
  });

  it.each([
    [{ status: "paid" }, "status"],
    [{ status: "FORWARDED" }, "status"],
    [{ tokenSymbol: "usdc" }, "tokenSymbol"],
    [{ tokenSymbol: "BTC" }, "tokenSymbol"],
    [{ paymentMethod: "cash" }, "paymentMethod"],
    [{ createdFrom: "yesterday" }, "createdFrom"],
    [{ createdFrom: "2025-02-30" }, "createdFrom"],
    [{ createdFrom: "2025-13-01" }, "createdFrom"],
    [{ createdFrom: "0999-01-01" }, "createdFrom"],
    [{ createdTo: "2025-01-01T24:00:00Z" }, "createdTo"],
    [{ createdTo: "2025-01-01T10:00:00+25:00" }, "createdTo"],
    [{ createdTo: "1735689600" }, "createdTo"],
    [{ createdFrom: "2025-02-01", createdTo: "2025-02-01" }, "createdTo"],
    [{ createdFrom: "2025-03-01", createdTo: "2025-02-01" }, "createdTo"],
    [{ search: "x".repeat(1001) }, "search"],
    [{ status: ["forwarded", "pending"] }, "status"],
    [{ search: ["a"] }, "search"],
  ])("refuses %j with a 400 naming %s", (query, field) => {
    expect(refused(() => parsePaymentFilter(query))).toMatch(new RegExp(`^${field} `));
  });
});

describe("parseInstant", () => {
  it("reads dates as UTC midnight and zone-less times as UTC", () => {
    expect(parseInstant("2024-02-29")?.toISOString()).toBe("2024-02-29T00:00:00.000Z");
    expect(parseInstant("2024-02-29T23:59")?.toISOString()).toBe("2024-02-29T23:59:00.000Z");
    expect(parseInstant("2024-02-29T23:59:58.123456Z")?.toISOString()).toBe("2024-02-29T23:59:58.123Z");
    expect(parseInstant("2024-03-01T01:00:00-05:30")?.toISOString()).toBe("2024-03-01T06:30:00.000Z");
  });

  it("refuses days a month does not have instead of rolling over", () => {
    expect(parseInstant("2023-02-29")).toBeNull();
    expect(parseInstant("2024-04-31")).toBeNull();
    expect(parseInstant("2024-04-00")).toBeNull();
  });
});

describe("cursor", () => {
  const key = { createdAt: "2025-01-31T12:00:00.123456Z", id: "7f1c3a52-7a0e-4b57-9d7c-7d2f2f0c9f10" };

  it("round-trips, and is base64url of the key's text", () => {
    const cursor = encodeCursor(key);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(Buffer.from(cursor, "base64url").toString()).toBe(`${key.createdAt}|${key.id}`);
    expect(decodeCursor(cursor)).toEqual(key);
  });

  it.each([
    ["empty", ""],
    ["not base64url", "!!!!"],
    ["padded", `${encodeCursor(key)}=`],
    ["characters the decoder would skip", `${encodeCursor(key).slice(0, 8)}*${encodeCursor(key).slice(8)}`],
    ["no id", Buffer.from(`${key.createdAt}|`).toString("base64url")],
    ["not a uuid", Buffer.from(`${key.createdAt}|${"z".repeat(36)}`).toString("base64url")],
    ["a time without microseconds", Buffer.from(`2025-01-31T12:00:00Z|${key.id}`).toString("base64url")],
    ["an impossible date", Buffer.from(`2025-02-30T12:00:00.000000Z|${key.id}`).toString("base64url")],
    ["an hour out of range", Buffer.from(`2025-01-31T25:00:00.000000Z|${key.id}`).toString("base64url")],
    ["very long", "A".repeat(5000)],
  ])("refuses a cursor that is %s with a 400 naming cursor", (_label, cursor) => {
    expect(refused(() => decodeCursor(cursor))).toMatch(/^cursor /);
  });
});
