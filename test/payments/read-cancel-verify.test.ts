import { beforeAll, describe, expect, it } from "vitest";
import { bearer, type CreatedWorkspace, createWorkspace, startTestApp } from "../support/app.ts";
import {
  ACCOUNT_SETTLEMENT,
  createOk,
  createPayment,
  expectError,
  get,
  insertPayment,
  type Json,
  MERCHANT,
  MSG,
  outboxRows,
  paymentRows,
  post,
  SETTLEMENT,
  t,
  usePaymentsApp,
} from "../support/payments.ts";

// Reading, listing, cancelling and verifying payments (and the settlement address they fall back to);
// creating them: payments.test.ts; shared helpers: support/payments.ts.

usePaymentsApp();

describe("settlement address fallback", () => {
  it("uses merchantWallet, then the workspace settlement address", async () => {
    const ws = await createWorkspace(t);
    const explicit = await createOk(ws.testKey, {
      tokenSymbol: "USDC",
      amount: "1",
      merchantWallet: MERCHANT,
    });
    expect((explicit.payment as Json).merchantWallet).toBe(MERCHANT);
    const fallback = await createOk(ws.testKey, { tokenSymbol: "USDC", amount: "1" });
    expect((fallback.payment as Json).merchantWallet).toBe(SETTLEMENT);
  });

  it("prefers the workspace settlement address over the account one, then the account one, then fails", async () => {
    const t2 = await startTestApp({ ACCOUNT_SETTLEMENT_ADDRESS: ACCOUNT_SETTLEMENT });
    try {
      const withWorkspace = await createWorkspace(t2);
      const a = await t2.request({
        method: "POST",
        url: "/api/v1/payments",
        headers: bearer(withWorkspace.testKey),
        payload: { tokenSymbol: "USDC", amount: "1" },
      });
      expect(a.statusCode, a.body).toBe(201);
      expect(a.json().payment.merchantWallet).toBe(SETTLEMENT);

      const withoutWorkspace = await createWorkspace(t2, { settlementAddress: undefined });
      const b = await t2.request({
        method: "POST",
        url: "/api/v1/payments",
        headers: bearer(withoutWorkspace.testKey),
        payload: { tokenSymbol: "USDC", amount: "1" },
      });
      expect(b.statusCode, b.body).toBe(201);
      expect(b.json().payment.merchantWallet).toBe(ACCOUNT_SETTLEMENT);

      const card = await t2.request({
        method: "POST",
        url: "/api/v1/payments",
        headers: bearer(withoutWorkspace.testKey),
        payload: { paymentMethod: "card", tokenSymbol: "USD", amount: "5" },
      });
      expect(card.statusCode, card.body).toBe(201);
      expect(card.json().payment.merchantWallet).toBe(ACCOUNT_SETTLEMENT);
    } finally {
      await t2.close();
    }

    // The main app has no account-level address: the same request fails.
    const bare = await createWorkspace(t, { settlementAddress: undefined });
    await expectError(
      createPayment(bare.testKey, { tokenSymbol: "USDC", amount: "1" }),
      400,
      MSG.noSettlement,
    );
  });
});

describe("GET /api/v1/payments (list)", () => {
  let ws: CreatedWorkspace;
  const ids: string[] = []; // oldest first
  let pendingId: string;

  beforeAll(async () => {
    ws = await createWorkspace(t);
    const base = Date.now() - 60 * 60_000;
    try {
      for (let i = 0; i < 5; i++) {
        t.setNow(new Date(base + i * 1000));
        const body = await createOk(ws.testKey, { tokenSymbol: "USDC", amount: `${i + 1}` });
        ids.push((body.payment as Json).id as string);
      }
    } finally {
      t.setNow(undefined);
    }
    pendingId = await insertPayment(ws, { createdAt: new Date(base + 10_000) });
    ids.push(pendingId);
    // A live payment of the same workspace never shows in sandbox lists.
    await insertPayment(ws, { environment: "live", createdAt: new Date(base + 20_000) });
  });

  it("answers {payments, total}, newest first, only the key's environment", async () => {
    const res = await get(ws.testKey, "/api/v1/payments");
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(["payments", "total"]);
    expect(body.total).toBe(6);
    expect(body.payments.map((p: Json) => p.id)).toEqual([...ids].reverse());
    for (const p of body.payments) expect(p.environment).toBe("sandbox");
  });

  it("filters by status", async () => {
    const pending = (await get(ws.testKey, "/api/v1/payments?status=pending")).json();
    expect(pending.total).toBe(1);
    expect(pending.payments.map((p: Json) => p.id)).toEqual([pendingId]);

    const forwarded = (await get(ws.testKey, "/api/v1/payments?status=forwarded")).json();
    expect(forwarded.total).toBe(5);
    expect(forwarded.payments.every((p: Json) => p.status === "forwarded")).toBe(true);

    const cancelled = (await get(ws.testKey, "/api/v1/payments?status=cancelled")).json();
    expect(cancelled).toEqual({ payments: [], total: 0 });

    const bad = await get(ws.testKey, "/api/v1/payments?status=bogus");
    expect(bad.statusCode).toBe(400);
  });

  it("treats an environment filter equal to the key's like no filter, and the other one as an empty page", async () => {
    const all = (await get(ws.testKey, "/api/v1/payments")).json();
    const same = await get(ws.testKey, "/api/v1/payments?environment=sandbox");
    expect(same.statusCode).toBe(200);
    expect(same.json()).toEqual(all);

    const other = await get(ws.testKey, "/api/v1/payments?environment=live");
    expect(other.statusCode).toBe(200);
    expect(other.json()).toEqual({ payments: [], total: 0 });

    const liveOwn = (await get(ws.liveKey, "/api/v1/payments")).json();
    expect(liveOwn.total).toBe(1);
    expect(liveOwn.payments[0].environment).toBe("live");
    const liveOther = (await get(ws.liveKey, "/api/v1/payments?environment=sandbox")).json();
    expect(liveOther).toEqual({ payments: [], total: 0 });
  });

  it("pages with limit and offset while total stays the full count", async () => {
    const newestFirst = [...ids].reverse();
    const first = (await get(ws.testKey, "/api/v1/payments?limit=2")).json();
    expect(first.total).toBe(6);
    expect(first.payments.map((p: Json) => p.id)).toEqual(newestFirst.slice(0, 2));

    const second = (await get(ws.testKey, "/api/v1/payments?limit=2&offset=2")).json();
    expect(second.total).toBe(6);
    expect(second.payments.map((p: Json) => p.id)).toEqual(newestFirst.slice(2, 4));

    const last = (await get(ws.testKey, "/api/v1/payments?limit=4&offset=4")).json();
    expect(last.total).toBe(6);
    expect(last.payments.map((p: Json) => p.id)).toEqual(newestFirst.slice(4));

    const beyond = (await get(ws.testKey, "/api/v1/payments?offset=100")).json();
    expect(beyond).toEqual({ payments: [], total: 6 });

    const bounds = await get(ws.testKey, "/api/v1/payments?limit=1");
    expect(bounds.json().payments).toHaveLength(1);
    const max = await get(ws.testKey, "/api/v1/payments?limit=100");
    expect(max.statusCode).toBe(200);
    expect(max.json().payments).toHaveLength(6);
  });

  it.each([
    ["limit=0"],
    ["limit=101"],
    ["limit=abc"],
    ["limit=-1"],
    ["limit=1.5"],
    ["offset=-1"],
    ["offset=abc"],
  ])("answers 400 for %s (never clamped)", async (query) => {
    await expectError(get(ws.testKey, `/api/v1/payments?${query}`), 400);
  });

  it("returns 50 payments by default while total counts all of them", async () => {
    const many = await createWorkspace(t);
    const base = Date.now() - 2 * 60 * 60_000;
    for (let i = 0; i < 55; i++) await insertPayment(many, { createdAt: new Date(base + i * 1000) });
    const res = (await get(many.testKey, "/api/v1/payments")).json();
    expect(res.total).toBe(55);
    expect(res.payments).toHaveLength(50);
    const rest = (await get(many.testKey, "/api/v1/payments?offset=50")).json();
    expect(rest.total).toBe(55);
    expect(rest.payments).toHaveLength(5);
  });

  it("does not list another workspace's payments", async () => {
    const other = await createWorkspace(t);
    expect((await get(other.testKey, "/api/v1/payments")).json()).toEqual({ payments: [], total: 0 });
  });
});

describe("GET /api/v1/payments/{id}", () => {
  it("reads the workspace's own payment", async () => {
    const ws = await createWorkspace(t);
    const created = await createOk(ws.testKey, { tokenSymbol: "USDC", amount: "7" });
    const payment = created.payment as Json;
    const res = await get(ws.testKey, `/api/v1/payments/${payment.id}`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ payment });
  });

  it("answers 404 Payment not found for another workspace's payment", async () => {
    const a = await createWorkspace(t);
    const b = await createWorkspace(t);
    const created = await createOk(a.testKey, { tokenSymbol: "USDC", amount: "7" });
    const res = await get(b.testKey, `/api/v1/payments/${(created.payment as Json).id}`);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: MSG.notFound });
  });

  it("keeps tenants apart when concurrent requests share their key and payment lookups", async () => {
    const workspaces = await Promise.all([createWorkspace(t), createWorkspace(t), createWorkspace(t)]);
    const payments = await Promise.all(
      workspaces.map(
        async (ws) => (await createOk(ws.testKey, { tokenSymbol: "USDC", amount: "3" })).payment as Json,
      ),
    );
    const revoked = await createWorkspace(t);
    const revokedPayment = (await createOk(revoked.testKey, { tokenSymbol: "USDC", amount: "3" }))
      .payment as Json;
    const keyId = (await get(revoked.testKey, "/api/v1/keys")).json().apiKeys[0].id;
    expect(
      (await t.request({ method: "DELETE", url: `/api/v1/keys/${keyId}`, headers: bearer(revoked.testKey) }))
        .statusCode,
    ).toBe(200);

    // Every key reads every payment (own: 200, others': 404), all at once, some ids in upper case.
    const reads = workspaces.flatMap((ws, reader) =>
      payments.map((payment, owner) => ({
        reader,
        owner,
        request: get(
          ws.testKey,
          `/api/v1/payments/${owner === 2 ? String(payment.id).toUpperCase() : payment.id}`,
        ),
      })),
    );
    const revokedRead = get(revoked.testKey, `/api/v1/payments/${revokedPayment.id}`);
    const answers = await Promise.all(reads.map((r) => r.request));
    reads.forEach(({ reader, owner }, i) => {
      const res = answers[i];
      if (reader === owner) {
        expect(res?.statusCode).toBe(200);
        expect(res?.json()).toEqual({ payment: payments[owner] });
      } else {
        expect(res?.statusCode).toBe(404);
        expect(res?.json()).toEqual({ error: MSG.notFound });
      }
    });
    expect((await revokedRead).statusCode).toBe(401);
  });

  it("answers 404 when the same workspace's live key reads a sandbox payment (and the reverse)", async () => {
    const ws = await createWorkspace(t);
    const created = await createOk(ws.testKey, { tokenSymbol: "USDC", amount: "7" });
    const res = await get(ws.liveKey, `/api/v1/payments/${(created.payment as Json).id}`);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: MSG.notFound });

    const liveId = await insertPayment(ws, { environment: "live" });
    const fromSandbox = await get(ws.testKey, `/api/v1/payments/${liveId}`);
    expect(fromSandbox.statusCode).toBe(404);
    expect(fromSandbox.json()).toEqual({ error: MSG.notFound });
    const fromLive = await get(ws.liveKey, `/api/v1/payments/${liveId}`);
    expect(fromLive.statusCode).toBe(200);
    expect(fromLive.json().payment).toMatchObject({ id: liveId, environment: "live", status: "pending" });
  });

  it("answers 404 for a malformed id and for an unknown UUID", async () => {
    const ws = await createWorkspace(t);
    for (const id of ["not-a-uuid", "123", "00000000-0000-0000-0000-00000000000g"]) {
      const res = await get(ws.testKey, `/api/v1/payments/${id}`);
      expect(res.statusCode, id).toBe(404);
      expect(res.json()).toEqual({ error: MSG.notFound });
    }
    const unknown = await get(ws.testKey, "/api/v1/payments/6f1c1e9a-3a4b-4c5d-8e9f-0a1b2c3d4e5f");
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toEqual({ error: MSG.notFound });
  });
});

describe("POST /api/v1/payments/{id}/cancel", () => {
  it("cancels a pending payment, then refuses a second cancel", async () => {
    const ws = await createWorkspace(t);
    const id = await insertPayment(ws);
    const res = await post(ws.testKey, `/api/v1/payments/${id}/cancel`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().payment).toMatchObject({ id, status: "cancelled" });

    const read = await get(ws.testKey, `/api/v1/payments/${id}`);
    expect(read.json().payment.status).toBe("cancelled");

    const again = await post(ws.testKey, `/api/v1/payments/${id}/cancel`);
    expect(again.statusCode).toBe(400);
    expect(again.json().error).toBe(MSG.cannotCancel);
    expect((await get(ws.testKey, `/api/v1/payments/${id}`)).json().payment.status).toBe("cancelled");
  });

  it("refuses to cancel a forwarded payment and leaves it unchanged", async () => {
    const ws = await createWorkspace(t);
    const created = await createOk(ws.testKey, { tokenSymbol: "USDC", amount: "3" });
    const id = (created.payment as Json).id as string;
    const res = await post(ws.testKey, `/api/v1/payments/${id}/cancel`);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe(MSG.cannotCancel);
    expect((await get(ws.testKey, `/api/v1/payments/${id}`)).json().payment.status).toBe("forwarded");
    expect((await outboxRows(ws.id)).map((r) => r.event_type)).toEqual([
      "payment.created",
      "payment.forwarded",
    ]);
  });

  it.each([["confirmed"], ["detected"], ["expired"]])("refuses to cancel a %s payment", async (status) => {
    const ws = await createWorkspace(t);
    const id = await insertPayment(ws, { status });
    const res = await post(ws.testKey, `/api/v1/payments/${id}/cancel`);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe(MSG.cannotCancel);
  });

  it("answers 404 for another workspace's payment and leaves it pending", async () => {
    const a = await createWorkspace(t);
    const b = await createWorkspace(t);
    const id = await insertPayment(a);
    const res = await post(b.testKey, `/api/v1/payments/${id}/cancel`);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: MSG.notFound });
    expect((await get(a.testKey, `/api/v1/payments/${id}`)).json().payment.status).toBe("pending");
  });

  it("lets exactly one of several concurrent cancels win", async () => {
    const ws = await createWorkspace(t);
    const id = await insertPayment(ws);
    const responses = await Promise.all(
      Array.from({ length: 5 }, () => post(ws.testKey, `/api/v1/payments/${id}/cancel`)),
    );
    const codes = responses.map((r) => r.statusCode).sort();
    expect(codes).toEqual([200, 400, 400, 400, 400]);
    for (const r of responses.filter((r) => r.statusCode === 400))
      expect(r.json().error).toBe(MSG.cannotCancel);
    expect((await outboxRows(ws.id)).map((r) => r.event_type)).toEqual(["payment.cancelled"]);
  });

  it("cancels a live pending payment with the live key (no network needed)", async () => {
    const ws = await createWorkspace(t);
    const id = await insertPayment(ws, { environment: "live" });
    const fromSandbox = await post(ws.testKey, `/api/v1/payments/${id}/cancel`);
    expect(fromSandbox.statusCode).toBe(404);
    const res = await post(ws.liveKey, `/api/v1/payments/${id}/cancel`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().payment).toMatchObject({ id, status: "cancelled", environment: "live" });
    const rows = await outboxRows(ws.id, "live");
    expect(rows.map((r) => r.event_type)).toEqual(["payment.cancelled"]);
  });
});

describe("POST /api/v1/verify", () => {
  it("verifies a forwarded payment", async () => {
    const ws = await createWorkspace(t);
    const created = await createOk(ws.testKey, { tokenSymbol: "USDC", amount: "9" });
    const res = await post(ws.testKey, "/api/v1/verify", { paymentId: (created.payment as Json).id });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ verified: true, payment: created.payment });
  });

  it.each([["pending"], ["detected"], ["confirmed"], ["cancelled"]])(
    "does not verify a %s payment",
    async (status) => {
      const ws = await createWorkspace(t);
      const id = await insertPayment(ws, { status });
      const res = await post(ws.testKey, "/api/v1/verify", { paymentId: id });
      expect(res.statusCode).toBe(200);
      expect(res.json().verified).toBe(false);
      expect(res.json().payment).toMatchObject({ id, status });
    },
  );

  it("answers 400 when paymentId is missing", async () => {
    const ws = await createWorkspace(t);
    await expectError(post(ws.testKey, "/api/v1/verify", {}), 400);
  });

  it("answers 404 for another workspace's payment, another environment and a malformed id", async () => {
    const a = await createWorkspace(t);
    const b = await createWorkspace(t);
    const created = await createOk(a.testKey, { tokenSymbol: "USDC", amount: "9" });
    const id = (created.payment as Json).id;
    const other = await post(b.testKey, "/api/v1/verify", { paymentId: id });
    expect(other.statusCode).toBe(404);
    expect(other.json()).toEqual({ error: MSG.notFound });
    const live = await post(a.liveKey, "/api/v1/verify", { paymentId: id });
    expect(live.statusCode).toBe(404);
    const malformed = await post(a.testKey, "/api/v1/verify", { paymentId: "nope" });
    expect(malformed.statusCode).toBe(404);
  });
});

describe("live key without a network", () => {
  it("answers 503 Live network is not configured for a crypto create and writes nothing", async () => {
    const ws = await createWorkspace(t);
    const res = await createPayment(ws.liveKey, {
      tokenSymbol: "USDC",
      amount: "100",
      merchantWallet: MERCHANT,
    });
    expect(res.statusCode).toBe(503);
    expect(res.headers["content-type"]).toMatch(/^application\/json/);
    expect(res.json()).toEqual({ error: MSG.liveNotConfigured });

    const withKey = await createPayment(
      ws.liveKey,
      { tokenSymbol: "ETH", amount: "1" },
      { "idempotency-key": "live-attempt-1" },
    );
    expect(withKey.statusCode).toBe(503);
    expect(withKey.json()).toEqual({ error: MSG.liveNotConfigured });

    expect(await paymentRows(ws.id, "live")).toHaveLength(0);
    expect(await outboxRows(ws.id, "live")).toHaveLength(0);
    expect(await paymentRows(ws.id)).toHaveLength(0);
    expect(await outboxRows(ws.id)).toHaveLength(0);
    const keys = await t.database.db
      .selectFrom("idempotency_keys")
      .selectAll()
      .where("workspace_id", "=", ws.id)
      .execute();
    expect(keys).toHaveLength(0);

    const list = (await get(ws.liveKey, "/api/v1/payments")).json();
    expect(list).toEqual({ payments: [], total: 0 });
  });
});
