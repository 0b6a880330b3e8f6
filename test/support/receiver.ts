import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";

// A real HTTP receiver on 127.0.0.1 for webhook tests. Each request is recorded with its raw body;
// `respond` decides the answer and can be swapped mid-test (500 then 200, hang, Retry-After …).

export interface ReceivedRequest {
  headers: IncomingHttpHeaders;
  rawBody: string;
  json: Record<string, unknown>;
  receivedAt: number;
}

export type Responder = (
  req: ReceivedRequest,
) => { status: number; headers?: Record<string, string> } | "hang";

export class WebhookReceiver {
  readonly received: ReceivedRequest[] = [];
  respond: Responder = () => ({ status: 200 });
  #server: Server | undefined;
  #waiters: Array<() => void> = [];

  get url(): string {
    const address = this.#server?.address() as AddressInfo | undefined;
    if (!address) throw new Error("receiver not started");
    return `http://127.0.0.1:${address.port}/hook`;
  }

  async start(port = 0): Promise<void> {
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const rawBody = Buffer.concat(chunks).toString("utf8");
        let json: Record<string, unknown> = {};
        try {
          json = JSON.parse(rawBody);
        } catch {}
        const entry = { headers: req.headers, rawBody, json, receivedAt: Date.now() };
        this.received.push(entry);
        for (const wake of this.#waiters.splice(0)) wake();
        const answer = this.respond(entry);
        if (answer === "hang") return; // never answers: the sender's timeout must fire
        res.writeHead(answer.status, answer.headers ?? {});
        res.end("ok");
      });
    });
    await new Promise<void>((resolve) => this.#server?.listen(port, "127.0.0.1", resolve));
  }

  /** Waits until at least `count` requests matched the predicate. */
  async waitFor(count: number, predicate: (r: ReceivedRequest) => boolean = () => true, timeoutMs = 15_000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const matching = this.received.filter(predicate);
      if (matching.length >= count) return matching;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`receiver: expected ${count} requests, got ${matching.length}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 200));
        this.#waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
