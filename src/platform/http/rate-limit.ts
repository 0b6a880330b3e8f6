import { once } from "node:events";
import rateLimit, { normalizeIP } from "@fastify/rate-limit";
import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import { Redis, type RedisOptions } from "ioredis";
import { RateLimited } from "../../domain/errors.ts";

// D9: per API key, fixed window, sandbox and live limits. Only key-authenticated requests are
// counted and labelled. Failed authentication is limited per client address (auth.ts decides
// what counts). Both live in one store: Redis when REDIS_URL is set (shared by every instance),
// else in process. A store that does not answer fails open: the request is served unlimited and
// a warning is logged, because an outage of the limiter must not become an outage of the API.

export interface RateLimitOptions {
  windowMs: number;
  sandbox: number;
  live: number;
  redisUrl: string | undefined;
}

/** Failed authentications allowed per client address per window (issue 20). */
export const AUTH_FAILURES = { max: 20, windowMs: 60_000 };

const REDIS_OPTIONS: RedisOptions = {
  // While disconnected a command fails at once instead of waiting in a queue for a reconnect.
  enableOfflineQueue: false,
  connectTimeout: 1_000,
  // A Redis that accepted the connection but does not answer holds a request at most this long.
  commandTimeout: 500,
  maxRetriesPerRequest: 1,
};

const WARN_EVERY_MS = 60_000;

/** Logs a store outage once a minute at most, with how many failures it stands for; and the recovery. */
class OutageLog {
  readonly #log: FastifyBaseLogger;
  #down = false;
  #lastWarning = 0;
  #unreported = 0;

  constructor(log: FastifyBaseLogger) {
    this.#log = log;
  }

  failed(err: unknown): void {
    this.#down = true;
    this.#unreported++;
    const now = Date.now();
    if (now - this.#lastWarning < WARN_EVERY_MS) return;
    this.#lastWarning = now;
    this.#log.warn(
      { err: err instanceof Error ? err.message : String(err), failures: this.#unreported },
      "Redis is not answering: rate limits and failed-authentication limits are not enforced until it is back",
    );
    this.#unreported = 0;
  }

  recovered(): void {
    if (!this.#down) return;
    this.#down = false;
    this.#lastWarning = 0;
    this.#log.info("Redis is answering again: rate limits are enforced");
  }
}

export async function registerRateLimit(app: FastifyInstance, options: RateLimitOptions): Promise<void> {
  const outage = new OutageLog(app.log);
  const redis = options.redisUrl ? await connectRedis(app, options.redisUrl, outage) : undefined;

  // `global: false`: the plugin adds no hook of its own; the hooks below consult its store and
  // handle a store error themselves (the plugin's choice is a 500 or a silent skip).
  await app.register(rateLimit, {
    global: false,
    timeWindow: options.windowMs,
    redis,
    nameSpace: "svc-rl:",
    skipOnError: false,
    keyGenerator: (request) => (request.principal?.kind === "key" ? request.principal.keyId : "anonymous"),
    max: (request) =>
      request.principal?.kind === "key" && request.principal.environment === "live"
        ? options.live
        : options.sandbox,
  });
  const perKey = app.createRateLimit();
  const failures = app.createRateLimit({
    max: AUTH_FAILURES.max,
    timeWindow: AUTH_FAILURES.windowMs,
    keyGenerator: (request) => `auth-failures:${normalizeIP(request.ip)}`,
  });

  /** The store's answer, or null (logged) when it failed: the request then goes through. */
  async function consult<T>(call: () => Promise<T>): Promise<T | null> {
    try {
      const result = await call();
      outage.recovered();
      return result;
    } catch (err) {
      outage.failed(err);
      return null;
    }
  }

  app.failedAuthLimiter = {
    // An address that has used up its failures is limited: its next attempt would be refused.
    retryAfter: async (request) => {
      const state = await consult(() => failures(request, { increment: false }));
      return state && !state.isAllowed && state.remaining === 0 ? Math.max(1, state.ttlInSeconds) : null;
    },
    fail: async (request) => {
      const state = await consult(() => failures(request));
      return state && !state.isAllowed && state.isExceeded ? Math.max(1, state.ttlInSeconds) : null;
    },
  };

  // Before the body is read: a key's malformed (400), oversized (413) or mistyped (415) bodies
  // are counted and labelled like any other request of that key.
  app.addHook("preParsing", async (request, reply) => {
    if (request.principal?.kind !== "key") return;
    const state = await consult(() => perKey(request));
    if (!state || state.isAllowed) return;
    // The interface promises the reset as a Unix timestamp (the plugin counts seconds from now).
    reply.header("x-ratelimit-limit", state.max);
    reply.header("x-ratelimit-remaining", state.remaining);
    reply.header("x-ratelimit-reset", Math.ceil((Date.now() + state.ttl) / 1000));
    if (state.isExceeded) {
      throw new RateLimited("Rate limit exceeded", state.ttlInSeconds);
    }
  });
}

/**
 * The client, once connected (or after its first failure, logged: the service starts anyway and
 * limits as soon as Redis answers). It reconnects on its own; errors are reported to `outage`.
 */
async function connectRedis(app: FastifyInstance, url: string, outage: OutageLog): Promise<Redis> {
  const redis = new Redis(url, REDIS_OPTIONS);
  redis.on("error", (err) => outage.failed(err));
  redis.on("ready", () => outage.recovered());
  try {
    await once(redis, "ready", { signal: AbortSignal.timeout(REDIS_OPTIONS.connectTimeout ?? 1_000) });
  } catch (err) {
    outage.failed(err);
  }
  app.addHook("onClose", async () => {
    // QUIT needs a connection that answers; without one there is nothing to close politely.
    try {
      if (redis.status === "ready") await redis.quit();
    } catch (err) {
      app.log.warn({ err }, "Redis did not answer QUIT; disconnecting");
    } finally {
      redis.disconnect();
    }
  });
  return redis;
}
