import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from "node:dns";
import { BlockList, isIP, type LookupFunction } from "node:net";
import ipaddr from "ipaddr.js";

// SSRF protection for outbound webhooks (D7, D21). A destination is checked twice: its URL when it
// is registered, and the address actually connected to at delivery time — the DNS answer is checked
// inside the socket's own lookup, before it connects, so a name that resolves to a public address
// at registration and to 169.254.169.254 later (DNS rebinding) is still refused.
//
// Both environments reach public addresses only: neither key may be a way into the operator's
// network, the host's loopback ports or the cloud's metadata service. WEBHOOK_ALLOW_PRIVATE=true
// lifts it (a local devnet setup). A refusal says "blocked destination" and nothing more: the
// address a name resolved to would tell a tenant about the operator's network.

export const BLOCKED_DESTINATION = "blocked destination";

export class BlockedDestinationError extends Error {
  override name = "BlockedDestinationError";
  readonly code = "EBLOCKEDDESTINATION";
  constructor() {
    super(BLOCKED_DESTINATION);
  }
}

export type DestinationPolicy = "public" | "any";

export function destinationPolicy(allowPrivate: boolean): DestinationPolicy {
  return allowPrivate ? "any" : "public";
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
  return policy === "any" || kind === "unicast";
}

/** Host of a URL as the WHATWG parser normalises it ("2130706433", "0177.0.0.1" → "127.0.0.1"), brackets removed. */
export function urlHost(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, "");
}

/** A literal IP host is checked here; a name is checked when it resolves (`guardedLookup`). */
export function assertLiteralHostAllowed(url: URL, policy: DestinationPolicy): void {
  if (policy === "any") return;
  const host = urlHost(url);
  if (isIP(host) && !isAllowedAddress(host, policy)) throw new BlockedDestinationError();
  // RFC 6761: localhost names are loopback whatever a resolver says.
  if (host === "localhost" || host.endsWith(".localhost")) throw new BlockedDestinationError();
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
        if (addresses.length === 0 || addresses.some((a) => !isAllowedAddress(a.address, policy))) {
          return refuse(new BlockedDestinationError());
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

/** Words for the system errors of a connection; their messages name the address connected to. */
const CONNECTION_ERRORS: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ECONNRESET: "connection reset",
  ETIMEDOUT: "connection timed out",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  ENOTFOUND: "host name not found",
  EAI_AGAIN: "host name lookup failed",
};

/**
 * What a tenant may read about a failed request to its destination: "blocked destination" for a
 * refusal, a system error by its code (its message would name the address a name resolved to),
 * anything else by its message.
 */
export function outboundErrorText(err: unknown): string {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "EBLOCKEDDESTINATION") return BLOCKED_DESTINATION;
    if (typeof code === "string" && /^E[A-Z_]+$/.test(code)) {
      return `${CONNECTION_ERRORS[code] ?? "connection failed"} (${code})`;
    }
  }
  if (!(err instanceof Error)) return String(err);
  return err.cause instanceof Error ? err.cause.message : err.message;
}
