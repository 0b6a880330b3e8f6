import type { FastifyInstance, FastifyRequest } from "fastify";
import { serviceUnavailable } from "../../domain/errors.ts";
import type { InFlight } from "../concurrency/in-flight.ts";

/**
 * Graceful shutdown for the HTTP side. Fastify's close stops accepting connections and waits for
 * open ones, but a request whose client reset its connection no longer holds one while its hooks
 * and handler go on using the database; and a keep-alive connection answered during shutdown
 * would stay open until its idle timeout. So every request is counted from its first hook until
 * its reply is being sent (onSend runs for gone clients too, onResponse does not), answers given
 * while closing carry `Connection: close`, and close waits for the count to reach zero before the
 * server and every onClose hook (mailer, Redis) close.
 *
 * One exception keeps the count honest: a request whose connection closes before its body has
 * been read never gets that body, and Fastify waits for it without end (no answer, no onSend).
 * It is not counted while its body is awaited once its connection is gone; if it does get past
 * the body (a request without one), it is counted again, or refused once shutdown has begun.
 *
 * Register before the routes and before any other onRequest hook, so authentication is counted.
 */
export function registerGracefulClose(http: FastifyInstance, inFlight: InFlight): void {
  interface Tracked {
    release: () => void;
    /** Set while the body is awaited: the connection's 'close' listener that stops counting. */
    onGone?: () => void;
  }
  const tracked = new WeakMap<FastifyRequest, Tracked>();
  let closing = false;

  http.addHook("onRequest", async (request) => {
    // A long-lived stream (the hosted page's events) is ended by its own preClose, not awaited.
    if (request.routeOptions.config.stream) return;
    tracked.set(request, { release: inFlight.begin() });
  });
  http.addHook("preParsing", async (request, reply) => {
    const entry = tracked.get(request);
    if (!entry) return;
    // 'close' on the response before it is sent means the connection is gone.
    entry.onGone = () => entry.release();
    if (reply.raw.destroyed) entry.release();
    else reply.raw.once("close", entry.onGone);
  });
  http.addHook("preValidation", async (request, reply) => {
    const entry = tracked.get(request);
    if (!entry?.onGone) return;
    reply.raw.removeListener("close", entry.onGone);
    entry.onGone = undefined;
    if (!reply.raw.destroyed) return;
    // Its client is gone and it may not have been counted meanwhile ('close' may not have been
    // emitted yet: release is idempotent), so shutdown may be past waiting for it.
    entry.release();
    if (closing) throw serviceUnavailable("The service is shutting down");
    entry.release = inFlight.begin();
  });
  http.addHook("onSend", async (request, reply, payload) => {
    tracked.get(request)?.release();
    if (closing) reply.header("connection", "close");
    return payload;
  });
  // preClose runs once Fastify answers new requests 503 and before it closes the server.
  http.addHook("preClose", async () => {
    closing = true;
    await inFlight.drained();
  });
}

declare module "fastify" {
  interface FastifyContextConfig {
    /** A hijacked, long-lived response: not counted in flight (it would hold the close). */
    stream?: boolean;
  }
}
