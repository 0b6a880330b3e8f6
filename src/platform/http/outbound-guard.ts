import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from "node:dns";
import { BlockList, isIP, type LookupFunction } from "node:net";
import ipaddr from "ipaddr.js";

// SSRF protection for outbound webhooks (D7). A destination is checked twice: its URL when it is
// registered, and the address actually connected to at delivery time — the DNS answer is checked
// inside the socket's own lookup, before it connects, so a name that resolves to a public address
// at registration and to 169.254.169.254 later (DNS rebinding) is still refused.
//
// Live reaches public addresses only. Sandbox also reaches loopback (local development), and no
// other non-public address: a test key must not be a way into the operator's network or the
// cloud's metadata service. WEBHOOK_ALLOW_PRIVATE=true lifts both (a local devnet setup).

export class BlockedDestinationError extends Error {
  override name = "BlockedDestinationError";
  readonly code = "EBLOCKEDDESTINATION";
}

export type DestinationPolicy = "public" | "public-or-loopback" | "any";

export function destinationPolicy(environment: "sandbox" | "live", allowPrivate: boolean): DestinationPolicy {
  if (allowPrivate) return "any";
  return environment === "live" ? "public" : "public-or-loopback";
}

// IPv4-compatible IPv6 (::/96, deprecated): ipaddr.js calls it unicast (and reads the text form
// "::a.b.c.d" as IPv4-mapped), but it is never a real destination. Checked with the kernel's own
// parser (inet_pton); only ::1 in it is loopback.
const IPV4_COMPATIBLE = new BlockList();
IPV4_COMPATIBLE.addSubnet("::", 96, "ipv6");
const IPV6_LOOPBACK = new BlockList();
IPV6_LOOPBACK.addAddress("::1", "ipv6");

/** The range of an address as the kernel would reach it (IPv4-mapped IPv6 is IPv4); null if not an address. */
function range(address: string): string | null {
  const version = isIP(address);
  if (version === 0) return null;
  if (version === 6 && IPV4_COMPATIBLE.check(address, "ipv6")) {
    return IPV6_LOOPBACK.check(address, "ipv6") ? "loopback" : "ipv4Compatible";
  }
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === "ipv6" && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    return (parsed as ipaddr.IPv6).toIPv4Address().range();
  }
  return parsed.range();
}

/** Only global unicast passes: loopback, private, link-local (cloud metadata), CGNAT, multicast, NAT64 … do not. */
export function isPublicAddress(address: string): boolean {
  return range(address) === "unicast";
}

export function isAllowedAddress(address: string, policy: DestinationPolicy): boolean {
  const kind = range(address);
  if (kind === null) return false;
  return policy === "any" || kind === "unicast" || (policy === "public-or-loopback" && kind === "loopback");
}

function allowedKind(policy: DestinationPolicy): string {
  return policy === "public" ? "a public address" : "a public or loopback address";
}

/** Host of a URL as the WHATWG parser normalises it ("2130706433", "0177.0.0.1" → "127.0.0.1"), brackets removed. */
export function urlHost(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, "");
}

/** A literal IP host is checked here; a name is checked when it resolves (`guardedLookup`). */
export function assertLiteralHostAllowed(url: URL, policy: DestinationPolicy): void {
  if (policy === "any") return;
  const host = urlHost(url);
  if (isIP(host) && !isAllowedAddress(host, policy)) {
    throw new BlockedDestinationError(`destination address ${host} is not ${allowedKind(policy)}`);
  }
  // RFC 6761: localhost names are loopback whatever a resolver says.
  if (policy === "public" && (host === "localhost" || host.endsWith(".localhost"))) {
    throw new BlockedDestinationError(`destination ${host} is not a public address`);
  }
}

/**
 * Every address a name resolves to, given the socket's lookup options (family, hints). Injected in
 * tests, which map made-up names to the addresses they need.
 */
export type Resolver = (hostname: string, options?: LookupOptions) => Promise<LookupAddress[]>;

export const systemResolver: Resolver = (hostname, options = {}) =>
  new Promise((resolve, reject) =>
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) =>
      err ? reject(err) : resolve(addresses),
    ),
  );

function wantedFamily(family: number | string | undefined): 4 | 6 | undefined {
  if (family === 4 || family === "IPv4") return 4;
  if (family === 6 || family === "IPv6") return 6;
  return undefined;
}

/**
 * A drop-in for `dns.lookup` as sockets call it: resolves with `resolve` and refuses the name when
 * any of its addresses is not allowed by `policy`, so the socket is never given one to connect to.
 */
export function guardedLookup(policy: DestinationPolicy, resolve: Resolver = systemResolver): LookupFunction {
  return (hostname, options, callback) => {
    const refuse = (err: NodeJS.ErrnoException) => callback(err, options.all ? [] : "");
    resolve(hostname, options).then(
      (addresses) => {
        const blocked = addresses.find((a) => !isAllowedAddress(a.address, policy));
        if (blocked || addresses.length === 0) {
          const what = blocked?.address ?? "nothing";
          return refuse(
            new BlockedDestinationError(
              `${hostname} resolves to ${what}, which is not ${allowedKind(policy)}`,
            ),
          );
        }
        const family = wantedFamily(options.family);
        const usable = family ? addresses.filter((a) => a.family === family) : addresses;
        const first = usable[0];
        if (!first) {
          return refuse(
            Object.assign(new Error(`${hostname} has no IPv${family} address`), { code: "ENOTFOUND" }),
          );
        }
        if (options.all) return callback(null, usable);
        return callback(null, first.address, first.family);
      },
      (err: NodeJS.ErrnoException) => refuse(err),
    );
  };
}
