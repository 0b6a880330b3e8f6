import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

// A JSON-RPC endpoint on 127.0.0.1 in front of a devnet node, for tests that need the node to
// misbehave: a hook sees every call (also inside batches) and may answer it with an error, hold
// it (await before returning), drop the whole request's connection, or pass it on.

export interface RpcCall {
  method: string;
  params: unknown[];
}

export type RpcHook = (
  call: RpcCall,
) => Promise<{ error: { code: number; message: string } } | { result: unknown } | "drop" | undefined>;

interface Message {
  jsonrpc: string;
  id: unknown;
  method: string;
  params?: unknown[];
}

export async function startRpcProxy(target: string, hook: RpcHook) {
  const methods: string[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const parsed = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Message | Message[];
    const messages = Array.isArray(parsed) ? parsed : [parsed];
    const replies: unknown[] = [];
    for (const message of messages) {
      methods.push(message.method);
      const own = await hook({ method: message.method, params: message.params ?? [] });
      if (own === "drop") {
        req.socket.destroy();
        return;
      }
      if (own) {
        replies.push({ jsonrpc: "2.0", id: message.id, ...own });
        continue;
      }
      const upstream = await fetch(target, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(message),
      });
      replies.push(await upstream.json());
    }
    res
      .writeHead(200, { "content-type": "application/json" })
      .end(JSON.stringify(Array.isArray(parsed) ? replies : replies[0]));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    methods,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A hook that holds every call for which `holds` is true until `release()`. */
export function holding(holds: (method: string, params: unknown[]) => boolean) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const hook: RpcHook = async ({ method, params }) => {
    if (holds(method, params)) await released;
    return undefined;
  };
  return { hook, release };
}
