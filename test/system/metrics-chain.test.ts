import { type Hex, parseUnits } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Devnet, startDevnet } from "../../src/devnet/chain.ts";
import { expireDuePayments } from "../../src/modules/payments/expiry.ts";
import { createWorkers, type Workers } from "../../src/workers.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { type DevnetClients, devnetClients } from "../support/devnet-clients.ts";
import { liveNetworkEnv } from "../support/devnet-env.ts";
import { moved, scrape, scrapeUntil } from "../support/prometheus.ts";

// The live rail's metrics on a real local chain, with the real workers: a payment paid on chain
// moves pending, detected, confirmed and forwarded by one each; the chain watcher reports its lag
// and last tick; the gas top-up of the receiving wallet is counted; a cancel and an expiry count.

const TOKEN = "metrics-chain-token-0123456789abcdef";
const TRANSITIONS = "payment_transitions_total";

const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;

let devnet: Devnet;
let t: TestApp;
let clients: DevnetClients;
let workers: Workers | undefined;
const read = () => scrape(t, TOKEN);

beforeAll(async () => {
  devnet = await startDevnet();
  t = await startTestApp(liveNetworkEnv(devnet, { METRICS_TOKEN: TOKEN }));
  clients = devnetClients(devnet);
}, 120_000);

afterEach(async () => {
  await workers?.stop();
  workers = undefined;
  t?.setNow(undefined);
});

afterAll(async () => {
  await workers?.stop();
  await t?.close();
  await devnet?.stop();
});

const live = (status: string) => `environment=live,rail=crypto,status=${status}`;

async function createLivePayment(ws: CreatedWorkspace, amount: string, extra: Record<string, unknown> = {}) {
  const res = await t.request({
    method: "POST",
    url: "/api/v1/payments",
    headers: bearer(ws.liveKey),
    payload: { tokenSymbol: "USDC", amount, merchantWallet: randomAddress(), ...extra },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as { payment: { id: string; status: string }; receivingAddress: Hex };
}

async function waitForStatus(ws: CreatedWorkspace, id: string, status: string, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  while (Date.now() < deadline) {
    const res = await t.request({
      method: "GET",
      url: `/api/v1/payments/${id}`,
      headers: bearer(ws.liveKey),
    });
    last = res.json().payment?.status;
    if (last === status) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`payment ${id} stayed ${last}, expected ${status}`);
}

function gasTopUps(address: string) {
  return t.database.db
    .selectFrom("chain_transactions")
    .select(["purpose", "status"])
    .where("purpose", "=", "gas_topup")
    .where((eb) => eb(eb.fn("lower", ["to_address"]), "=", address.toLowerCase()))
    .execute();
}

function startWorkers(): Workers {
  workers = createWorkers(t.app, { dispatcher: { pollIntervalMs: 50 } });
  workers.start();
  return workers;
}

describe("live crypto payment method on the devnet", () => {
  it("a payment paid on chain: pending, detected, confirmed, forwarded +1 each; watcher lag and tick age; one gas top-up", async () => {
    // No watcher has ticked in this process yet: no watcher series.
    const fresh = await read();
    expect(fresh.all("chain_watcher_lag_blocks")).toEqual([]);
    expect(fresh.all("chain_watcher_last_tick_age_seconds")).toEqual([]);

    const ws = await createWorkspace(t);
    const before = await read();
    const created = await createLivePayment(ws, "12");
    expect(created.payment.status).toBe("pending");

    startWorkers();
    // The gas top-up job's first tick funds the receiving EOA (it has no ETH), before any payment
    // needs it: the one top-up of this test, and the one recorded transaction of that purpose
    // (recorded before it is sent, marked mined once its receipt is in).
    const deadline = Date.now() + 20_000;
    const mined = async () => (await gasTopUps(ws.eoaAddress)).some((row) => row.status === "mined");
    while (!(await mined()) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(await gasTopUps(ws.eoaAddress)).toEqual([{ purpose: "gas_topup", status: "mined" }]);

    // The watcher has ticked: its lag (head − cursor) is a small whole number, its tick recent.
    const ticked = await scrapeUntil(
      read,
      "a watcher tick",
      (s) => !!s.find("chain_watcher_lag_blocks", { environment: "live", network: "default" }),
      20_000,
    );
    const lag =
      ticked.find("chain_watcher_lag_blocks", { environment: "live", network: "default" })?.value ?? -1;
    expect(Number.isInteger(lag)).toBe(true);
    expect(lag).toBeGreaterThanOrEqual(0);
    expect(lag).toBeLessThanOrEqual(3);
    const age =
      ticked.find("chain_watcher_last_tick_age_seconds", { environment: "live", network: "default" })
        ?.value ?? -1;
    expect(age).toBeGreaterThanOrEqual(0);
    expect(age).toBeLessThan(10);
    // Per environment only: the sandbox has no chain here.
    expect(ticked.all("chain_watcher_lag_blocks").map((s) => s.labels)).toEqual([
      { environment: "live", network: "default" },
    ]);

    await clients.sendUsdc(created.receivingAddress, parseUnits("12", 6));
    await waitForStatus(ws, created.payment.id, "forwarded");
    const after = await scrapeUntil(
      read,
      "forwarded counted",
      (s) => (moved(before, s, TRANSITIONS)[live("forwarded")] ?? 0) >= 1,
    );
    expect(moved(before, after, TRANSITIONS)).toEqual({
      [live("pending")]: 1,
      [live("detected")]: 1,
      [live("confirmed")]: 1,
      [live("forwarded")]: 1,
    });
    expect(moved(before, after, "gas_topups_total")).toEqual({ "environment=live,outcome=success": 1 });
    expect(await gasTopUps(ws.eoaAddress)).toHaveLength(1);

    // Still ticking: the last tick's age stays small, the lag small.
    const later = await scrapeUntil(
      read,
      "another tick",
      (s) =>
        (s.find("chain_watcher_last_tick_age_seconds", { environment: "live", network: "default" })?.value ??
          99) < 5,
    );
    expect(
      later.find("chain_watcher_lag_blocks", { environment: "live", network: "default" })?.value,
    ).toBeLessThanOrEqual(3);
    // No tenant in a label: neither the payment, the workspace nor an address.
    for (const value of later.labelValues()) {
      expect(value).not.toMatch(/0x[0-9a-f]{40}/i);
      expect(value).not.toMatch(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i);
    }
    for (const tenant of [ws.id, created.payment.id, ws.eoaAddress.toLowerCase(), ws.eoaAddress]) {
      expect(later.text).not.toContain(tenant);
    }

    // Once the watcher stops ticking, its last tick ages: what an operator alerts on.
    await workers?.stop();
    workers = undefined;
    const stopped = await read();
    const ageAtStop =
      stopped.find("chain_watcher_last_tick_age_seconds", { environment: "live", network: "default" })
        ?.value ?? -1;
    const aged = await scrapeUntil(
      read,
      "the last tick to age",
      (s) =>
        (s.find("chain_watcher_last_tick_age_seconds", { environment: "live", network: "default" })?.value ??
          0) >=
        ageAtStop + 1,
    );
    expect(aged.find("chain_watcher_lag_blocks", { environment: "live", network: "default" })).toBeDefined();
  });

  it("a cancelled live payment: pending +1, cancelled +1, its POST counted under the route pattern", async () => {
    const ws = await createWorkspace(t);
    const before = await read();
    const created = await createLivePayment(ws, "3");
    const res = await t.request({
      method: "POST",
      url: `/api/v1/payments/${created.payment.id}/cancel`,
      headers: bearer(ws.liveKey),
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().payment.status).toBe("cancelled");
    const cancel = { method: "POST", route: "/api/v1/payments/:id/cancel", status_class: "2xx" };
    const after = await scrapeUntil(
      read,
      "the cancel counted",
      (s) =>
        s.count("http_request_duration_seconds_count", cancel) >
        before.count("http_request_duration_seconds_count", cancel),
    );
    expect(moved(before, after, TRANSITIONS)).toEqual({ [live("pending")]: 1, [live("cancelled")]: 1 });
    expect(
      after.count("http_request_duration_seconds_count", cancel) -
        before.count("http_request_duration_seconds_count", cancel),
    ).toBe(1);

    // Cancelling it again is refused and counts nothing.
    const again = await t.request({
      method: "POST",
      url: `/api/v1/payments/${created.payment.id}/cancel`,
      headers: bearer(ws.liveKey),
    });
    expect(again.statusCode).toBe(400);
    expect(moved(after, await read(), TRANSITIONS)).toEqual({});
  });

  it("an expired live payment: expired +1 for exactly the payments the expiry moved", async () => {
    const ws = await createWorkspace(t);
    const created = await createLivePayment(ws, "4", { expiresInMinutes: 1 });
    const before = await read();
    // The expiry job's own function, at a time past the payment's expiry.
    const expired = await expireDuePayments(
      t.app.ctx.db,
      new Date(Date.now() + 2 * 60_000),
      t.app.ctx.metrics,
    );
    expect(expired).toBe(1);
    await waitForStatus(ws, created.payment.id, "expired");
    expect(moved(before, await read(), TRANSITIONS)).toEqual({ [live("expired")]: 1 });
  });
});
