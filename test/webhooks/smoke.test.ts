import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebhookDispatcher } from "../../src/modules/webhooks/dispatcher.ts";
import { bearer, createWorkspace, startTestApp, type TestApp } from "../support/app.ts";
import { WebhookReceiver } from "../support/receiver.ts";

describe("webhook delivery (smoke)", () => {
  let t: TestApp;
  let receiver: WebhookReceiver;
  let dispatcher: WebhookDispatcher;
  beforeAll(async () => {
    t = await startTestApp();
    receiver = new WebhookReceiver();
    await receiver.start();
    dispatcher = new WebhookDispatcher(t.app.ctx, { pollIntervalMs: 50 });
    dispatcher.start();
  });
  afterAll(async () => {
    await dispatcher.stop();
    await receiver.stop();
    await t.close();
  });

  it("delivers payment.created and payment.forwarded, signed", async () => {
    const ws = await createWorkspace(t);
    const reg = await t.request({
      method: "POST",
      url: "/api/v1/webhooks",
      headers: bearer(ws.testKey),
      payload: { url: receiver.url, events: ["*"] },
    });
    expect(reg.statusCode).toBe(201);
    const secret = reg.json().webhook.signingSecret as string;
    const res = await t.request({
      method: "POST",
      url: "/api/v1/payments",
      headers: bearer(ws.testKey),
      payload: { tokenSymbol: "USDC", amount: "10" },
    });
    expect(res.statusCode).toBe(201);
    const got = await receiver.waitFor(2);
    expect(got.map((r) => r.json.event).sort()).toEqual(["payment.created", "payment.forwarded"]);
    for (const r of got) {
      expect(r.headers["x-service-signature"]).toBe(
        createHmac("sha256", secret).update(r.rawBody).digest("hex"),
      );
    }
  });

  it("stops once when asked twice at once, and refuses to start again", async () => {
    const second = new WebhookDispatcher(t.app.ctx, { pollIntervalMs: 50 });
    second.start();
    const [first, again] = [second.stop(), second.stop()];
    expect(again).toBe(first);
    await expect(Promise.all([first, again])).resolves.toEqual([undefined, undefined]);
    await expect(second.stop()).resolves.toBeUndefined();
    expect(() => second.start()).toThrow("started again after it stopped");
  });
});
