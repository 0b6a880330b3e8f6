import { connect, type Socket } from "node:net";
import Fastify, { type FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { InFlight } from "../concurrency/in-flight.ts";
import { registerGracefulClose } from "./graceful-close.ts";

// A real HTTP server on 127.0.0.1 and raw sockets, so a test can reset a connection at a chosen
// point of a request's life (as a killed client does) and see what close() waits for.

interface Harness {
  app: FastifyInstance;
  port: number;
  inFlight: InFlight;
  /** Resolves when a request reaches the gated onRequest hook; `open()` lets it go on. */
  reachedHook: Promise<void>;
  open: () => void;
  handled: string[];
}

const apps: FastifyInstance[] = [];

afterEach(async () => {
  for (const app of apps.splice(0)) await app.close().catch(() => undefined);
});

async function harness(options: { handlerMs?: number } = {}): Promise<Harness> {
  const app = Fastify();
  apps.push(app);
  const inFlight = new InFlight();
  registerGracefulClose(app, inFlight);
  let reached: () => void = () => {};
  const reachedHook = new Promise<void>((resolve) => {
    reached = resolve;
  });
  let open: () => void = () => {};
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  const handled: string[] = [];
  // Stands for authentication, which awaits the database before the body is read.
  app.addHook("onRequest", async (request) => {
    if (request.headers["x-gated"] !== "1") return;
    reached();
    await gate;
  });
  app.post("/work", async (request) => {
    await new Promise((resolve) => setTimeout(resolve, options.handlerMs ?? 0));
    handled.push((request.body as { id: string }).id);
    return { ok: true };
  });
  app.get("/read", async () => {
    await new Promise((resolve) => setTimeout(resolve, options.handlerMs ?? 0));
    handled.push("read");
    return { ok: true };
  });
  await app.listen({ port: 0, host: "127.0.0.1" });
  const address = app.server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  return { app, port: address.port, inFlight, reachedHook, open, handled };
}

function rawRequest(port: number, head: string, body = ""): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => {
      socket.write(
        `${head}\r\nhost: 127.0.0.1\r\n${body ? `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` : ""}\r\n${body}`,
      );
      resolve(socket);
    });
    socket.on("error", reject);
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("registerGracefulClose", () => {
  it("waits for a handler whose client reset its connection before close() resolves", async () => {
    const h = await harness({ handlerMs: 300 });
    const socket = await rawRequest(h.port, "POST /work HTTP/1.1", JSON.stringify({ id: "a" }));
    while (h.inFlight.running === 0) await sleep(5);
    await sleep(50); // inside the handler's 300 ms
    socket.resetAndDestroy();
    await h.app.close();
    expect(h.handled).toEqual(["a"]);
    expect(h.inFlight.running).toBe(0);
  });

  it("does not wait for a request whose connection closed before its body was read", async () => {
    const h = await harness();
    const socket = await rawRequest(h.port, "POST /work HTTP/1.1\r\nx-gated: 1", JSON.stringify({ id: "b" }));
    await h.reachedHook;
    socket.resetAndDestroy();
    await sleep(50);
    h.open();
    // Fastify never gets that body and never answers; close() must not wait for it (it used to
    // wait until the plugin timeout failed the shutdown).
    const closed = await Promise.race([h.app.close().then(() => "closed"), sleep(5_000).then(() => "hung")]);
    expect(closed).toBe("closed");
    expect(h.handled).toEqual([]);
    expect(h.inFlight.running).toBe(0);
  });

  it("counts a bodyless request again when it goes on to its handler after its client left", async () => {
    const h = await harness({ handlerMs: 300 });
    const socket = await rawRequest(h.port, "GET /read HTTP/1.1\r\nx-gated: 1");
    await h.reachedHook;
    socket.resetAndDestroy();
    await sleep(50);
    h.open();
    while (h.inFlight.running === 0) await sleep(5); // counted again on its way to the handler
    await h.app.close();
    expect(h.handled).toEqual(["read"]);
    expect(h.inFlight.running).toBe(0);
  });

  it("refuses such a request once shutdown has begun instead of running it uncounted", async () => {
    const h = await harness();
    const socket = await rawRequest(h.port, "GET /read HTTP/1.1\r\nx-gated: 1");
    await h.reachedHook;
    socket.resetAndDestroy();
    await sleep(50);
    const closing = h.app.close();
    await sleep(50);
    h.open();
    await closing;
    await sleep(50);
    expect(h.handled).toEqual([]);
  });

  it("answers given while closing say Connection: close, so keep-alive clients let go", async () => {
    const h = await harness({ handlerMs: 300 });
    const answer = fetch(`http://127.0.0.1:${h.port}/work`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: "c" }),
    });
    while (h.inFlight.running === 0) await sleep(5);
    const closed = h.app.close();
    const res = await answer;
    expect(res.status).toBe(200);
    expect(res.headers.get("connection")).toBe("close");
    await closed;
    expect(h.handled).toEqual(["c"]);
  });
});
