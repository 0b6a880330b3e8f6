import rateLimit from "@fastify/rate-limit";
import type { FastifyInstance } from "fastify";
import { Redis } from "ioredis";
import { ApiError } from "./errors.ts";

// D9: per API key, fixed window, sandbox and live limits. Only key-authenticated requests are
// counted and labelled. The plugin reports the reset as seconds-from-now; the interface promises
// a Unix timestamp, so it is rewritten on the way out.

export interface RateLimitOptions {
  windowMs: number;
  sandbox: number;
  live: number;
  redisUrl: string | undefined;
}

export async function registerRateLimit(app: FastifyInstance, options: RateLimitOptions): Promise<void> {
  const redis = options.redisUrl
    ? new Redis(options.redisUrl, { maxRetriesPerRequest: 2, enableOfflineQueue: true, lazyConnect: false })
    : undefined;
  if (redis) app.addHook("onClose", async () => void (await redis.quit()));

  await app.register(rateLimit, {
    global: true,
    // Before the body is read: a key's malformed (400), oversized (413) or mistyped (415) bodies
    // are counted and labelled like any other request of that key.
    hook: "preParsing",
    timeWindow: options.windowMs,
    redis,
    nameSpace: "svc-rl:",
    skipOnError: false,
    allowList: (request) => request.principal?.kind !== "key",
    keyGenerator: (request) => (request.principal?.kind === "key" ? request.principal.keyId : "anonymous"),
    max: (request) =>
      request.principal?.kind === "key" && request.principal.environment === "live"
        ? options.live
        : options.sandbox,
    errorResponseBuilder: () => new ApiError(429, "Rate limit exceeded"),
  });

  app.addHook("onSend", async (_request, reply, payload) => {
    const reset = reply.getHeader("x-ratelimit-reset");
    if (reset !== undefined) {
      reply.header("x-ratelimit-reset", Math.ceil(Date.now() / 1000) + Number(reset));
    }
    return payload;
  });
}
