import type { FastifyPluginAsync } from "fastify";
import type { AppContext } from "../../context.ts";
import { isFinal, type PaymentStatus } from "../../domain/payment-state.ts";
import { NoticeFanOut } from "../../platform/db/notices.ts";
import type { PaymentsService } from "../payments/service.ts";

// {base_url}/pay/<payment_id>/events: the payment's public status as server-sent events (D25),
// so the page changes at once instead of polling /status. One LISTEN per process (the
// `payment_status` notices of migration 043) wakes the streams of that payment; each stream also
// re-reads every 10 s, so a notice lost with its session costs seconds, never a missed change.
// A stream ends after a final status (isFinal, forwarded included: a refund after forwarding is
// rare, and the page's /status read on its next load shows it; holding every paid page's stream
// open for it would keep thousands of idle streams). Each stream holds a few closures and timers.

const HEARTBEAT_MS = 15_000;
const REREAD_MS = 10_000;

export const hostedPageEventsRoutes =
  (ctx: AppContext, payments: PaymentsService): FastifyPluginAsync =>
  async (app) => {
    const notices = new NoticeFanOut(ctx.db, "payment_status", app.log);
    const perPayment = new Map<string, number>();
    const perAddress = new Map<string, number>();
    const open = new Set<(closing?: boolean) => void>();
    const sockets = new Set<import("node:net").Socket>();
    const { perPayment: maxPerPayment, perAddress: maxPerAddress } = ctx.config.hostedPageStreams;

    // Fastify's close waits for open connections: streams end first.
    app.addHook("preClose", async () => {
      for (const end of [...open]) end(true);
      for (const socket of sockets) socket.destroy();
      await notices.close();
    });

    const bump = (counts: Map<string, number>, key: string, by: number) => {
      const next = (counts.get(key) ?? 0) + by;
      if (next <= 0) counts.delete(key);
      else counts.set(key, next);
    };

    app.get<{ Params: { id: string } }>(
      "/pay/:id/events",
      { config: { auth: "none", stream: true }, schema: { hide: true } },
      async (request, reply) => {
        const id = request.params.id.toLowerCase();
        // Not counted in flight (config.stream), so its connection is not kept for another request.
        reply.header("connection", "close");
        const first = await payments.forPayer(id);
        if (!first)
          return reply.status(404).header("cache-control", "no-store").send({ error: "Payment not found" });
        if ((perPayment.get(id) ?? 0) >= maxPerPayment || (perAddress.get(request.ip) ?? 0) >= maxPerAddress)
          return reply
            .status(429)
            .header("cache-control", "no-store")
            .send({ error: "Too many open status streams; read /pay/{id}/status instead" });

        bump(perPayment, id, 1);
        bump(perAddress, request.ip, 1);
        reply.hijack();
        const raw = reply.raw;
        const socket = request.raw.socket;
        sockets.add(socket);
        socket.once("close", () => sockets.delete(socket));
        raw.writeHead(200, {
          "content-type": "text/event-stream",
          "cache-control": "no-store",
          "x-content-type-options": "nosniff",
          // The connection ends with the stream: an idle kept-alive socket would hold the app's close.
          connection: "close",
        });
        raw.write("retry: 3000\n\n");

        let last = "";
        let ended = false;
        let reading = false;
        let again = false;
        const send = (row: NonNullable<typeof first>) => {
          const data = JSON.stringify({
            status: row.status,
            expiresAt: row.expires_at.toISOString(),
            refunded: BigInt(row.refunded_amount ?? 0) > 0n,
          });
          if (data !== last) {
            last = data;
            raw.write(`event: status\ndata: ${data}\n\n`);
          }
          if (isFinal(row.status as PaymentStatus)) end();
        };
        // Reads once at a time; a wake during a read asks for one more.
        const reread = async () => {
          if (ended) return;
          if (reading) {
            again = true;
            return;
          }
          reading = true;
          try {
            do {
              again = false;
              const row = await payments.forPayer(id);
              if (ended) return;
              if (row) send(row);
            } while (again && !ended);
          } catch (err) {
            request.log.warn({ err }, "reading a payment's status for its stream failed");
          } finally {
            reading = false;
          }
        };
        const heartbeat = setInterval(() => raw.write(": keep-alive\n\n"), HEARTBEAT_MS);
        const poll = setInterval(() => void reread(), REREAD_MS);
        const subscription = notices.on(id, () => void reread());
        // On the app's close the connection goes too: a kept-alive one would hold the close.
        function end(closing = false) {
          if (ended) return;
          ended = true;
          clearInterval(heartbeat);
          clearInterval(poll);
          subscription.stop();
          open.delete(end);
          bump(perPayment, id, -1);
          bump(perAddress, request.ip, -1);
          raw.end();
          if (closing) raw.socket?.destroy();
        }
        open.add(end);
        raw.on("close", () => end());
        send(first);
        // Read once more when the LISTEN is active: a change committed after the first read but
        // before then sent its notice to no one, and would wait for the 10 s re-read.
        void subscription.listening.then(reread);
      },
    );
  };
