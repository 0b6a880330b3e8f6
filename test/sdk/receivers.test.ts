import { readFileSync } from "node:fs";
import type { Server } from "node:http";
import { createServer } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { expressReceiver } from "../../sdk/examples/express.ts";
import { fastifyReceiver } from "../../sdk/examples/fastify.ts";
import { nodeReceiver } from "../../sdk/examples/node-http.ts";
import type { WebhookEvent } from "../../sdk/src/index.ts";
import { harness, until } from "../support/webhook-delivery.ts";

// sdk/README.md's webhook receivers (sdk/examples: Node's http, Express, Fastify), run as they are
// shown: each takes a real delivery of the service (the dispatcher POSTs to it) and hands on the
// verified event, and answers 400 to a request whose signature does not hold.

const h = harness();
afterEach(() => h.cleanup());

type Start = (
  secret: string,
  handle: (e: WebhookEvent) => void,
  port: number,
) => Promise<() => Promise<void>>;

const RECEIVERS: Record<string, { path: string; start: Start }> = {
  "Node's http": { path: "/", start: (secret, handle, port) => served(nodeReceiver(secret, handle), port) },
  Express: {
    path: "/hooks",
    start: (secret, handle, port) => served(expressReceiver(secret, handle).listen(port, "127.0.0.1"), port),
  },
  Fastify: {
    path: "/hooks",
    start: async (secret, handle, port) => {
      const app = fastifyReceiver(secret, handle);
      await app.listen({ port, host: "127.0.0.1" });
      return () => app.close();
    },
  },
};

async function served(server: Server, port: number): Promise<() => Promise<void>> {
  if (!server.listening) await new Promise<void>((done) => server.listen(port, "127.0.0.1", () => done()));
  return () => new Promise<void>((done) => server.close(() => done()));
}

/** A port nothing listens on now: the endpoint is registered with it before its receiver starts. */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((done) => probe.listen(0, "127.0.0.1", () => done()));
  const address = probe.address();
  await new Promise<void>((done) => probe.close(() => done()));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

describe("the README's webhook receivers", () => {
  it.each(Object.keys(RECEIVERS))("%s: takes a real delivery, refuses a forged one", async (name) => {
    const receiver = RECEIVERS[name];
    if (!receiver) throw new Error(name);
    const ws = await h.workspace();
    const port = await freePort();
    const url = `http://127.0.0.1:${port}${receiver.path}`;
    const hook = await h.register(ws.testKey, url, ["payment.created"]);
    const events: WebhookEvent[] = [];
    const stop = await receiver.start(hook.secret, (event) => events.push(event), port);
    try {
      h.dispatcher().start();
      const payment = await h.createPayment(ws.testKey);
      await until("the receiver handed on the event", async () => events.length > 0);
      expect(events[0]).toMatchObject({ event: "payment.created", data: { id: payment.id } });

      const forged = await fetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "webhook-id": "msg_forged",
          "webhook-timestamp": String(Math.floor(Date.now() / 1000)),
          "webhook-signature": "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        },
        body: JSON.stringify({ event: "payment.forwarded", data: { id: payment.id } }),
      });
      expect(forged.status).toBe(400);
      expect(events).toHaveLength(1);
    } finally {
      await stop();
    }
  });

  it("are shown in sdk/README.md as the tested files are", () => {
    const readme = readFileSync(new URL("../../sdk/README.md", import.meta.url), "utf8");
    for (const example of ["node-http.ts", "express.ts", "fastify.ts"]) {
      const code = readFileSync(new URL(`../../sdk/examples/${example}`, import.meta.url), "utf8");
      expect(readme, example).toContain(code.trim());
    }
  });
});
