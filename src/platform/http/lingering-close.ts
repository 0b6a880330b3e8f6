import type { Socket } from "node:net";
import type { FastifyInstance } from "fastify";

/**
 * An answer given before the request's body has all arrived (413 for a body over the limit, 401
 * or 429 from a hook that runs before the body is read, any error page) closes its connection,
 * since the client cannot send another request on it before the rest of this one. Closing at
 * once would lose the answer: a socket closed with unread bytes makes the kernel send a reset,
 * and a client still writing its body (Node's fetch, most HTTP clients) then fails with EPIPE or
 * ECONNRESET before it reads what it was sent. So the close lingers, as in Apache and nginx: the
 * answer goes out with `Connection: close` and a FIN, the rest of the body is read and thrown
 * away, and the socket closes once the body has ended, or after `maxMs` or `maxBytes` of it,
 * whichever comes first (bounded: a client cannot keep the connection by sending forever).
 *
 * Node's HTTP server has no such option and Fastify none either; the one hook used is the
 * socket's `destroySoon`, which the server calls to close a connection after its last answer.
 * Register at the root, so that answers of every scope (the dashboard's error pages too) linger.
 */
export interface LingerOptions {
  /** How long the rest of a body is read at most, from the moment the answer has been written. */
  maxMs: number;
  /** How many more bytes of it are read at most. */
  maxBytes: number;
}

export const DEFAULT_LINGER: LingerOptions = { maxMs: 10_000, maxBytes: 16 * 1024 * 1024 };

export function registerLingeringClose(http: FastifyInstance, options: LingerOptions = DEFAULT_LINGER): void {
  const armed = new WeakSet<Socket>();
  // A callback hook, not an async one: it runs on every answer and almost always does nothing.
  http.addHook("onSend", (request, reply, payload, done) => {
    const req = request.raw;
    // `complete` is false until the whole request has arrived (an injected request has none).
    if (req.complete !== false || reply.raw.headersSent) return done(null, payload);
    reply.header("connection", "close");
    const socket = req.socket;
    if (socket.destroyed || armed.has(socket)) return done(null, payload);
    armed.add(socket);

    let discarded = 0;
    let ended = false;
    const close = socket.destroySoon.bind(socket);
    // Counting the rest of the body also reads it: the server would otherwise only drain it
    // once the answer is finished, and stop reading it when the socket closes.
    req.on("data", (chunk: Buffer) => {
      discarded += chunk.length;
      if (discarded > options.maxBytes) socket.destroy();
    });
    req.once("end", () => {
      ended = true;
    });
    // Called by the server once the answer is written, because it said `Connection: close`.
    socket.destroySoon = () => {
      if (ended) return close();
      socket.end(); // the answer, then a FIN; reading goes on
      const timer = setTimeout(() => socket.destroy(), options.maxMs);
      timer.unref();
      socket.once("close", () => clearTimeout(timer));
      req.once("end", close);
    };
    done(null, payload);
  });
}
