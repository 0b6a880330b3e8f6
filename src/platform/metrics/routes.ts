import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import { tooManyFailures } from "../http/auth.ts";
import { constantTimeEqual } from "../secrets/hashing.ts";
import type { Metrics } from "./metrics.ts";

// Where Prometheus reads the metrics: at /metrics on the service's port with the bearer
// METRICS_TOKEN, and/or on a listener of their own (METRICS_PORT, loopback by default), which
// answers /metrics to anyone who can reach it. With neither configured, /metrics does not exist.

/** Times every request by its route pattern (never its path: ids would be labels) and serves /metrics. */
export function registerMetrics(http: FastifyInstance, metrics: Metrics, token: string | undefined): void {
  if (!metrics.enabled) return;
  http.addHook("onResponse", (request, reply, done) => {
    metrics.httpRequest(request.method, request.routeOptions.url, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
  if (token === undefined) return;
  http.get("/metrics", { config: { auth: "none" }, schema: { hide: true } }, async (request, reply) => {
    const header = request.headers.authorization;
    const given = /^Bearer (.+)$/.exec(header ?? "")?.[1];
    // The token is chosen by the operator and may be guessable: a wrong one counts toward the
    // client address's failed-authentication limit (auth.ts), shared with API keys and the admin
    // secret; from an address over the limit even the right one is not checked (429 either way).
    const limiter = http.failedAuthLimiter;
    if (given !== undefined && constantTimeEqual(given, token)) {
      const wait = await limiter?.retryAfter(request);
      if (wait) throw tooManyFailures(wait);
      return reply.type(metrics.registry.contentType).send(await metrics.registry.metrics());
    }
    // No Authorization header at all guesses nothing and is not counted.
    if (header !== undefined) {
      const wait = await limiter?.fail(request);
      if (wait) throw tooManyFailures(wait);
    }
    return reply
      .status(401)
      .header("www-authenticate", "Bearer")
      .send({ error: "Metrics need the bearer METRICS_TOKEN" });
  });
}

/** The metrics' own listener (METRICS_PORT on METRICS_HOST): /metrics, nothing else. */
export async function startMetricsServer(
  metrics: Metrics,
  host: string,
  port: number,
): Promise<{ server: Server; url: string; close(): Promise<void> }> {
  const server = createServer((request, response) => {
    const path = (request.url ?? "").split("?")[0];
    if (request.method !== "GET" || path !== "/metrics") {
      response.writeHead(404, { "content-type": "application/json" }).end('{"error":"Not found"}');
      return;
    }
    metrics.registry.metrics().then(
      (text) => response.writeHead(200, { "content-type": metrics.registry.contentType }).end(text),
      (err: unknown) => {
        response
          .writeHead(500, { "content-type": "application/json" })
          .end(JSON.stringify({ error: `Metrics could not be read: ${(err as Error).message}` }));
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  return {
    server,
    url: `http://${address.family === "IPv6" ? `[${address.address}]` : address.address}:${address.port}/metrics`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
