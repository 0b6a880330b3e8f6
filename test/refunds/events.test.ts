import { createHmac, timingSafeEqual } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebhookDispatcher } from "../../src/modules/webhooks/dispatcher.ts";
import { type CreatedWorkspace, createWorkspace, type TestApp } from "../support/app.ts";
import { type ReceivedRequest, WebhookReceiver } from "../support/receiver.ts";
import { address, FAILURE_ADDRESS, type Json, refundHelpers, useRefundsApp } from "../support/refunds.ts";

// The refund.completed and refund.failed webhooks of refunds and returns (decision D20), and
// refunds kept apart from payouts (their list, CSV export and stats), against the real app on a
// real database (PGlite, or the PostgreSQL server of DATABASE_URL); the helpers are in
// support/refunds.ts.

let t: TestApp;
useRefundsApp((app) => {
  t = app;
});

const { post, get, getOk, returnTransfer, refundOk, pay, faucet, incoming } = refundHelpers(() => t);

// ---- events -----------------------------------------------------------------------------------

function hmacVerifies(secret: string, rawBody: string, header: unknown): boolean {
  if (typeof header !== "string" || !/^[0-9a-f]{64}$/.test(header)) return false;
  const expected = createHmac("sha256", Buffer.from(secret, "utf8"))
    .update(Buffer.from(rawBody, "utf8"))
    .digest();
  const given = Buffer.from(header, "hex");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

describe("refund.completed and refund.failed webhooks", () => {
  let dispatcher: WebhookDispatcher;
  const receivers: WebhookReceiver[] = [];
  beforeAll(() => {
    dispatcher = new WebhookDispatcher(t.app.ctx, { pollIntervalMs: 25 });
    dispatcher.start();
  });
  afterAll(async () => {
    await dispatcher.stop();
    for (const r of receivers) await r.stop();
  });

  async function receiver(): Promise<WebhookReceiver> {
    const r = new WebhookReceiver();
    await r.start();
    receivers.push(r);
    return r;
  }

  async function register(key: string, url: string, events: string[]): Promise<string> {
    const res = await post(key, "/api/v1/webhooks", { url, events });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().webhook.signingSecret;
  }

  /** A refund that completes, one that fails and a return, in `ws`; their 201 bodies. */
  async function threeRefunds(ws: CreatedWorkspace): Promise<Json[]> {
    const p = await pay(ws, "10");
    const a = address();
    const done = await refundOk(ws.testKey, p.id as string, {
      amount: "2",
      destinationAddress: a,
      reason: "r1",
    });
    const failed = await refundOk(ws.testKey, p.id as string, {
      amount: "3",
      destinationAddress: FAILURE_ADDRESS,
    });
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "0.5", fromAddress: a });
    const returned = await returnTransfer(ws.testKey, transfer.id as string, { reason: "not ours" });
    expect(returned.statusCode, returned.body).toBe(201);
    return [done, failed, returned.json().refund as Json];
  }

  const isRefundEvent = (r: ReceivedRequest) => String(r.json.event).startsWith("refund.");

  function expectRefundEvents(got: ReceivedRequest[], [done, failed, ret]: Json[]) {
    const bodies = got.map((x) => x.json);
    for (const x of got) expect(Object.keys(x.json)).toEqual(["event", "data"]);
    const byId = (id: unknown) => bodies.find((b) => (b.data as Json).id === id);
    expect(byId(done?.id)).toEqual({ event: "refund.completed", data: done });
    expect(byId(failed?.id)).toEqual({
      event: "refund.failed",
      data: { ...failed, error: "execution reverted (sandbox failure address)" },
    });
    expect(byId(ret?.id)).toEqual({ event: "refund.completed", data: ret });
    expect(bodies).toHaveLength(3);
  }

  it("accepts refund.completed and refund.failed in a registration (D20)", async () => {
    const ws = await createWorkspace(t);
    const r = await receiver();
    for (const events of [["refund.completed"], ["refund.failed"], ["refund.completed", "refund.failed"]]) {
      const res = await post(ws.testKey, "/api/v1/webhooks", { url: r.url, events });
      expect(res.statusCode, `${events}: ${res.body}`).toBe(201);
      expect(res.json().webhook.events).toEqual(events);
    }
  });

  it("delivers each refund and return to a * subscription as exactly {event, data}, signed", async () => {
    const ws = await createWorkspace(t);
    const all = await receiver();
    const unrelated = await receiver();
    const secret = await register(ws.testKey, all.url, ["*"]);
    await register(ws.testKey, unrelated.url, ["payout.completed"]);
    const made = await threeRefunds(ws);
    const got = await all.waitFor(3, isRefundEvent);
    expectRefundEvents(got, made);
    for (const x of got) {
      expect(hmacVerifies(secret, x.rawBody, x.headers["x-service-signature"])).toBe(true);
      expect(hmacVerifies(`${secret}x`, x.rawBody, x.headers["x-service-signature"])).toBe(false);
      expect(x.headers["x-service-event"]).toBe(x.json.event);
    }
    await all.waitFor(1, (x) => x.json.event === "payment.forwarded");
    // Neither refunds nor returns are payout events.
    expect(unrelated.received).toEqual([]);
  });

  it("delivers to a registration naming the refund events those events only", async () => {
    const ws = await createWorkspace(t);
    const named = await receiver();
    const secret = await register(ws.testKey, named.url, ["refund.completed", "refund.failed"]);
    const made = await threeRefunds(ws);
    const got = await named.waitFor(3, isRefundEvent);
    expectRefundEvents(got, made);
    for (const x of got) expect(hmacVerifies(secret, x.rawBody, x.headers["x-service-signature"])).toBe(true);
    expect(named.received.filter((x) => !isRefundEvent(x))).toEqual([]);
  });
});

// ---- payouts do not show refunds --------------------------------------------------------------

describe("payouts and refunds are apart", () => {
  it("GET /api/v1/payouts and its CSV export list payouts only", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    await faucet(ws, "10");
    await refundOk(ws.testKey, p.id as string, { amount: "1", destinationAddress: address() });
    await refundOk(ws.testKey, p.id as string, { amount: "1", destinationAddress: FAILURE_ADDRESS });
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "1" });
    expect((await returnTransfer(ws.testKey, transfer.id as string)).statusCode).toBe(201);

    expect(await getOk(ws.testKey, "/api/v1/payouts")).toMatchObject({ payouts: [], total: 0 });
    const csv = await get(ws.testKey, "/api/v1/payouts/export.csv");
    expect(csv.statusCode, csv.body).toBe(200);
    expect(csv.body.trim().split(/\r?\n/)).toHaveLength(1);

    const dest = address();
    const paid = await post(ws.testKey, "/api/v1/payouts", {
      tokenSymbol: "USDC",
      amount: "2",
      destinationAddress: dest,
    });
    expect(paid.statusCode, paid.body).toBe(200);
    const history = await getOk(ws.testKey, "/api/v1/payouts");
    expect(history.total).toBe(1);
    expect(history.payouts).toEqual([
      expect.objectContaining({
        details: expect.objectContaining({ amount: "2.00", destinationAddress: dest }),
      }),
    ]);
    const csvAfter = await get(ws.testKey, "/api/v1/payouts/export.csv");
    expect(csvAfter.body.trim().split(/\r?\n/)).toHaveLength(2);
  });

  it("GET /api/v1/wallet/stats counts payouts only, not refunds or returns", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    await refundOk(ws.testKey, p.id as string, { amount: "1", destinationAddress: address() });
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "1" });
    expect((await returnTransfer(ws.testKey, transfer.id as string)).statusCode).toBe(201);
    const stats = await getOk(ws.testKey, "/api/v1/wallet/stats");
    expect(stats.payouts).toEqual([]);
  });
});
