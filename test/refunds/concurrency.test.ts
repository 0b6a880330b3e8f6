import { randomBytes } from "node:crypto";
import type { LightMyRequestResponse } from "fastify";
import { describe, expect, it } from "vitest";
import { bearer, type CreatedWorkspace, createWorkspace, type TestApp } from "../support/app.ts";
import { type Instances, useInstances } from "../support/instances.ts";
import { pendingPayment } from "../support/refund-pages.ts";

// Refunds and returns under concurrency (D19): the sum of a payment's refunds never passes its
// gross, an unmatched transfer is returned once, and one Idempotency-Key makes one refund, however
// many requests race for it. Each scenario runs on one app instance, then on two instances that
// share one database: on PostgreSQL (DATABASE_URL) each instance has its own connection pool, as
// two service processes behind a load balancer have; on PGlite they share the in-memory database.

type Json = Record<string, unknown>;

const RACERS = 20;
const ENV = { RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" };
const EXCEEDED = "Refund exceeds the refundable amount";
const address = () => `0x${randomBytes(20).toString("hex")}`;

const setups = useInstances(ENV);

function post(app: TestApp, key: string, url: string, payload?: Json, headers: Record<string, string> = {}) {
  return app.request({
    method: "POST",
    url,
    headers: { ...bearer(key), ...headers },
    ...(payload === undefined ? {} : { payload }),
  });
}

async function pay(app: TestApp, ws: CreatedWorkspace, amount: string): Promise<Json> {
  const res = await post(app, ws.testKey, "/api/v1/payments", { tokenSymbol: "USDC", amount });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().payment;
}

async function faucet(app: TestApp, ws: CreatedWorkspace, amount: string) {
  const res = await post(app, ws.testKey, "/api/v1/sandbox/faucet", { tokenSymbol: "USDC", amount });
  expect(res.statusCode, res.body).toBe(200);
}

async function getOk(app: TestApp, key: string, url: string): Promise<Json> {
  const res = await app.request({ method: "GET", url, headers: bearer(key) });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

async function ledger(app: TestApp, addr: string): Promise<bigint> {
  const rows = await app.database.db
    .selectFrom("ledger_entries")
    .select("amount")
    .where("address", "=", addr.toLowerCase())
    .where("token_symbol", "=", "USDC")
    .execute();
  return rows.reduce((sum, row) => sum + BigInt(row.amount), 0n);
}

/** `RACERS` requests at once, alternating between the two instances. */
function race(
  { a, b }: Instances,
  send: (app: TestApp, i: number) => Promise<LightMyRequestResponse>,
): Promise<LightMyRequestResponse[]> {
  return Promise.all(Array.from({ length: RACERS }, (_, i) => send(i % 2 === 0 ? a : b, i)));
}

const usdcUnits = (amount: string) => {
  const [whole, fraction = ""] = amount.split(".");
  return BigInt(whole ?? "0") * 1_000_000n + BigInt(fraction.padEnd(6, "0"));
};

describe.each([
  { index: 0, label: "one app instance" },
  { index: 1, label: "two app instances on one database" },
])("$label", ({ index }) => {
  const setup = () => setups[index] as Instances;

  it(`${RACERS} concurrent refunds of 0.75 of a 10.00 payment: exactly 13 complete, the rest are refused with refundable 0.25`, async () => {
    const s = setup();
    const ws = await createWorkspace(s.a);
    const p = await pay(s.a, ws, "10");
    // Wallet: net 9.85 + faucet 5.00 = 14.85, enough for every request (20 × 0.75 = 15.00 asked of a 10.00 gross).
    await faucet(s.a, ws, "5");
    const destinations = Array.from({ length: RACERS }, () => address());
    const answers = await race(s, (app, i) =>
      post(app, ws.testKey, `/api/v1/payments/${p.id}/refunds`, {
        amount: "0.75",
        destinationAddress: destinations[i] as string,
      }),
    );

    const won = answers.flatMap((res, i) => (res.statusCode === 201 ? [i] : []));
    const lost = answers.flatMap((res, i) => (res.statusCode !== 201 ? [i] : []));
    // 13 × 0.75 = 9.75 ≤ 10.00 < 14 × 0.75.
    expect(won, s.name).toHaveLength(13);
    for (const i of won) {
      expect((answers[i] as LightMyRequestResponse).json().refund).toMatchObject({
        paymentId: p.id,
        amount: "0.75",
        status: "completed",
        destinationAddress: destinations[i],
      });
    }
    for (const i of lost) {
      const res = answers[i] as LightMyRequestResponse;
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toEqual({ error: EXCEEDED, refundable: "0.25" });
    }

    // Each winner's destination got exactly 0.75, each loser's nothing; the sum never passes the gross.
    for (const [i, destination] of destinations.entries()) {
      expect(await ledger(s.a, destination), `destination ${i}`).toBe(won.includes(i) ? 750_000n : 0n);
    }
    const list = await getOk(s.b, ws.testKey, `/api/v1/payments/${p.id}/refunds?limit=100`);
    expect(list.total).toBe(13);
    const refunds = list.refunds as Json[];
    const sum = refunds
      .filter((r) => r.status === "completed")
      .reduce((total, r) => total + usdcUnits(r.amount as string), 0n);
    expect(sum).toBe(9_750_000n);
    expect(sum).toBeLessThanOrEqual(10_000_000n);
    const payment = (await getOk(s.b, ws.testKey, `/api/v1/payments/${p.id}`)).payment as Json;
    expect(payment.refundedAmount).toBe("9.75");
    // 14.85 − 9.75 = 5.10
    expect(await ledger(s.a, ws.eoaAddress)).toBe(5_100_000n);
    const events = await s.a.database.db
      .selectFrom("outbox_events")
      .select("payload")
      .where("workspace_id", "=", ws.id)
      .where("event_type", "=", "refund.completed")
      .execute();
    expect(events).toHaveLength(13);
  });

  it(`${RACERS} concurrent refunds of the rest: one refunds the gross, the others get refundable 0.00`, async () => {
    const s = setup();
    const ws = await createWorkspace(s.a);
    const p = await pay(s.a, ws, "10");
    await faucet(s.a, ws, "100");
    const destination = address();
    const answers = await race(s, (app) =>
      post(app, ws.testKey, `/api/v1/payments/${p.id}/refunds`, { destinationAddress: destination }),
    );
    const won = answers.filter((res) => res.statusCode === 201);
    expect(won, s.name).toHaveLength(1);
    expect(won[0]?.json().refund).toMatchObject({ amount: "10.00", status: "completed" });
    for (const res of answers.filter((x) => x.statusCode !== 201)) {
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toEqual({ error: EXCEEDED, refundable: "0.00" });
    }
    expect(await ledger(s.a, destination)).toBe(10_000_000n);
    const payment = (await getOk(s.a, ws.testKey, `/api/v1/payments/${p.id}`)).payment as Json;
    expect(payment.refundedAmount).toBe("10.00");
  });

  it(`${RACERS} concurrent refunds, every third to the failure address: refundedAmount is the sum of those completed`, async () => {
    const s = setup();
    const ws = await createWorkspace(s.a);
    const p = await pay(s.a, ws, "10");
    await faucet(s.a, ws, "100");
    const FAILURE = "0x000000000000000000000000000000000000dEaD";
    const destinations = Array.from({ length: RACERS }, (_, i) => (i % 3 === 2 ? FAILURE : address()));
    const answers = await race(s, (app, i) =>
      post(app, ws.testKey, `/api/v1/payments/${p.id}/refunds`, {
        amount: "0.75",
        destinationAddress: destinations[i] as string,
      }),
    );
    let completed = 0n;
    for (const [i, res] of answers.entries()) {
      if (res.statusCode === 201) {
        const r = res.json().refund as Json;
        expect(r.status, res.body).toBe(destinations[i] === FAILURE ? "failed" : "completed");
        if (r.status === "completed") completed += usdcUnits(r.amount as string);
        expect(await ledger(s.a, destinations[i] as string)).toBe(
          destinations[i] === FAILURE ? 0n : r.status === "completed" ? 750_000n : 0n,
        );
      } else if (res.statusCode === 400) {
        expect(res.json()).toMatchObject({ error: EXCEEDED });
      } else {
        // The breaker paused refunds after the third failure.
        expect(res.statusCode, res.body).toBe(503);
        expect(res.json()).toMatchObject({ code: "CIRCUIT_BREAKER_OPEN" });
      }
    }
    expect(completed).toBeLessThanOrEqual(10_000_000n);
    const payment = (await getOk(s.b, ws.testKey, `/api/v1/payments/${p.id}`)).payment as Json;
    expect(usdcUnits(payment.refundedAmount as string), s.name).toBe(completed);
    const list = await getOk(s.a, ws.testKey, `/api/v1/payments/${p.id}/refunds?limit=100`);
    const listed = (list.refunds as Json[])
      .filter((r) => r.status === "completed")
      .reduce((total, r) => total + usdcUnits(r.amount as string), 0n);
    expect(listed).toBe(completed);
    expect((list.refunds as Json[]).every((r) => r.status !== "pending")).toBe(true);
    // 10.00 − 1.5 % + 100.00 − what was refunded
    expect(await ledger(s.a, ws.eoaAddress)).toBe(109_850_000n - completed);
  });

  it(`${RACERS} concurrent returns of one unmatched transfer: exactly one 201, the others 409`, async () => {
    const s = setup();
    const ws = await createWorkspace(s.a);
    // Money of its own in the wallet, so a second return could be paid if it were let through.
    await faucet(s.a, ws, "100");
    const payer = address();
    const created = await post(s.a, ws.testKey, "/api/v1/sandbox/incoming-transfer", {
      tokenSymbol: "USDC",
      amount: "6",
      fromAddress: payer,
    });
    expect(created.statusCode, created.body).toBe(201);
    const transfer = created.json().transfer as Json;
    const answers = await race(s, (app) =>
      post(app, ws.testKey, `/api/v1/transfers/unmatched/${transfer.id}/return`, {}),
    );
    const won = answers.filter((res) => res.statusCode === 201);
    expect(won, s.name).toHaveLength(1);
    expect(won[0]?.json().refund).toMatchObject({
      paymentId: null,
      unmatchedTransferId: transfer.id,
      amount: "6.00",
      destinationAddress: payer,
      status: "completed",
    });
    for (const res of answers.filter((x) => x.statusCode !== 201)) {
      expect(res.statusCode, res.body).toBe(409);
      expect(res.json().error).toMatch(
        /^Unmatched transfer (is already returned|changed concurrently; retry)$/,
      );
    }
    expect(await ledger(s.a, payer)).toBe(6_000_000n);
    // 100.00 + 6.00 − 6.00
    expect(await ledger(s.a, ws.eoaAddress)).toBe(100_000_000n);
    const list = await getOk(s.b, ws.testKey, "/api/v1/transfers/unmatched");
    expect(list.transfers).toEqual([{ ...transfer, status: "returned" }]);
    const rows = await s.a.database.db
      .selectFrom("payouts")
      .select(["kind", "status"])
      .where("workspace_id", "=", ws.id)
      .execute();
    expect(rows).toEqual([{ kind: "return", status: "completed" }]);
  });

  it(`${RACERS} concurrent attaches and returns of one transfer: exactly one of them wins`, async () => {
    const s = setup();
    const ws = await createWorkspace(s.a);
    await faucet(s.a, ws, "100");
    // Sandbox creation settles at once: the pending payments are written directly.
    const payments = await Promise.all(Array.from({ length: 2 }, () => pendingPayment(s.a, ws, "6000000")));
    const created = await post(s.a, ws.testKey, "/api/v1/sandbox/incoming-transfer", {
      tokenSymbol: "USDC",
      amount: "6",
    });
    expect(created.statusCode, created.body).toBe(201);
    const transfer = created.json().transfer as Json;
    // Even racers attach (to one of two payments), odd ones return.
    const answers = await race(s, (app, i) =>
      i % 2 === 0
        ? post(app, ws.testKey, `/api/v1/transfers/unmatched/${transfer.id}/attach`, {
            paymentId: payments[(i / 2) % 2],
          })
        : post(app, ws.testKey, `/api/v1/transfers/unmatched/${transfer.id}/return`, {}),
    );
    const won = answers.filter((res) => res.statusCode === 200 || res.statusCode === 201);
    expect(won, `${s.name}: ${answers.map((a) => a.statusCode).join(",")}`).toHaveLength(1);
    for (const res of answers.filter((x) => x.statusCode >= 300)) {
      expect(res.statusCode, res.body).toBe(409);
      expect(res.json().error).toMatch(
        /^Unmatched transfer (is already (returned|attached)|changed concurrently; retry)$/,
      );
    }
    const [row] = await s.a.database.db
      .selectFrom("unmatched_transfers")
      .select(["status", "payment_id"])
      .where("id", "=", transfer.id as string)
      .execute();
    const moved = await s.a.database.db
      .selectFrom("payments")
      .select(["id", "status", "amount_received"])
      .where("id", "in", payments)
      .execute();
    const returns = await s.a.database.db
      .selectFrom("payouts")
      .select("status")
      .where("unmatched_transfer_id", "=", transfer.id as string)
      .execute();
    if (won[0]?.statusCode === 200) {
      // Attached: to one payment only, and never returned.
      expect(row?.status).toBe("attached");
      expect(moved.filter((p) => p.status === "detected")).toEqual([
        { id: row?.payment_id, status: "detected", amount_received: "6000000" },
      ]);
      expect(returns).toEqual([]);
    } else {
      expect(row).toEqual({ status: "returned", payment_id: null });
      expect(moved.every((p) => p.status === "pending")).toBe(true);
      expect(returns).toEqual([{ status: "completed" }]);
    }
  });

  it(`${RACERS} concurrent refunds with one Idempotency-Key: one refund, every answer names it`, async () => {
    const s = setup();
    const ws = await createWorkspace(s.a);
    const p = await pay(s.a, ws, "10");
    const destination = address();
    const answers = await race(s, (app) =>
      post(
        app,
        ws.testKey,
        `/api/v1/payments/${p.id}/refunds`,
        { amount: "1.25", destinationAddress: destination },
        { "idempotency-key": `race-${p.id}` },
      ),
    );
    for (const res of answers) expect(res.statusCode, `${s.name}: ${res.body}`).toBe(201);
    const first = answers[0]?.json().refund as Json;
    expect(first).toMatchObject({ amount: "1.25", status: "completed", paymentId: p.id });
    for (const res of answers) expect(res.json()).toEqual({ refund: first });
    expect(answers.filter((res) => res.headers["idempotent-replayed"] === undefined)).toHaveLength(1);
    expect(answers.filter((res) => res.headers["idempotent-replayed"] === "true")).toHaveLength(RACERS - 1);

    expect(await ledger(s.a, destination)).toBe(1_250_000n);
    const payment = (await getOk(s.b, ws.testKey, `/api/v1/payments/${p.id}`)).payment as Json;
    expect(payment.refundedAmount).toBe("1.25");
    const list = await getOk(s.a, ws.testKey, `/api/v1/payments/${p.id}/refunds`);
    expect(list).toMatchObject({ total: 1, refunds: [first] });
  });
});
