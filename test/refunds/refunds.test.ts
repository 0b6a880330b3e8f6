import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { bearer, createWorkspace, type TestApp } from "../support/app.ts";
import {
  address,
  expectError,
  type Json,
  MSG,
  refundHelpers,
  TX,
  useRefundsApp,
} from "../support/refunds.ts";

// Refunds of payments (decision D19; D6 and D13 for the payout rules they share): refunds that
// complete, the validation of a refund request, and which payments can be refunded, against the
// real app on a real database (PGlite, or the PostgreSQL server of DATABASE_URL). Money moves on
// the simulated ledger: a sandbox crypto payment of G credits its net (G − 1.5 %) to the workspace
// wallet, the faucet adds to it, a refund is a transfer from it to the destination. Every expected
// balance is computed by hand in the comment beside it. Failures, the breaker, the balance and
// Idempotency-Key are in failures.test.ts, the events in events.test.ts, incoming
// transfers and their return in test/payments/unmatched-sandbox.test.ts; what they share, in support/refunds.ts.

let t: TestApp;
useRefundsApp((app) => {
  t = app;
});

const { post, get, refund, refundOk, pay, faucet, payment, refundsOf, wallet, ledger, payoutState } =
  refundHelpers(() => t);

// ---- refunds that complete ---------------------------------------------------------------------

describe("POST /api/v1/payments/{id}/refunds: partial and multiple refunds", () => {
  it("refunds in parts up to the gross, moving exactly the amounts from the wallet to each destination", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    // gross 10.00, fee 0.15, net 9.85 credited to the wallet; the faucet adds 5.00 → 14.85.
    expect(p).toMatchObject({ grossAmount: "10.00", refundedAmount: "0.00", amountReceived: null });
    await faucet(ws, "5");
    expect(await wallet(ws)).toBe("14.85");
    const [a, b] = [address(), address()];

    const first = await refundOk(ws.testKey, p.id as string, {
      amount: "2.5",
      destinationAddress: a,
      reason: "damaged item",
    });
    expect(first).toEqual({
      id: first.id,
      paymentId: p.id,
      amount: "2.50",
      tokenSymbol: "USDC",
      network: "sandbox-a",
      destinationAddress: a,
      status: "completed",
      txHash: expect.stringMatching(TX),
      reason: "damaged item",
      createdAt: first.createdAt,
    });
    // 14.85 − 2.50 = 12.35
    expect(await wallet(ws)).toBe("12.35");
    expect(await ledger(a)).toBe(2_500_000n);
    expect((await payment(ws, p.id as string)).refundedAmount).toBe("2.50");

    const second = await refundOk(ws.testKey, p.id as string, { amount: "3.25", destinationAddress: b });
    expect(second).toMatchObject({
      amount: "3.25",
      destinationAddress: b,
      status: "completed",
      reason: null,
    });
    // 12.35 − 3.25 = 9.10
    expect(await wallet(ws)).toBe("9.10");
    expect(await ledger(b)).toBe(3_250_000n);
    expect((await payment(ws, p.id as string)).refundedAmount).toBe("5.75");

    // 10.00 − 5.75 = 4.25 left: one unit more is refused, with exactly what is left.
    expectError(
      await refund(ws.testKey, p.id as string, { amount: "4.250001", destinationAddress: a }),
      400,
      {
        error: MSG.exceeded,
        refundable: "4.25",
      },
    );
    expect(await wallet(ws)).toBe("9.10");

    // No amount: the rest.
    const rest = await refundOk(ws.testKey, p.id as string, { destinationAddress: a });
    expect(rest).toMatchObject({ amount: "4.25", status: "completed", destinationAddress: a });
    // 9.10 − 4.25 = 4.85; a received 2.50 + 4.25 = 6.75
    expect(await wallet(ws)).toBe("4.85");
    expect(await ledger(a)).toBe(6_750_000n);
    expect(await ledger(b)).toBe(3_250_000n);
    expect(await ledger(ws.eoaAddress)).toBe(4_850_000n);
    const after = await payment(ws, p.id as string);
    expect(after).toMatchObject({ status: "forwarded", grossAmount: "10.00", refundedAmount: "10.00" });

    // Nothing is left: any amount, or none, is refused with refundable 0.00, and nothing moves.
    for (const body of [{ amount: "0.000001", destinationAddress: a }, { destinationAddress: a }]) {
      expectError(await refund(ws.testKey, p.id as string, body), 400, {
        error: MSG.exceeded,
        refundable: "0.00",
      });
    }
    expect(await wallet(ws)).toBe("4.85");

    // The list, oldest first, shows the three as they were answered; each txHash is the ledger's.
    const list = await refundsOf(ws, p.id as string);
    expect(list).toEqual({ refunds: [first, second, rest], total: 3, limit: expect.any(Number), offset: 0 });
    const page = await refundsOf(ws, p.id as string, "?limit=1&offset=1");
    expect(page).toEqual({ refunds: [second], total: 3, limit: 1, offset: 1 });
    const transfers = await t.database.db
      .selectFrom("ledger_transactions")
      .select(["tx_hash", "to_address", "amount", "status"])
      .where("from_address", "=", ws.eoaAddress.toLowerCase())
      .execute();
    expect(transfers.map((x) => [x.tx_hash, x.to_address, String(x.amount), x.status]).sort()).toEqual(
      [
        [first.txHash, a, "2500000", "success"],
        [second.txHash, b, "3250000", "success"],
        [rest.txHash, a, "4250000", "success"],
      ].sort(),
    );
    // Successful refunds are not failures: the breaker is untouched.
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });
  });

  it("refunds the whole gross by default in one go", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "20");
    // net 19.70 in the wallet; the 0.30 fee is topped up by the faucet → 20.00
    await faucet(ws, "0.30");
    const a = address();
    const all = await refundOk(ws.testKey, p.id as string, { destinationAddress: a });
    expect(all).toMatchObject({ amount: "20.00", status: "completed" });
    expect(await wallet(ws)).toBe("0.00");
    expect(await ledger(a)).toBe(20_000_000n);
    expect((await payment(ws, p.id as string)).refundedAmount).toBe("20.00");
  });

  it("formats amounts of an 18-decimal token and refunds to a checksummed address", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "1", "ETH");
    await faucet(ws, "1", "ETH");
    const checksummed = "0x52908400098527886E0F7030069857D2E4169EE7";
    const r = await refundOk(ws.testKey, p.id as string, {
      amount: "0.000000000000000001",
      destinationAddress: checksummed,
    });
    expect(r).toMatchObject({ amount: "0.000000000000000001", tokenSymbol: "ETH", status: "completed" });
    expect(await ledger(checksummed, "ETH")).toBe(1n);
    expect((await payment(ws, p.id as string)).refundedAmount).toBe("0.000000000000000001");
    expectError(
      await refund(ws.testKey, p.id as string, {
        amount: "1.0000000000000000001",
        destinationAddress: checksummed,
      }),
      400,
      {
        error: MSG.amount,
      },
    );
  });
});

// ---- validation ---------------------------------------------------------------------------------

describe("POST /api/v1/payments/{id}/refunds: validation", () => {
  it("answers each malformed field with its 400 message, never a 500, and records nothing", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    await faucet(ws, "5");
    const a = address();
    const id = p.id as string;
    const cases: Array<[string, unknown, string]> = [
      ["amount as a number", { amount: 5, destinationAddress: a }, MSG.amount],
      ["an exponent", { amount: "1e3", destinationAddress: a }, MSG.amount],
      ["a negative amount", { amount: "-1", destinationAddress: a }, MSG.amount],
      ["a plus sign", { amount: "+1", destinationAddress: a }, MSG.amount],
      ["zero", { amount: "0", destinationAddress: a }, MSG.amount],
      ["0.00", { amount: "0.00", destinationAddress: a }, MSG.amount],
      ["more decimals than USDC has", { amount: "1.0000001", destinationAddress: a }, MSG.amount],
      ["hex", { amount: "0x10", destinationAddress: a }, MSG.amount],
      ["spaces", { amount: " 1", destinationAddress: a }, MSG.amount],
      ["empty", { amount: "", destinationAddress: a }, MSG.amount],
      ["amount as an object", { amount: { value: "1" }, destinationAddress: a }, MSG.amount],
      ["a short address", { amount: "1", destinationAddress: "0x1234" }, MSG.destination],
      ["a non-hex address", { amount: "1", destinationAddress: `0x${"g".repeat(40)}` }, MSG.destination],
      ["an address as a number", { amount: "1", destinationAddress: 12 }, MSG.destination],
      [
        "walletType workspace",
        { amount: "1", destinationAddress: a, walletType: "workspace" },
        MSG.walletType,
      ],
      ["walletType as a number", { amount: "1", destinationAddress: a, walletType: 1 }, MSG.walletType],
      [
        "a reason of 501 characters",
        { amount: "1", destinationAddress: a, reason: "r".repeat(501) },
        MSG.reason,
      ],
      ["a reason as a number", { amount: "1", destinationAddress: a, reason: 7 }, MSG.reason],
    ];
    for (const [what, body, message] of cases) {
      const res = await refund(ws.testKey, id, body);
      expect(res.statusCode, `${what}: ${res.body}`).toBe(400);
      expect(res.headers["content-type"], what).toMatch(/^application\/json/);
      expect(res.json(), what).toEqual({ error: message });
    }

    for (const raw of ["[1,2]", '"refund"', "42", "true"]) {
      const res = await t.request({
        method: "POST",
        url: `/api/v1/payments/${id}/refunds`,
        headers: { ...bearer(ws.testKey), "content-type": "application/json" },
        payload: raw,
      });
      expect(res.statusCode, `${raw}: ${res.body}`).toBe(400);
      expect(res.json(), raw).toEqual({ error: MSG.notObject });
    }
    const broken = await t.request({
      method: "POST",
      url: `/api/v1/payments/${id}/refunds`,
      headers: { ...bearer(ws.testKey), "content-type": "application/json" },
      payload: "{not json",
    });
    expect(broken.statusCode, broken.body).toBe(400);
    expect(broken.json()).toEqual({ error: "Invalid JSON body" });

    const longKey = await refund(
      ws.testKey,
      id,
      { amount: "1", destinationAddress: a },
      {
        "idempotency-key": "k".repeat(256),
      },
    );
    expectError(longKey, 400, { error: MSG.key });
    const emptyKey = await refund(
      ws.testKey,
      id,
      { amount: "1", destinationAddress: a },
      { "idempotency-key": "" },
    );
    expectError(emptyKey, 400, { error: MSG.key });

    // The sandbox payment has no payer to send back to: destinationAddress is required.
    expectError(await refund(ws.testKey, id, { amount: "1" }), 400, { error: MSG.noPayer });
    expectError(await refund(ws.testKey, id), 400, { error: MSG.noPayer });

    // Nothing was refunded, nothing moved, nothing counted.
    expect((await payment(ws, id)).refundedAmount).toBe("0.00");
    expect(await refundsOf(ws, id)).toMatchObject({ refunds: [], total: 0 });
    expect(await wallet(ws)).toBe("14.85");
    expect(await ledger(a)).toBe(0n);
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });

    // The edges that are valid: a key of 255 characters, a reason of 500.
    const ok = await refundOk(
      ws.testKey,
      id,
      { amount: "1", destinationAddress: a, reason: "r".repeat(500), walletType: "eoa" },
      { "idempotency-key": "k".repeat(255) },
    );
    expect(ok).toMatchObject({ amount: "1.00", reason: "r".repeat(500), status: "completed" });
    expect(await ledger(a)).toBe(1_000_000n);
  });

  it("refuses a smart_wallet refund for a workspace without a smart wallet with a 400, recording nothing", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    const res = await refund(ws.testKey, p.id as string, {
      amount: "1",
      destinationAddress: address(),
      walletType: "smart_wallet",
    });
    expectError(res, 400, {
      error: "No smart wallet for this workspace: create one with POST /api/v1/workspaces/{id}/smart-wallet",
    });
    expect((await payment(ws, p.id as string)).refundedAmount).toBe("0.00");
    expect(await refundsOf(ws, p.id as string)).toMatchObject({ total: 0 });
  });
});

// ---- which payments ---------------------------------------------------------------------------

describe("POST /api/v1/payments/{id}/refunds: which payments", () => {
  it("refuses a pending and a cancelled payment with 400 and their status", async () => {
    const ws = await createWorkspace(t);
    // A live card payment stays pending until the provider says it was paid.
    const created = await post(ws.liveKey, "/api/v1/payments", {
      paymentMethod: "card",
      tokenSymbol: "USD",
      amount: "12.00",
    });
    expect(created.statusCode, created.body).toBe(201);
    const pending = created.json().payment as Json;
    expect(pending.status).toBe("pending");
    expectError(await refund(ws.liveKey, pending.id as string, { amount: "1.00" }), 400, {
      error: MSG.notForwarded,
      status: "pending",
    });

    const cancelled = await post(ws.liveKey, `/api/v1/payments/${pending.id}/cancel`);
    expect(cancelled.statusCode, cancelled.body).toBe(200);
    expect(cancelled.json().payment.status).toBe("cancelled");
    expectError(await refund(ws.liveKey, pending.id as string), 400, {
      error: MSG.notForwarded,
      status: "cancelled",
    });
    const after = await payment(ws, pending.id as string, ws.liveKey);
    expect(after).toMatchObject({ status: "cancelled", refundedAmount: "0.00" });
    // Its refunds list is empty.
    const list = await get(ws.liveKey, `/api/v1/payments/${pending.id}/refunds`);
    expect(list.statusCode, list.body).toBe(200);
    expect(list.json()).toMatchObject({ refunds: [], total: 0 });
  });

  it("answers 404 for an unknown payment, another workspace's, and the other environment's key", async () => {
    const ws = await createWorkspace(t);
    const other = await createWorkspace(t);
    const p = await pay(ws, "10");
    await faucet(ws, "5");
    await faucet(other, "20");
    const a = address();
    const body = { amount: "1", destinationAddress: a };
    const notFound = { error: MSG.notFound };

    expectError(await refund(ws.testKey, randomUUID(), body), 404, notFound);
    expectError(await refund(ws.testKey, "not-a-uuid", body), 404, notFound);
    // Tenant isolation: the other workspace's key, with money in its own wallet.
    expectError(await refund(other.testKey, p.id as string, body), 404, notFound);
    expectError(
      await refund(other.testKey, p.id as string, body, { "idempotency-key": "iso-1" }),
      404,
      notFound,
    );
    // Environment isolation: the same workspace's live key.
    expectError(await refund(ws.liveKey, p.id as string, body), 404, notFound);
    for (const key of [other.testKey, ws.liveKey]) {
      expectError(await get(key, `/api/v1/payments/${p.id}/refunds`), 404, notFound);
    }
    expectError(await get(ws.testKey, `/api/v1/payments/${randomUUID()}/refunds`), 404, notFound);

    expect((await payment(ws, p.id as string)).refundedAmount).toBe("0.00");
    expect(await ledger(a)).toBe(0n);
    expect(await wallet(other)).toBe("20.00");
    expect(await wallet(ws)).toBe("14.85");
    // The key the other workspace sent named nothing of its own: it can use it for itself.
    const mine = await pay(other, "1");
    const r = await refundOk(other.testKey, mine.id as string, body, { "idempotency-key": "iso-1" });
    expect(r).toMatchObject({ paymentId: mine.id, amount: "1.00", status: "completed" });
  });
});
