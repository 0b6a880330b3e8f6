import dns from "node:dns";
import net from "node:net";

// A safety net for tests that hand out private and link-local addresses on purpose (the outbound
// guard's tests): while it is installed, no socket of this test worker connects anywhere but
// loopback, and no name is sent to a DNS server. Whatever the code under test does, a connection
// to another address fails before its first packet, and is recorded so the test can assert that
// none was even tried. Only the worker that installs it is affected (vitest isolates test files).

type LookupFunction = net.LookupFunction;
type Connect = (this: net.Socket, ...args: unknown[]) => net.Socket;

const LOOPBACK_NAMES = new Set(["localhost"]);

function isLoopback(address: string): boolean {
  const v4 = address.startsWith("::ffff:") ? address.slice(7) : address;
  return net.isIPv4(v4) ? v4.startsWith("127.") : address === "::1";
}

export interface LoopbackOnly {
  /** Every connection or system DNS lookup that was refused, e.g. "connect 10.0.0.5:8080". */
  readonly refused: string[];
  uninstall(): void;
}

function refusal(what: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`test safety net: refused ${what} (loopback only)`), {
    code: "ETESTLOOPBACKONLY",
  });
}

/** The system resolver, used here for "localhost" only (answered from /etc/hosts). */
const systemLookup: LookupFunction = (hostname, options, callback) => {
  if (options.all) {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => callback(err, addresses));
  } else {
    dns.lookup(hostname, { ...options, all: false }, (err, address, family) =>
      callback(err, address, family),
    );
  }
};

// The one untyped boundary: the overloaded Socket.prototype.connect is swapped for a plain function
// that sees its arguments as net.connect() normalised them, and restored afterwards.
const socketPrototype = net.Socket.prototype as unknown as { connect: Connect };

export function installLoopbackOnly(): LoopbackOnly {
  const refused: string[] = [];
  const original = socketPrototype.connect;

  /** Wraps the socket's lookup so that an answer other than loopback never reaches connect(). */
  const checkedLookup =
    (inner: LookupFunction | undefined, port: unknown): LookupFunction =>
    (hostname, options, callback) => {
      if (!inner && !LOOPBACK_NAMES.has(hostname)) {
        refused.push(`dns ${hostname}`);
        callback(refusal(`a DNS lookup of ${hostname}`), options.all ? [] : "", 4);
        return;
      }
      (inner ?? systemLookup)(hostname, options, (err, address, family) => {
        if (err) return callback(err, address, family);
        const answers = Array.isArray(address) ? address.map((a) => a.address) : [address];
        const outside = answers.find((a) => !isLoopback(a));
        if (outside !== undefined) {
          refused.push(`connect ${outside}:${String(port)}`);
          return callback(refusal(`a connection to ${outside} (${hostname})`), options.all ? [] : "", 4);
        }
        return callback(null, address, family);
      });
    };

  const guarded: Connect = function (this: net.Socket, ...args: unknown[]) {
    const first = args[0];
    const options = (Array.isArray(first) ? first[0] : first) as net.TcpNetConnectOpts | number | string;
    if (typeof options === "object" && options !== null && !("path" in options && options.path)) {
      const host = options.host ?? "localhost";
      if (net.isIP(host)) {
        if (!isLoopback(host)) {
          refused.push(`connect ${host}:${options.port}`);
          process.nextTick(() => this.destroy(refusal(`a connection to ${host}`)));
          return this;
        }
      } else {
        options.lookup = checkedLookup(options.lookup, options.port);
      }
    } else if (typeof options !== "object") {
      const host = typeof args[1] === "string" ? args[1] : "localhost";
      if (!LOOPBACK_NAMES.has(host) && !(net.isIP(host) && isLoopback(host))) {
        refused.push(`connect ${host}:${String(options)}`);
        process.nextTick(() => this.destroy(refusal(`a connection to ${host}`)));
        return this;
      }
    }
    return original.apply(this, args);
  };
  socketPrototype.connect = guarded;
  return {
    refused,
    uninstall: () => {
      socketPrototype.connect = original;
    },
  };
}
