// A webhook receiver on Fastify (sdk/README.md): JSON kept as a Buffer, so the signature can be checked.
import { verifyWebhook, type WebhookEvent } from "@payments-service/sdk";
import Fastify from "fastify";

export function fastifyReceiver(secret: string, handle: (event: WebhookEvent) => void) {
  const app = Fastify();
  app.addContentTypeParser("application/json", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
  app.post("/hooks", async (req, reply) => {
    const event = await verifyWebhook(req.body as Buffer, req.headers, secret).catch(() => null);
    if (event) handle(event);
    return reply.code(event ? 204 : 400).send();
  });
  return app;
}
