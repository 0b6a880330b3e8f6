import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { FastifyInstance } from "fastify";

// Every request has an id: the client's X-Request-Id when it is a safe token (a load balancer's
// or a client's trace id), a new UUID otherwise. It is echoed in the response's X-Request-Id and
// carried by every log line written while the request is handled, also by the services' logger
// (an AsyncLocalStorage read by the logger's mixin, platform/log/scrub.ts).

const SAFE_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const current = new AsyncLocalStorage<string>();

/** Fastify's genReqId. */
export function requestIdOf(request: IncomingMessage): string {
  const given = request.headers["x-request-id"];
  return typeof given === "string" && SAFE_ID.test(given) ? given : randomUUID();
}

/** The id of the request whose handling is running now, if any. */
export function currentRequestId(): string | undefined {
  return current.getStore();
}

export function registerRequestId(http: FastifyInstance): void {
  // Everything after these hooks (the other hooks, the handler and all they await) runs with the
  // id. Twice, because reading a body continues from the socket's events, outside the first.
  http.addHook("onRequest", (request, reply, done) => {
    reply.header("x-request-id", request.id);
    current.run(request.id, done);
  });
  http.addHook("preHandler", (request, _reply, done) => {
    current.run(request.id, done);
  });
}
