import { describe, expect, it } from "vitest";
import { addressBucket, delayAfter, waitText } from "./login.ts";

describe("addressBucket", () => {
  it("keeps an IPv4 address, also when written IPv4-mapped", () => {
    expect(addressBucket("203.0.113.7")).toBe("203.0.113.7");
    expect(addressBucket("::ffff:203.0.113.7")).toBe("203.0.113.7");
  });

  it("puts every address of one IPv6 /64 in one bucket, and other /64s in others", () => {
    const a = addressBucket("2001:db8:1:2:aaaa::1");
    expect(addressBucket("2001:db8:1:2:ffff:ffff:ffff:ffff")).toBe(a);
    expect(addressBucket("2001:db8:1:3::1")).not.toBe(a);
    expect(a).toBe("2001:db8:1:2::/64");
  });

  it("keeps what is not an address as it is", () => {
    expect(addressBucket("unknown")).toBe("unknown");
  });
});

describe("delayAfter", () => {
  it("is 0 while failures are free, then 30 s doubling at each failure, at most 15 minutes", () => {
    expect([0, 4].map((n) => delayAfter(n, 5))).toEqual([0, 0]);
    expect([5, 6, 7, 8, 9, 10].map((n) => delayAfter(n, 5) / 1000)).toEqual([30, 60, 120, 240, 480, 900]);
    expect(delayAfter(11, 5)).toBe(900_000);
    expect(delayAfter(10_000, 5)).toBe(900_000);
    expect(delayAfter(20, 20)).toBe(30_000);
  });
});

describe("waitText", () => {
  it("says seconds under a minute, whole minutes rounded up above", () => {
    expect(waitText(1)).toBe("1 second");
    expect(waitText(30)).toBe("30 seconds");
    expect(waitText(60)).toBe("1 minute");
    expect(waitText(61)).toBe("2 minutes");
    expect(waitText(900)).toBe("15 minutes");
  });
});
