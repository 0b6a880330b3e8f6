import { connect, type Socket } from "node:net";
import Fastify, { type FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { type LingerOptions, registerLingeringClose } from "./lingering-close.ts";

// A real HTTP server on 127.0.0.1 and raw sockets, so a test decides when the client writes and
// reads: an answer given before the body has all arrived (here a 401 from an onRequest hook, as
// authentication gives it) must be readable, close its connection, and the close must be bounded.

const apps: FastifyInstance[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close().catch(() => undefined);
});

async function server(options: LingerOptions): Promise<number> {
  const app = Fastify({ forceCloseConnections: true });
  apps.push(app);
  registerLingeringClose(app, options);
  app.addHook("onRequest", async (request, reply) => {
    if (request.headers.authorization !== "Bearer ok") return reply.status(401).send({ error: "no" });
  });
  app.post("/echo", async (request) => ({ got: (request.body as { n: number }).n }));
  await app.listen({ port: 0, host: "127.0.0.1" });
  const address = app.server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

interface Client {
  socket: Socket;
  /** Everything read so far. */
  text: () => string;
  /** Whether the server has ended its side (a FIN after its answer). */
  finished: () => boolean;
  /** Resolves when the connection is gone: with the error that ended it, or "closed". */
  gone: Promise<string>;
}

/** A client that keeps writing after the server's FIN (half-open), as one still sending its body does. */
function client(port: number, head: string): Client {
  const socket = connect({ host: "127.0.0.1", port, allowHalfOpen: true });
  let text = "";
  let finished = false;
  socket.on("data", (data: Buffer) => {
    text += data.toString("latin1");
  });
  socket.on("end", () => {
    finished = true;
  });
  const gone = new Promise<string>((resolve) => {
    socket.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    socket.once("close", () => resolve("closed"));
  });
  socket.write(head);
  return { socket, text: () => text, finished: () => finished, gone };
}

const post = (length: number, auth = "") =>
  `POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${auth}Content-Length: ${length}\r\n\r\n`;

async function until(what: string, probe: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("lingering close of an answer given before the body has arrived", () => {
  it("answers with Connection: close and a FIN, reads the rest of the body, then closes without a reset", async () => {
    const port = await server({ maxMs: 10_000, maxBytes: 64 * 1024 * 1024 });
    const body = 4 * 1024 * 1024;
    const c = client(port, post(body));
    await until("the 401 and the server's FIN", () => c.finished());
    expect(c.text()).toMatch(/^HTTP\/1\.1 401 /);
    expect(c.text().toLowerCase()).toContain("connection: close");
    // Still writing after the answer: every byte is accepted, none is refused with a reset.
    const piece = Buffer.alloc(64 * 1024, 0x20);
    for (let sent = 0; sent < body; sent += piece.length) {
      if (!c.socket.write(piece)) await new Promise((resolve) => c.socket.once("drain", resolve));
    }
    c.socket.end();
    expect(await c.gone).toBe("closed");
  });

  it("gives up after maxMs on a client that goes on sending slowly", async () => {
    const port = await server({ maxMs: 300, maxBytes: 64 * 1024 * 1024 });
    const c = client(port, post(1024 * 1024 * 1024));
    await until("the 401", () => c.text().includes("\r\n\r\n"));
    const answered = Date.now();
    const drip = setInterval(() => c.socket.writable && c.socket.write(Buffer.alloc(1024, 0x20)), 20);
    try {
      const how = await Promise.race([
        c.gone,
        new Promise<string>((resolve) => setTimeout(() => resolve("still open"), 5_000)),
      ]);
      expect(how).not.toBe("still open");
      expect(Date.now() - answered).toBeGreaterThanOrEqual(250);
      expect(c.text()).toMatch(/^HTTP\/1\.1 401 /);
    } finally {
      clearInterval(drip);
      c.socket.destroy();
    }
  });

  it("gives up after maxBytes on a client that sends fast", async () => {
    const port = await server({ maxMs: 10_000, maxBytes: 1024 * 1024 });
    const total = 64 * 1024 * 1024;
    const c = client(port, post(total));
    let written = 0;
    let gone = false;
    void c.gone.then(() => {
      gone = true;
    });
    const piece = Buffer.alloc(64 * 1024, 0x20);
    while (written < total && !gone) {
      written += piece.length;
      if (!c.socket.write(piece)) {
        await Promise.race([new Promise((resolve) => c.socket.once("drain", resolve)), c.gone]);
      }
    }
    expect(await c.gone).not.toBe("closed");
    expect(c.text()).toMatch(/^HTTP\/1\.1 401 /);
    expect(written).toBeLessThan(total / 2);
  });

  it("leaves a request whose body was read alone: kept alive, no Connection: close", async () => {
    const port = await server({ maxMs: 300, maxBytes: 1024 });
    const body = JSON.stringify({ n: 7 });
    const c = client(port, `${post(body.length, "Authorization: Bearer ok\r\n")}${body}`);
    await until("the answer", () => c.text().includes('{"got":7}'));
    expect(c.text()).toMatch(/^HTTP\/1\.1 200 /);
    expect(c.text().toLowerCase()).toContain("connection: keep-alive");
    // A second request on the same connection is answered too.
    c.socket.write(`${post(body.length, "Authorization: Bearer ok\r\n")}${body}`);
    await until("the second answer", () => c.text().split('{"got":7}').length === 3);
    c.socket.destroy();
  });

  it("does not touch injected requests", async () => {
    const app = Fastify();
    apps.push(app);
    registerLingeringClose(app, { maxMs: 300, maxBytes: 1024 });
    app.post("/echo", async () => ({ ok: true }));
    const res = await app.inject({ method: "POST", url: "/echo", payload: { n: 1 } });
    expect(res.statusCode).toBe(200);
    expect(res.headers.connection).not.toBe("close");
  });
});
