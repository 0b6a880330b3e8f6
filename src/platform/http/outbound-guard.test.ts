import type { LookupAddress } from "node:dns";
import { describe, expect, it } from "vitest";
import {
  assertLiteralHostAllowed,
  BlockedDestinationError,
  type DestinationPolicy,
  destinationPolicy,
  guardedLookup,
  isAllowedAddress,
  isPublicAddress,
  outboundErrorText,
  type Resolver,
} from "./outbound-guard.ts";

// Pure checks and a lookup fed by a test resolver: nothing here opens a socket or asks a DNS server.

const NEVER_LOOPBACK = [
  "10.0.0.1",
  "10.0.0.5",
  "172.16.5.4",
  "192.168.1.1",
  "169.254.169.254", // cloud metadata
  "169.254.0.1",
  "100.64.0.1", // CGNAT
  "0.0.0.0",
  "255.255.255.255",
  "224.0.0.1",
  "192.0.2.1", // documentation
  "::",
  "fe80::1",
  "fd00::1",
  "fd00:ec2::254", // AWS metadata over IPv6
  "ff02::1",
  "::ffff:10.0.0.1", // IPv4-mapped IPv6
  "::ffff:169.254.169.254",
  "::a9fe:a9fe", // IPv4-compatible IPv6 (::/96) of 169.254.169.254
  "::10.0.0.1",
  "::7f00:1", // IPv4-compatible form of 127.0.0.1: not loopback to the kernel
  "::8.8.8.8", // the whole of ::/96: deprecated, never a real destination
  "64:ff9b::a00:1", // NAT64 of 10.0.0.1
  "64:ff9b:1::a9fe:a9fe", // local-use NAT64
  "2002:a9fe:a9fe::1", // 6to4 of 169.254.169.254
  "2001:0:4136:e378:8000:63bf:3fff:fdd2", // Teredo
  "not an ip",
];

const LOOPBACK = ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "::ffff:7f00:1"];

describe("isPublicAddress", () => {
  it.each([...NEVER_LOOPBACK, ...LOOPBACK, "0177.0.0.1", "0x7f.0.0.1", "2130706433"])(
    "refuses %s",
    (address) => {
      expect(isPublicAddress(address)).toBe(false);
    },
  );

  it.each(["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700::1111", "::ffff:8.8.8.8"])(
    "allows %s",
    (address) => {
      expect(isPublicAddress(address)).toBe(true);
    },
  );
});

describe("isAllowedAddress per policy (D7, D21)", () => {
  it.each([...LOOPBACK, ...NEVER_LOOPBACK])("public (both environments) refuses %s", (address) => {
    expect(isAllowedAddress(address, "public")).toBe(false);
  });

  it("public allows public addresses; `any` allows everything that is an address", () => {
    expect(isAllowedAddress("8.8.8.8", "public")).toBe(true);
    expect(isAllowedAddress("2606:4700::1111", "public")).toBe(true);
    for (const address of ["10.0.0.1", "127.0.0.1", "::1", "169.254.169.254"]) {
      expect(isAllowedAddress(address, "any")).toBe(true);
    }
    expect(isAllowedAddress("not an ip", "any")).toBe(false);
  });

  it("public unless WEBHOOK_ALLOW_PRIVATE, whatever the environment", () => {
    expect(destinationPolicy(false)).toBe("public");
    expect(destinationPolicy(true)).toBe("any");
  });
});

describe("assertLiteralHostAllowed", () => {
  function refusal(url: string): unknown {
    try {
      assertLiteralHostAllowed(new URL(url), "public");
    } catch (err) {
      return err;
    }
    return undefined;
  }

  it.each([
    "http://127.0.0.1/hook",
    "http://2130706433/hook", // decimal form, normalised by the URL parser
    "http://0177.0.0.1/hook", // octal form
    "http://0x7f.1/hook",
    "http://[::1]/hook",
    "http://[::ffff:127.0.0.1]/hook",
    "http://localhost:8080/",
    "http://api.localhost/",
    "http://169.254.169.254/latest/meta-data",
    "http://0251.0376.0251.0376/latest/meta-data", // octal form of 169.254.169.254
    "http://2852039166/latest/meta-data", // decimal form
    "http://10.0.0.5/hook",
    "http://192.168.1.10/hook",
    "http://100.64.0.1/hook",
    "http://0.0.0.0/hook",
    "http://[fd00::1]/hook",
    "http://[fe80::1]/hook",
    "http://[::ffff:10.0.0.5]/hook",
    "http://[::a9fe:a9fe]/hook",
    "http://[64:ff9b::a9fe:a9fe]/hook",
  ])("refuses %s as a blocked destination, and `any` lets it through", (url) => {
    const err = refusal(url);
    expect(err, url).toBeInstanceOf(BlockedDestinationError);
    expect((err as Error).message).toBe("blocked destination");
    expect(() => assertLiteralHostAllowed(new URL(url), "any")).not.toThrow();
  });

  it("lets names through (they are checked when they resolve) and public literals", () => {
    expect(refusal("https://example.com/hook")).toBeUndefined();
    expect(refusal("https://8.8.8.8/hook")).toBeUndefined();
  });
});

describe("guardedLookup with an injected resolver", () => {
  const answers: Record<string, string[]> = {
    "metadata.test": ["169.254.169.254"],
    "intranet.test": ["10.0.0.5"],
    "compat.test": ["::a9fe:a9fe"],
    "mapped.test": ["::ffff:10.0.0.5"],
    "receiver.test": ["127.0.0.1"],
    "mixed.test": ["127.0.0.1", "10.0.0.5"],
    "public.test": ["93.184.216.34", "2606:4700::1111"],
  };
  function resolver(): Resolver & { asked: string[] } {
    const asked: string[] = [];
    const resolve = async (hostname: string): Promise<LookupAddress[]> => {
      asked.push(hostname);
      const found = answers[hostname];
      if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
      return found.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
    };
    return Object.assign(resolve, { asked });
  }

  /** Calls the lookup the way a socket does, with or without `all`. */
  function lookup(
    policy: DestinationPolicy,
    resolve: Resolver,
    hostname: string,
    options: { all?: boolean; family?: number } = {},
  ): Promise<{ err: Error | null; address: string | LookupAddress[]; family?: number }> {
    return new Promise((done) =>
      guardedLookup(policy, resolve)(hostname, options, (err, address, family) =>
        done({ err, address, family }),
      ),
    );
  }

  it.each(["metadata.test", "intranet.test", "compat.test", "mapped.test", "mixed.test", "receiver.test"])(
    "%s is refused after asking the resolver, naming no address, and no address is handed to the socket",
    async (hostname) => {
      const resolve = resolver();
      for (const options of [{}, { all: true }]) {
        const { err, address } = await lookup("public", resolve, hostname, options);
        expect(err).toBeInstanceOf(BlockedDestinationError);
        expect(err?.message).toBe("blocked destination");
        expect(address).toEqual(options.all ? [] : "");
      }
      expect(resolve.asked).toEqual([hostname, hostname]);
    },
  );

  it("WEBHOOK_ALLOW_PRIVATE (`any`): a name resolving to loopback or a private address passes", async () => {
    const resolve = resolver();
    const loopback = await lookup("any", resolve, "receiver.test");
    expect(loopback.err).toBeNull();
    expect(loopback.address).toBe("127.0.0.1");
    expect(loopback.family).toBe(4);
    const mixed = await lookup("any", resolve, "mixed.test", { all: true });
    expect(mixed.err).toBeNull();
    expect(mixed.address).toHaveLength(2);
  });

  it("a public answer passes, filtered by the family the socket asked for", async () => {
    const resolve = resolver();
    const all = await lookup("public", resolve, "public.test", { all: true });
    expect(all.err).toBeNull();
    expect(all.address).toHaveLength(2);
    const v6 = await lookup("public", resolve, "public.test", { family: 6 });
    expect(v6.address).toBe("2606:4700::1111");
    expect(v6.family).toBe(6);
  });

  it("a resolver error is passed on as it is", async () => {
    const { err } = await lookup("public", resolver(), "unknown.test");
    expect(err).not.toBeInstanceOf(BlockedDestinationError);
    expect(err?.message).toMatch(/ENOTFOUND/);
  });
});

describe("outboundErrorText: what a delivery log may say", () => {
  it("a refusal is a blocked destination, also wrapped by the HTTP client", () => {
    expect(outboundErrorText(new BlockedDestinationError())).toBe("blocked destination");
    expect(outboundErrorText(new Error("fetch failed", { cause: new BlockedDestinationError() }))).toBe(
      "blocked destination",
    );
  });

  it("a system error by its code, without the address its message names", () => {
    const refused = Object.assign(new Error("connect ECONNREFUSED 10.1.2.3:8080"), {
      code: "ECONNREFUSED",
      address: "10.1.2.3",
    });
    expect(outboundErrorText(refused)).toBe("connection refused (ECONNREFUSED)");
    const odd = Object.assign(new Error("connect EPROTO 10.1.2.3:443"), { code: "EPROTO" });
    expect(outboundErrorText(new Error("request failed", { cause: odd }))).toBe("connection failed (EPROTO)");
  });

  it("any other error by its message", () => {
    expect(outboundErrorText(Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" }))).toBe(
      "other side closed",
    );
  });
});
