import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebhookDispatcher } from "../../src/modules/webhooks/dispatcher.ts";
import { bearer, type CreatedWorkspace, createWorkspace } from "../support/app.ts";
import { WebhookReceiver } from "../support/receiver.ts";
import {
  address,
  balance,
  eventTypes,
  get,
  getOk,
  type Json,
  ledgerTx,
  ledgerTxsTo,
  pay,
  putSplits,
  SETTLEMENT_ADDRESS,
  SETTLEMENT_KEYS,
  SPLIT_EVENT_KEYS,
  settlementOf,
  splitId,
  TX,
  t,
  UUID,
  useSettlementsApp,
  withoutCreatedAt,
} from "../support/settlements.ts";

// Settlement events and webhooks, and GET /api/v1/settlements; the carving itself is in
// settlements.test.ts, the shared helpers in support/settlements.ts.

useSettlementsApp();

describe("payments without split events", () => {
  it("card sandbox payments carry no splits: no settlement, no settlement events, nothing to the destinations", async () => {
    const ws = await createWorkspace(t);
    const partner = address();
    await putSplits(ws.testKey, {
      enabled: true,
      splits: [{ label: "Partner", percentBps: 5000, destination: partner }],
    });
    const card = await pay(ws.testKey, { paymentMethod: "card", tokenSymbol: "USD", amount: "100" });
    expect(card.status).toBe("forwarded");
    expect(await getOk(ws.testKey, `/api/v1/settlements?paymentId=${card.id}`)).toEqual({
      settlements: [],
      total: 0,
    });
    expect(await getOk(ws.testKey, "/api/v1/settlements")).toEqual({ settlements: [], total: 0 });
    expect(await eventTypes(ws.id)).toEqual(["payment.created", "payment.forwarded"]);
    expect(await ledgerTxsTo(partner)).toEqual([]);
  });

  it("splits disabled (or never configured): a settlement is listed, the merchant gets the net, no settlement events", async () => {
    const ws = await createWorkspace(t);
    const never = await pay(ws.testKey, { tokenSymbol: "USDC", amount: "100" });
    const partner = address();
    await putSplits(ws.testKey, {
      enabled: false,
      splits: [{ label: "Partner", percentBps: 5000, destination: partner }],
    });
    const disabled = await pay(ws.testKey, { tokenSymbol: "USDC", amount: "100" });
    for (const payment of [never, disabled]) {
      const s = await settlementOf(ws.testKey, payment.id as string);
      expect(s).toEqual({
        settlementId: expect.stringMatching(UUID),
        paymentIds: [payment.id],
        network: "sandbox-a",
        tokenSymbol: "USDC",
        grossAmount: "100.00",
        feeAmount: "1.50",
        netAmount: "98.50",
        merchantAmount: "98.50",
        merchantWallet: SETTLEMENT_ADDRESS,
        txRef: expect.stringMatching(TX),
        splits: [],
        createdAt: payment.createdAt,
      });
      expect(await ledgerTx(s.txRef)).toMatchObject({ to: ws.eoaAddress.toLowerCase(), amount: 98_500_000n });
    }
    expect(await balance(partner, "USDC")).toBe(0n);
    expect(await balance(ws.eoaAddress, "USDC")).toBe(197_000_000n);
    expect(await eventTypes(ws.id)).toEqual([
      "payment.created",
      "payment.forwarded",
      "payment.created",
      "payment.forwarded",
    ]);
  });
});

describe("settlement webhooks", () => {
  let dispatcher: WebhookDispatcher;
  const receivers: WebhookReceiver[] = [];
  beforeAll(async () => {
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

  async function register(key: string, url: string, events: string[]): Promise<number> {
    const res = await t.request({
      method: "POST",
      url: "/api/v1/webhooks",
      headers: bearer(key),
      payload: { url, events },
    });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().webhook.id;
  }

  async function deliveryTypes(endpointId: number): Promise<string[]> {
    const rows = await t.database.db
      .selectFrom("webhook_deliveries")
      .select(["event_type"])
      .where("endpoint_id", "=", endpointId)
      .orderBy("id", "asc")
      .execute();
    return rows.map((r) => r.event_type).sort();
  }

  it("delivers settlement.recorded and split.recorded as exactly {event, data}, field by field", async () => {
    const ws = await createWorkspace(t);
    const [partner, dust] = [address(), address()];
    const config = await putSplits(ws.testKey, {
      enabled: true,
      splits: [
        { label: "Partner", percentBps: 2000, destination: partner },
        { label: "Dust", percentBps: 1, destination: dust },
      ],
    });
    const named = await receiver();
    const all = await receiver();
    const other = await receiver();
    const namedId = await register(ws.testKey, named.url, ["settlement.recorded", "split.recorded"]);
    await register(ws.testKey, all.url, ["*"]);
    const otherId = await register(ws.testKey, other.url, ["payment.forwarded"]);

    const payment = await pay(ws.testKey, { tokenSymbol: "USDC", amount: "0.04" });
    const s = await settlementOf(ws.testKey, payment.id as string);
    // gross 40 000; fee (6 000 000 + 5000) / 10000 = 600; net 39 400.
    // Partner 20% = 7 880; Dust 1 bps = 3.94 → 3; merchant 39 400 − 7 883 = 31 517.
    const settlementData = {
      settlementId: s.settlementId,
      paymentIds: [payment.id],
      network: "sandbox-a",
      tokenSymbol: "USDC",
      grossAmount: "0.04",
      feeAmount: "0.0006",
      netAmount: "0.0394",
      merchantAmount: "0.031517",
      merchantWallet: SETTLEMENT_ADDRESS,
      txRef: s.txRef,
      splits: [
        {
          splitId: splitId(config, "Partner"),
          label: "Partner",
          amount: "0.00788",
          percent_bps: 2000,
          destination: partner,
          status: "sent",
          txRef: expect.stringMatching(TX),
        },
        {
          splitId: splitId(config, "Dust"),
          label: "Dust",
          amount: "0.000003",
          percent_bps: 1,
          destination: dust,
          status: "sent",
          txRef: expect.stringMatching(TX),
        },
      ],
    };
    expect(withoutCreatedAt(s)).toEqual(settlementData);
    const splits = s.splits as Json[];
    const splitData = splits.map((x) => ({
      settlementId: s.settlementId,
      splitId: x.splitId,
      label: x.label,
      amount: x.amount,
      percent_bps: x.percent_bps,
      destination: x.destination,
      status: "sent",
      txRef: x.txRef,
      paymentIds: [payment.id],
      network: "sandbox-a",
    }));

    const settlementEvent = (r: { json: Json }) => r.json.event === "settlement.recorded";
    const splitEvent = (r: { json: Json }) => r.json.event === "split.recorded";
    for (const r of [named, all]) {
      const [recorded] = await r.waitFor(1, settlementEvent);
      const perSplit = await r.waitFor(2, splitEvent);
      expect(Object.keys(recorded?.json ?? {})).toEqual(["event", "data"]);
      expect(recorded?.json).toEqual({ event: "settlement.recorded", data: settlementData });
      expect(Object.keys((recorded?.json.data as Json) ?? {}).sort()).toEqual(
        SETTLEMENT_KEYS.filter((k) => k !== "createdAt"),
      );
      for (const delivered of perSplit) {
        expect(Object.keys(delivered.json)).toEqual(["event", "data"]);
        expect(Object.keys(delivered.json.data as Json).sort()).toEqual(SPLIT_EVENT_KEYS);
      }
      const bySplit = (x: { json: Json }) => (x.json.data as Json).label as string;
      expect(
        perSplit.map((x) => x.json).sort((a, b) => bySplit({ json: a }).localeCompare(bySplit({ json: b }))),
      ).toEqual([
        { event: "split.recorded", data: splitData[1] },
        { event: "split.recorded", data: splitData[0] },
      ]);
    }
    // "*" also had the payment's own events; the named subscription and payment.forwarded only theirs.
    await all.waitFor(1, (r) => r.json.event === "payment.forwarded");
    await other.waitFor(1, (r) => r.json.event === "payment.forwarded");
    expect(await deliveryTypes(namedId)).toEqual(["settlement.recorded", "split.recorded", "split.recorded"]);
    expect(await deliveryTypes(otherId)).toEqual(["payment.forwarded"]);
    expect(named.received.map((r) => r.json.event).sort()).toEqual([
      "settlement.recorded",
      "split.recorded",
      "split.recorded",
    ]);
  });

  it("delivers no settlement events for a payment whose splits were off, nor for a card payment", async () => {
    const ws = await createWorkspace(t);
    const all = await receiver();
    const allId = await register(ws.testKey, all.url, ["*"]);
    await putSplits(ws.testKey, {
      enabled: false,
      splits: [{ label: "Partner", percentBps: 2000, destination: address() }],
    });
    const crypto = await pay(ws.testKey, { tokenSymbol: "USDC", amount: "10" });
    await putSplits(ws.testKey, {
      enabled: true,
      splits: [{ label: "Partner", percentBps: 2000, destination: address() }],
    });
    const card = await pay(ws.testKey, { paymentMethod: "card", tokenSymbol: "USD", amount: "10" });
    // The deliveries are recorded with the payment, in its statement: all there is, already.
    expect(await deliveryTypes(allId)).toEqual([
      "payment.created",
      "payment.created",
      "payment.forwarded",
      "payment.forwarded",
    ]);
    const got = await all.waitFor(4);
    expect(got.map((r) => [r.json.event, (r.json.data as Json).id]).sort()).toEqual(
      [
        ["payment.created", crypto.id],
        ["payment.created", card.id],
        ["payment.forwarded", crypto.id],
        ["payment.forwarded", card.id],
      ].sort(),
    );
    expect((await getOk(ws.testKey, "/api/v1/settlements")).total).toBe(1);
  });
});

describe("GET /api/v1/settlements: scope, filters, paging", () => {
  let ws: CreatedWorkspace;
  let payments: Json[];
  beforeAll(async () => {
    ws = await createWorkspace(t);
    await putSplits(ws.testKey, {
      enabled: true,
      splits: [{ label: "Partner", percentBps: 1000, destination: address() }],
    });
    // Five payments settled a second apart (the clock is the app's), newest last.
    payments = [];
    const base = Date.now() - 60_000;
    try {
      for (let i = 0; i < 5; i++) {
        t.setNow(new Date(base + i * 1000));
        payments.push(await pay(ws.testKey, { tokenSymbol: "USDC", amount: `${i + 1}` }));
      }
    } finally {
      t.setNow(undefined);
    }
    // A card payment settles with the provider: no settlement of ours.
    await pay(ws.testKey, { paymentMethod: "card", tokenSymbol: "USD", amount: "10" });
  });

  it("lists the crypto payments' settlements, most recent first, with their total", async () => {
    const list = await getOk(ws.testKey, "/api/v1/settlements");
    expect(list.total).toBe(5);
    const settlements = list.settlements as Json[];
    expect(settlements.map((s) => (s.paymentIds as string[])[0])).toEqual(
      payments.map((p) => p.id).reverse(),
    );
    expect(settlements.map((s) => s.grossAmount)).toEqual(["5.00", "4.00", "3.00", "2.00", "1.00"]);
    expect(settlements.map((s) => s.createdAt)).toEqual(payments.map((p) => p.createdAt).reverse());
    for (const s of settlements)
      expect(await getOk(ws.testKey, `/api/v1/settlements/${s.settlementId}`)).toEqual({ settlement: s });
  });

  it("pages with limit and offset, the total always the whole count", async () => {
    const all = ((await getOk(ws.testKey, "/api/v1/settlements")).settlements as Json[]).map(
      (s) => s.settlementId,
    );
    const pages = [];
    for (const offset of [0, 2, 4]) {
      const page = await getOk(ws.testKey, `/api/v1/settlements?limit=2&offset=${offset}`);
      expect(page.total).toBe(5);
      pages.push((page.settlements as Json[]).map((s) => s.settlementId));
    }
    expect(pages.map((p) => p.length)).toEqual([2, 2, 1]);
    expect(pages.flat()).toEqual(all);
    expect(await getOk(ws.testKey, "/api/v1/settlements?limit=2&offset=5")).toEqual({
      settlements: [],
      total: 5,
    });
    expect(await getOk(ws.testKey, "/api/v1/settlements?limit=1&offset=1")).toMatchObject({
      total: 5,
      settlements: [{ settlementId: all[1] }],
    });
    // The filter and paging combine.
    const first = payments[0]?.id as string;
    expect(await getOk(ws.testKey, `/api/v1/settlements?paymentId=${first}&offset=1`)).toEqual({
      settlements: [],
      total: 1,
    });
  });

  it.each(["limit=0", "limit=101", "limit=x", "offset=-1", "offset=x"])(
    "refuses %s with 400",
    async (query) => {
      const res = await get(ws.testKey, `/api/v1/settlements?${query}`);
      expect(res.statusCode, res.body).toBe(400);
      expect(typeof res.json().error).toBe("string");
    },
  );

  it("filters by paymentId: a non-uuid or unknown id is an empty list, never an error", async () => {
    for (const paymentId of [
      "not-a-uuid",
      "123",
      "00000000-0000-0000-0000-00000000000g",
      "' OR 1=1 --",
      randomUUID(),
    ]) {
      const res = await get(ws.testKey, `/api/v1/settlements?paymentId=${encodeURIComponent(paymentId)}`);
      expect(res.statusCode, `${paymentId}: ${res.body}`).toBe(200);
      expect(res.json()).toEqual({ settlements: [], total: 0 });
    }
    // Upper case is the same uuid.
    const id = payments[2]?.id as string;
    const upper = await getOk(ws.testKey, `/api/v1/settlements?paymentId=${id.toUpperCase()}`);
    expect(upper.total).toBe(1);
  });

  it("another workspace, and the other environment, never see a settlement: 404 and not listed", async () => {
    const other = await createWorkspace(t);
    const mine = (await getOk(ws.testKey, "/api/v1/settlements")).settlements as Json[];
    const id = mine[0]?.settlementId as string;
    for (const key of [other.testKey, other.liveKey, ws.liveKey]) {
      const res = await get(key, `/api/v1/settlements/${id}`);
      expect(res.statusCode, res.body).toBe(404);
      expect(typeof res.json().error).toBe("string");
      expect(await getOk(key, "/api/v1/settlements")).toEqual({ settlements: [], total: 0 });
      expect(await getOk(key, `/api/v1/settlements?paymentId=${payments[0]?.id}`)).toEqual({
        settlements: [],
        total: 0,
      });
    }
    // The other workspace's own settlement is its own only.
    const theirs = await pay(other.testKey, { tokenSymbol: "USDC", amount: "1" });
    const theirSettlement = await settlementOf(other.testKey, theirs.id as string);
    expect((await get(ws.testKey, `/api/v1/settlements/${theirSettlement.settlementId}`)).statusCode).toBe(
      404,
    );
    expect((await getOk(ws.testKey, "/api/v1/settlements")).total).toBe(5);
  });

  it("answers 404 for an unknown or malformed settlement id, and for a payment's id", async () => {
    for (const id of [randomUUID(), "not-a-uuid", "1", payments[0]?.id as string]) {
      const res = await get(ws.testKey, `/api/v1/settlements/${encodeURIComponent(id)}`);
      expect(res.statusCode, `${id}: ${res.body}`).toBe(404);
      expect(typeof res.json().error).toBe("string");
    }
  });

  it("needs an API key", async () => {
    expect((await t.request({ method: "GET", url: "/api/v1/settlements" })).statusCode).toBe(401);
    const id = ((await getOk(ws.testKey, "/api/v1/settlements")).settlements as Json[])[0]?.settlementId;
    expect((await t.request({ method: "GET", url: `/api/v1/settlements/${id}` })).statusCode).toBe(401);
  });
});
