import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it } from "vitest";
import { PaymentsClient, verifyWebhook, WebhookVerificationError } from "../../sdk/src/index.ts";
import type { ReceivedRequest } from "../support/receiver.ts";
import { DAY, harness } from "../support/webhook-delivery.ts";

// The SDK's verifyWebhook on real deliveries of the service (the dispatcher POSTs to a local
// receiver): it takes a genuine one and gives its typed event, refuses a tampered body, a wrong
// secret, a stale and a future timestamp; the `standardwebhooks` package verifies the same
// delivery; during a secret rotation both secrets verify.

const h = harness();
afterEach(() => h.cleanup());

async function delivered(events: string[] = ["payment.created"]) {
  const receiver = await h.receiver();
  const ws = await h.workspace();
  const hook = await h.register(ws.testKey, receiver.url, events);
  h.dispatcher().start();
  const payment = await h.createPayment(ws.testKey);
  const [r] = (await receiver.waitFor(1)) as [ReceivedRequest];
  return { r, ws, hook, payment, receiver };
}

const seconds = (r: ReceivedRequest) => Number(r.headers["webhook-timestamp"]);

describe("verifyWebhook", () => {
  it("accepts a real delivery and returns its typed event; the standardwebhooks package verifies it too", async () => {
    const { r, hook, payment } = await delivered();
    const event = await verifyWebhook(r.rawBody, r.headers, hook.secret);
    expect(event.event).toBe("payment.created");
    if (event.event === "payment.created") expect(event.data.id).toBe(payment.id);
    // Bytes as received work as well as text.
    expect((await verifyWebhook(Buffer.from(r.rawBody), r.headers, hook.secret)).event).toBe(
      "payment.created",
    );
    const stock = new Webhook(hook.secret).verify(r.rawBody, {
      "webhook-id": String(r.headers["webhook-id"]),
      "webhook-timestamp": String(r.headers["webhook-timestamp"]),
      "webhook-signature": String(r.headers["webhook-signature"]),
    });
    expect(stock).toEqual(r.json);
  });

  it("refuses a tampered body, a wrong secret, a stale and a future timestamp, and no signature", async () => {
    const { r, hook } = await delivered();
    const reason = (p: Promise<unknown>) =>
      p.then(
        () => "accepted",
        (e: unknown) => (e instanceof WebhookVerificationError ? e.reason : String(e)),
      );
    expect(await reason(verifyWebhook(r.rawBody.replace("25", "26"), r.headers, hook.secret))).toBe(
      "bad_signature",
    );
    const other = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw5Ch0G3E0f5E=";
    expect(await reason(verifyWebhook(r.rawBody, r.headers, other))).toBe("bad_signature");
    expect(await reason(verifyWebhook(r.rawBody, r.headers, hook.secret, { now: seconds(r) + 301 }))).toBe(
      "stale_timestamp",
    );
    expect(await reason(verifyWebhook(r.rawBody, r.headers, hook.secret, { now: seconds(r) - 301 }))).toBe(
      "future_timestamp",
    );
    expect(
      await reason(
        verifyWebhook(r.rawBody, r.headers, hook.secret, { now: seconds(r) + 600, toleranceSeconds: 900 }),
      ),
    ).toBe("accepted");
    expect(await reason(verifyWebhook(r.rawBody, { "content-type": "application/json" }, hook.secret))).toBe(
      "no_signature",
    );
  });

  it("verifies with both secrets during a rotation (the SDK's rotateSecret), and only the new one after 24 h", async () => {
    const receiver = await h.receiver();
    const ws = await h.workspace();
    const hook = await h.register(ws.testKey, receiver.url, ["payment.created"]);
    const sdk = new PaymentsClient({
      apiKey: ws.testKey,
      baseUrl: "http://pay.test",
      fetch: async (input) => {
        const request = input as Request;
        const res = await h.t.request({
          method: request.method as "POST",
          url: new URL(request.url).pathname,
          headers: Object.fromEntries(request.headers),
        });
        return new Response(res.body, {
          status: res.statusCode,
          headers: { "content-type": "application/json" },
        });
      },
    });
    const rotated = await sdk.webhooks.rotateSecret(String(hook.id));
    const fresh = rotated.webhook.signingSecret;
    expect(fresh).not.toBe(hook.secret);
    h.dispatcher().start();
    await h.createPayment(ws.testKey);
    const [during] = (await receiver.waitFor(1)) as [ReceivedRequest];
    expect((await verifyWebhook(during.rawBody, during.headers, hook.secret)).event).toBe("payment.created");
    expect((await verifyWebhook(during.rawBody, during.headers, fresh)).event).toBe("payment.created");

    h.t.setNow(new Date(Date.now() + DAY + 60_000));
    await h.createPayment(ws.testKey);
    const after = (await receiver.waitFor(2))[1] as ReceivedRequest;
    const at = { now: seconds(after) };
    expect((await verifyWebhook(after.rawBody, after.headers, fresh, at)).event).toBe("payment.created");
    await expect(verifyWebhook(after.rawBody, after.headers, hook.secret, at)).rejects.toMatchObject({
      reason: "bad_signature",
    });
  });
});
