// A webhook receiver on Node's http (sdk/README.md): the raw body, verified, then handled.
import { createServer } from "node:http";
import { verifyWebhook, type WebhookEvent } from "@payments-service/sdk";

export function nodeReceiver(secret: string, handle: (event: WebhookEvent) => void) {
  return createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    try {
      handle(await verifyWebhook(Buffer.concat(chunks), req.headers, secret));
      res.writeHead(204).end();
    } catch {
      res.writeHead(400).end();
    }
  });
}
