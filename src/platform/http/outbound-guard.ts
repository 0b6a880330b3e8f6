import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { isIP } from "node:net";
import ipaddr from "ipaddr.js";

// SSRF protection for outbound webhooks (D7). A destination is checked twice: its URL when it is
// registered, and the address actually connected to at delivery time — the DNS answer is checked
// inside the socket's own lookup, so a name that resolves to a public address at registration and
// to 169.254.169.254 later (DNS rebinding) is still refused.

export class BlockedDestinationError extends Error {
  override name = "BlockedDestinationError";
  readonly code = "EBLOCKEDDESTINATION";
}

/** Only global unicast passes: loopback, private, link-local (cloud metadata), CGNAT, multicast, NAT64 … do not. */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === "ipv6") {
    const v6 = parsed as ipaddr.IPv6;
    if (v6.isIPv4MappedAddress()) parsed = v6.toIPv4Address();
  }
  return parsed.range() === "unicast";
}

/** Host of a URL as the WHATWG parser normalises it ("2130706433", "0177.0.0.1" → "127.0.0.1"), brackets removed. */
export function urlHost(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, "");
}

/** A literal IP host is checked here; a name is checked when it resolves (`guardedLookup`). */
export function assertLiteralHostAllowed(url: URL): void {
  const host = urlHost(url);
  if (isIP(host) && !isPublicAddress(host)) {
    throw new BlockedDestinationError(`destination address ${host} is not a public address`);
  }
  if (host === "localhost" || host.endsWith(".localhost")) {
    throw new BlockedDestinationError(`destination ${host} is not a public address`);
  }
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/** A drop-in for `dns.lookup` as sockets call it, refusing answers that are not public addresses. */
export function guardedLookup(
  hostname: string,
  options: { all?: boolean; family?: number | string },
  callback: LookupCallback,
): void {
  dnsLookup(hostname, { ...options, all: true } as { all: true }, (err, addresses) => {
    if (err) return callback(err, []);
    const blocked = addresses.find((a) => !isPublicAddress(a.address));
    if (blocked || addresses.length === 0) {
      return callback(
        new BlockedDestinationError(
          `${hostname} resolves to ${blocked?.address ?? "nothing"}, which is not a public address`,
        ),
        [],
      );
    }
    if (options.all) return callback(null, addresses);
    const first = addresses[0] as LookupAddress;
    return callback(null, first.address, first.family);
  });
}
