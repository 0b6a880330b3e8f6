import type { FastifyInstance } from "fastify";

// HTTP Strict Transport Security (D21). When the public URL (PUBLIC_BASE_URL) is https, clients
// reach the service over HTTPS (usually through a TLS-terminating proxy, so the request we see
// may be plain http): every answer then tells browsers to use HTTPS only for this host, for a
// year. Subdomains are not included (they may be other services of the operator), nor is the
// host offered for preloading. Over a plain-http public URL nothing is sent: browsers ignore the
// header there anyway.

export const HSTS_VALUE = "max-age=31536000";

/** Whether clients reach the service over HTTPS: its public URL says so. */
export function servedOverHttps(publicBaseUrl: string): boolean {
  return new URL(publicBaseUrl).protocol === "https:";
}

export function registerHsts(app: FastifyInstance, publicBaseUrl: string): void {
  if (!servedOverHttps(publicBaseUrl)) return;
  app.addHook("onRequest", async (_request, reply) => {
    reply.header("strict-transport-security", HSTS_VALUE);
  });
}
