import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { WebhookDispatcher } from "../../src/modules/webhooks/dispatcher.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { moved, scrape, scrapeUntil } from "../support/prometheus.ts";
import { WebhookReceiver } from "../support/receiver.ts";

// Webhook delivery metrics of the real app on a real database, sent by a real dispatcher to a
// real receiver on 127.0.0.1 whose answer the test flips: the backlog of due deliveries before it
// is sent, each attempt counted by its outcome (retrying, delivered, failed for good) and timed.
// The dispatcher is driven by hand (runOnce, drain): the test decides when each attempt happens.

const TOKEN = "metrics-webhooks-token-0123456789abcdef";

let t: TestApp;
const read = () => scrape(t, TOKEN);

beforeAll(async () => {
  t = await startTestApp({ METRICS_TOKEN: TOKEN, RATE_LIMIT_SANDBOX: "100000" });
});

afterAll(async () => {
  await t?.close();
});

const workspace = () => createWorkspace(t);

function post(key: string, url: string, payload?: Record<string, unknown>) {
  return t.request({ method: "POST", url, headers: bearer(key), ...(payload ? { payload } : {}) });
}

async function sandboxPayment(ws: CreatedWorkspace): Promise<void> {
  const res = await post(ws.testKey, "/api/v1/payments", { tokenSymbol: "USDC", amount: "25" });
  expect(res.statusCode, res.body).toBe(201);
}

/** Claims until one delivery is claimed (it is due after its retry delay), at most 10 s. */
async function claimOne(dispatcher: WebhookDispatcher): Promise<void> {
  const deadline = Date.now() + 10_000;
  let claimed = 0;
  while (claimed === 0 && Date.now() < deadline) {
    claimed = await dispatcher.runOnce();
    if (claimed === 0) await new Promise((r) => setTimeout(r, 25));
  }
  expect(claimed).toBe(1);
  await dispatcher.drain();
}

describe("webhook deliveries", () => {
  const receivers: WebhookReceiver[] = [];
  const dispatchers: WebhookDispatcher[] = [];
  afterEach(async () => {
    await Promise.all(receivers.splice(0).map((r) => r.stop()));
    await Promise.all(dispatchers.splice(0).map((d) => d.stop()));
  });

  it("a delivery that fails then succeeds: due before it is sent, retrying +1, then delivered +1, each timed", async () => {
    const receiver = new WebhookReceiver();
    await receiver.start();
    receivers.push(receiver);
    receiver.respond = () => ({ status: 500 });
    const ws = await workspace();
    const registered = await post(ws.testKey, "/api/v1/webhooks", {
      url: receiver.url,
      events: ["payment.forwarded"],
    });
    expect(registered.statusCode, registered.body).toBe(201);
    // Claimed by hand (runOnce), so the test decides when each attempt happens.
    const dispatcher = new WebhookDispatcher(t.app.ctx, {
      pollIntervalMs: 25,
      retryDelaysMs: [50, 50],
      random: () => 0.5,
    });
    dispatchers.push(dispatcher);

    const before = await read();
    expect(before.find("webhook_deliveries_due")?.value).toBe(0);
    expect(before.find("webhook_oldest_due_delivery_age_seconds")?.value).toBe(0);
    await sandboxPayment(ws);
    const due = await scrapeUntil(
      read,
      "the delivery due",
      (s) => (s.find("webhook_deliveries_due")?.value ?? 0) >= 1,
    );
    expect(due.find("webhook_deliveries_due")?.value).toBe(1);
    const age = due.find("webhook_oldest_due_delivery_age_seconds")?.value ?? -1;
    expect(age).toBeGreaterThanOrEqual(0);
    expect(age).toBeLessThan(30);
    expect(moved(before, due, "webhook_delivery_attempts_total")).toEqual({});

    const attempts = "webhook_delivery_attempts_total";
    const seconds = "webhook_delivery_attempt_duration_seconds_count";
    expect(await dispatcher.runOnce()).toBe(1);
    await dispatcher.drain();
    expect(receiver.received).toHaveLength(1);
    const failedOnce = await read();
    expect(moved(before, failedOnce, attempts)).toEqual({ "outcome=retrying": 1 });
    expect(moved(before, failedOnce, seconds)).toEqual({ "outcome=retrying": 1 });
    const sum = "webhook_delivery_attempt_duration_seconds_sum";
    expect(failedOnce.count(sum, { outcome: "retrying" })).toBeGreaterThan(
      before.count(sum, { outcome: "retrying" }),
    );

    // Due again 50 ms later; the receiver now answers 200.
    receiver.respond = () => ({ status: 200 });
    await claimOne(dispatcher);
    expect(receiver.received).toHaveLength(2);
    const delivered = await read();
    expect(moved(failedOnce, delivered, attempts)).toEqual({ "outcome=delivered": 1 });
    expect(moved(failedOnce, delivered, seconds)).toEqual({ "outcome=delivered": 1 });
    expect(moved(before, delivered, attempts)).toEqual({ "outcome=retrying": 1, "outcome=delivered": 1 });
    expect(delivered.find("webhook_deliveries_due")?.value).toBe(0);
    expect(delivered.find("webhook_oldest_due_delivery_age_seconds")?.value).toBe(0);
  });

  it("a delivery that fails on its last attempt: retrying +1, then failed +1, and it is no longer due", async () => {
    const receiver = new WebhookReceiver();
    await receiver.start();
    receivers.push(receiver);
    receiver.respond = () => ({ status: 503 });
    const ws = await workspace();
    const registered = await post(ws.testKey, "/api/v1/webhooks", {
      url: receiver.url,
      events: ["payment.forwarded"],
    });
    expect(registered.statusCode, registered.body).toBe(201);
    // One retry only: the second failure is the last.
    const dispatcher = new WebhookDispatcher(t.app.ctx, { retryDelaysMs: [50], random: () => 0.5 });
    dispatchers.push(dispatcher);

    const before = await read();
    await sandboxPayment(ws);
    await scrapeUntil(read, "the delivery due", (s) => s.find("webhook_deliveries_due")?.value === 1);
    await claimOne(dispatcher);
    await claimOne(dispatcher);
    expect(receiver.received).toHaveLength(2);
    const after = await read();
    expect(moved(before, after, "webhook_delivery_attempts_total")).toEqual({
      "outcome=retrying": 1,
      "outcome=failed": 1,
    });
    expect(moved(before, after, "webhook_delivery_attempt_duration_seconds_count")).toEqual({
      "outcome=retrying": 1,
      "outcome=failed": 1,
    });
    expect(after.find("webhook_deliveries_due")?.value).toBe(0);
    expect(await dispatcher.runOnce()).toBe(0);
  });
});
