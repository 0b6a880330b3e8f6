import type { FastifyInstance, FastifyRequest } from "fastify";
import type { InFlight } from "../concurrency/in-flight.ts";

/**
 * Graceful shutdown for the HTTP side. Fastify's close stops accepting connections and waits for
 * open ones, but a request whose client hung up no longer holds a connection while its hooks and
 * handler go on using the database; and a keep-alive connection answered during shutdown would
 * stay open until its idle timeout. So every request is counted from its first hook until its
 * reply is being sent (onSend runs for hung-up clients too, onResponse does not), answers given
 * while closing carry `Connection: close`, and close waits for the count to reach zero before the
 * server and every onClose hook (mailer, Redis) close.
 *
 * Register before the routes and before any other onRequest hook, so authentication is counted.
 */
export function registerGracefulClose(http: FastifyInstance, inFlight: InFlight): void {
  const releases = new WeakMap<FastifyRequest, () => void>();
  let closing = false;
  http.addHook("onRequest", async (request) => {
    releases.set(request, inFlight.begin());
  });
  http.addHook("onSend", async (request, reply, payload) => {
    releases.get(request)?.();
    if (closing) reply.header("connection", "close");
    return payload;
  });
  // preClose runs once Fastify answers new requests 503 and before it closes the server.
  http.addHook("preClose", async () => {
    closing = true;
    await inFlight.drained();
  });
}
