import pino, { type LoggerOptions } from "pino";
import type { Config } from "../../config.ts";
import { currentRequestId } from "../http/request-id.ts";

// Logged errors must not carry credentials that live in URLs. RPC, bundler and paymaster service
// URLs often hold the provider's API key in their path or query (…/v2/KEY, ?apikey=KEY), and viem puts the whole URL
// into an error's message, details and stack ("URL: https://…"); database, Redis and SMTP URLs
// carry passwords. Every network URL in a logged error keeps its scheme and host, and the rest
// (user info, path, query) becomes "…"; the secret-looking parts of the configured URLs are
// also removed wherever else they appear. `file://` URLs (stack frames) are left alone.

/** scheme://authority, then whatever path, query or fragment follows up to a space or a quote. */
const NETWORK_URL =
  /\b(https?|wss?|postgres(?:ql)?|rediss?|smtps?):\/\/([^\s/?#"'`<>\\]*)([/?#][^\s"'`<>\\]*)?/gi;
/** Shorter path segments and query values ("v2", "rpc", "mainnet") identify nothing secret. */
const MIN_SECRET_LENGTH = 8;

export type Scrub = (text: string) => string;

/** Removes the credentials of URLs from `text`; `secrets` are further strings never to show. */
export function scrubUrls(text: string, secrets: readonly string[] = []): string {
  let out = text;
  for (const secret of secrets) if (out.includes(secret)) out = out.replaceAll(secret, "…");
  return out.replace(NETWORK_URL, (_match, scheme: string, authority: string, rest: string | undefined) => {
    const host = authority.slice(authority.lastIndexOf("@") + 1);
    const tail = rest === undefined || rest === "/" ? (rest ?? "") : "/…";
    return `${scheme}://${host}${tail}`;
  });
}

/** The URLs the service is configured with, whose credentials must never reach a log line. */
export function configuredUrls(config: Config): string[] {
  const urls: Array<string | undefined> = [
    config.databaseUrl,
    config.redisUrl,
    config.smtpUrl,
    config.card.apiBase,
  ];
  for (const network of [...config.networks.sandbox, ...config.networks.live]) {
    const paymaster = network.accountAbstraction?.paymaster;
    urls.push(network.rpcUrl, network.accountAbstraction?.bundlerUrl);
    if (paymaster?.kind === "service") urls.push(paymaster.url);
  }
  return urls.filter((url): url is string => url !== undefined);
}

/** The parts of `urls` that may be credentials: user info, long path segments and query values. */
export function urlSecrets(urls: readonly string[]): string[] {
  const secrets = new Set<string>();
  const add = (value: string) => {
    if (value.length < MIN_SECRET_LENGTH) return;
    secrets.add(value);
    try {
      secrets.add(decodeURIComponent(value));
    } catch {
      // not percent-encoded text: the raw form is enough
    }
  };
  for (const text of urls) {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      continue;
    }
    add(url.username);
    add(url.password);
    for (const segment of url.pathname.split("/")) add(segment);
    for (const value of url.searchParams.values()) add(value);
  }
  // Longest first, so that a secret containing another is removed whole.
  return [...secrets].sort((a, b) => b.length - a.length);
}

export function urlScrubber(config: Config | undefined): Scrub {
  const secrets = config ? urlSecrets(configuredUrls(config)) : [];
  return (text) => scrubUrls(text, secrets);
}

/** Every string inside a serialized value, scrubbed (bounded depth, cycles cut). */
export function scrubDeep(value: unknown, scrub: Scrub, depth = 0, seen = new WeakSet<object>()): unknown {
  if (typeof value === "string") return scrub(value);
  if (value === null || typeof value !== "object") return value;
  if (depth >= 8) return "[Object]";
  if (seen.has(value)) return "[Circular]";
  seen.add(value);
  if (Array.isArray(value)) return value.map((item) => scrubDeep(item, scrub, depth + 1, seen));
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) out[key] = scrubDeep(item, scrub, depth + 1, seen);
  return out;
}

/** pino's standard error serializer (type, message and stack with causes, own fields), scrubbed. */
export function errorSerializer(scrub: Scrub): (err: unknown) => unknown {
  return (err) => scrubDeep(err instanceof Error ? pino.stdSerializers.err(err) : err, scrub);
}

/**
 * The message of a log call, scrubbed: Fastify logs a failed request with the error's message as
 * the line's message, and pino makes an error's message the line's when none is given
 * (`log.error(err)`, `log.error({ err })`): that one is given here, scrubbed.
 */
export function scrubLogArguments(args: readonly unknown[], scrub: Scrub): unknown[] {
  const out = args.map((arg) => (typeof arg === "string" ? scrub(arg) : arg));
  if (args.length !== 1) return out;
  const [first] = args;
  const err = first instanceof Error ? first : (first as { err?: unknown } | null)?.err;
  if (err instanceof Error) out.push(scrub(err.message));
  return out;
}

/** Query values that are credentials (the token of the link confirming an admin e-mail). */
const SECRET_QUERY = /([?&]token=)[^&#]*/gi;

/** A request's URL as logged: credentials in its query string become "…". */
export function scrubRequestUrl(url: string): string {
  return url.replace(SECRET_QUERY, "$1…");
}

/** The request as Fastify logs it (its own serializer's fields), its URL scrubbed. */
interface LoggedRequest {
  method: string;
  url: string;
  host?: string | undefined;
  ip?: string | undefined;
  headers?: Record<string, unknown>;
  socket?: { remotePort?: number | undefined } | undefined;
}

function requestSerializer(req: LoggedRequest): Record<string, unknown> {
  return {
    method: req.method,
    url: scrubRequestUrl(req.url),
    version: req.headers?.["accept-version"],
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  };
}

/** The service's logger options (Fastify's `logger`, the CLI's pino). */
export function loggerOptions(config: Config): LoggerOptions {
  const scrub = urlScrubber(config);
  return {
    level: config.logLevel,
    // Keys and secrets travel in headers and bodies: never log either.
    redact: ["req.headers.authorization", "req.headers.cookie", "req.body"],
    serializers: { err: errorSerializer(scrub), req: requestSerializer },
    // A line written while a request is handled names it, also from the services' logger;
    // Fastify's request logger binds the id itself.
    mixin(_object, _level, logger) {
      const reqId = currentRequestId();
      return reqId !== undefined && !("reqId" in logger.bindings()) ? { reqId } : {};
    },
    hooks: {
      logMethod(args, method) {
        method.apply(this, scrubLogArguments(args, scrub) as Parameters<typeof method>);
      },
    },
  };
}
