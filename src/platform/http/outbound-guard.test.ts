import { describe, expect, it } from "vitest";
import {
  assertLiteralHostAllowed,
  BlockedDestinationError,
  guardedLookup,
  isPublicAddress,
} from "./outbound-guard.ts";

describe("isPublicAddress", () => {
  it.each([
    "127.0.0.1",
    "127.1.2.3",
    "10.0.0.1",
    "172.16.5.4",
    "192.168.1.1",
    "169.254.169.254", // cloud metadata
    "100.64.0.1",
    "0.0.0.0",
    "255.255.255.255",
    "224.0.0.1",
    "::1",
    "::",
    "fe80::1",
    "fd00::1",
    "fd00:ec2::254",
    "ff02::1",
    "::ffff:127.0.0.1", // IPv4-mapped IPv6
    "::ffff:7f00:1",
    "::ffff:10.0.0.1",
    "::ffff:169.254.169.254",
    "64:ff9b::a00:1", // NAT64 of 10.0.0.1
    "0177.0.0.1", // octal
    "0x7f.0.0.1", // hex
    "2130706433", // decimal
    "not an ip",
  ])("refuses %s", (address) => {
    expect(isPublicAddress(address)).toBe(false);
  });

  it.each(["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700::1111", "::ffff:8.8.8.8"])(
    "allows %s",
    (address) => {
      expect(isPublicAddress(address)).toBe(true);
    },
  );
});

describe("assertLiteralHostAllowed", () => {
  it.each([
    "http://127.0.0.1/hook",
    "http://2130706433/hook", // decimal form, normalised by the URL parser
    "http://0177.0.0.1/hook", // octal form
    "http://0x7f.1/hook",
    "http://[::1]/hook",
    "http://[::ffff:127.0.0.1]/hook",
    "http://169.254.169.254/latest/meta-data",
    "http://localhost:8080/",
    "http://api.localhost/",
  ])("refuses %s", (url) => {
    expect(() => assertLiteralHostAllowed(new URL(url))).toThrow(BlockedDestinationError);
  });

  it("lets names through (they are checked when they resolve) and public literals", () => {
    expect(() => assertLiteralHostAllowed(new URL("https://example.com/hook"))).not.toThrow();
    expect(() => assertLiteralHostAllowed(new URL("https://8.8.8.8/hook"))).not.toThrow();
  });
});

describe("guardedLookup", () => {
  it("refuses a name that resolves to loopback", async () => {
    const err = await new Promise<Error | null>((resolve) =>
      guardedLookup("localhost", {}, (e) => resolve(e)),
    );
    expect(err).toBeInstanceOf(BlockedDestinationError);
  });
});
