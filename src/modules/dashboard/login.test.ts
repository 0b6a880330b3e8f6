import { describe, expect, it } from "vitest";
import { addressBucket } from "./login.ts";

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
