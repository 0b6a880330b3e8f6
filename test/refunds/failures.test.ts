import { describe, expect, it } from "vitest";
import { createWorkspace, type TestApp } from "../support/app.ts";
import {
  address,
  expectError,
  FAILURE_ADDRESS,
  ISO,
  type Json,
  MSG,
  refundHelpers,
  TX,
  useRefundsApp,
} from "../support/refunds.ts";

// Refunds of payments that do not complete (decision D19; D6 and D13 for the payout rules they
// share): a wallet that cannot cover the refund, transfers that revert (to the failure address)
// and the circuit breaker they share with payouts, and Idempotency-Key, against the real app on a
// real database (PGlite, or the PostgreSQL server of DATABASE_URL). Every expected balance is
// computed by hand in the comment beside it; the helpers are in support/refunds.ts.

let t: TestApp;
useRefundsApp((app) => {
  t = app;
});

const {
  post,
  refund,
  returnTransfer,
  refundOk,
  pay,
  faucet,
  payment,
  refundsOf,
  wallet,
  ledger,
  payoutState,
  outbox,
  incoming,
  unmatched,
} = refundHelpers(() => t);

// ---- balance --------------------------------------------------------------------------------------

describe("POST /api/v1/payments/{id}/refunds: the wallet's balance", () => {
  it("answers 400 Insufficient balance and records nothing: refundedAmount unchanged, the key still free", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    const a = address();
    const id = p.id as string;
    // The wallet holds the net, 9.85: the gross cannot be sent back.
    const short = await refund(
      ws.testKey,
      id,
      { amount: "10", destinationAddress: a },
      { "idempotency-key": "short-1" },
    );
    expectError(short, 400, {
      error: MSG.insufficient,
      available: "9.85",
      requested: "10.00",
      tokenSymbol: "USDC",
      network: "sandbox-a",
    });
    expect((await payment(ws, id)).refundedAmount).toBe("0.00");
    expect(await refundsOf(ws, id)).toMatchObject({ refunds: [], total: 0 });
    expect(await wallet(ws)).toBe("9.85");
    expect(await ledger(a)).toBe(0n);
    // A balance pre-check is not a failed transfer (D13).
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });
    expect(await outbox(ws, "refund.failed")).toEqual([]);

    // Funded, the same key and body make the refund (not a replay of the refusal).
    await faucet(ws, "0.15");
    const res = await refund(
      ws.testKey,
      id,
      { amount: "10", destinationAddress: a },
      { "idempotency-key": "short-1" },
    );
    expect(res.statusCode, res.body).toBe(201);
    expect(res.headers["idempotent-replayed"]).toBeUndefined();
    expect(res.json().refund).toMatchObject({ amount: "10.00", status: "completed" });
    expect(await wallet(ws)).toBe("0.00");
    expect(await ledger(a)).toBe(10_000_000n);
    expect((await payment(ws, id)).refundedAmount).toBe("10.00");
  });

  it("without a key: an insufficient balance leaves the whole gross refundable", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    const a = address();
    const id = p.id as string;
    expect((await refund(ws.testKey, id, { destinationAddress: a })).statusCode).toBe(400);
    expect((await payment(ws, id)).refundedAmount).toBe("0.00");
    // 10.00 is still refundable: 10.000001 is refused with exactly that.
    expectError(await refund(ws.testKey, id, { amount: "10.000001", destinationAddress: a }), 400, {
      error: MSG.exceeded,
      refundable: "10.00",
    });
    await faucet(ws, "0.15");
    expect(await refundOk(ws.testKey, id, { destinationAddress: a })).toMatchObject({ amount: "10.00" });
  });
});

// ---- failures and the circuit breaker -------------------------------------------------------

describe("POST /api/v1/payments/{id}/refunds: failed transfers and the circuit breaker", () => {
  it("answers 201 failed for a transfer that reverts, gives the amount back, emits refund.failed and counts it", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    const id = p.id as string;
    const failed = await refundOk(ws.testKey, id, {
      amount: "4",
      destinationAddress: FAILURE_ADDRESS,
      reason: "to the failure address",
    });
    expect(failed).toMatchObject({
      paymentId: id,
      amount: "4.00",
      tokenSymbol: "USDC",
      destinationAddress: FAILURE_ADDRESS,
      status: "failed",
      reason: "to the failure address",
    });
    // The hash of the reverted transfer the ledger recorded.
    expect(failed.txHash).toMatch(TX);
    // Nothing left the wallet; the 4.00 is refundable again.
    expect(await wallet(ws)).toBe("9.85");
    expect(await ledger(FAILURE_ADDRESS)).toBe(0n);
    expect((await payment(ws, id)).refundedAmount).toBe("0.00");
    expect(await refundsOf(ws, id)).toMatchObject({ refunds: [failed], total: 1 });
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 1 });

    const events = await outbox(ws, "refund.failed");
    expect(events).toHaveLength(1);
    expect(events[0]?.payload).toEqual({ ...failed, error: "execution reverted (sandbox failure address)" });
    expect(await outbox(ws, "refund.completed")).toEqual([]);
    expect(await outbox(ws, "payout.failed")).toEqual([]);

    // The whole gross can still be refunded (the failed 4.00 took nothing).
    await faucet(ws, "0.15");
    const all = await refundOk(ws.testKey, id, { destinationAddress: address() });
    expect(all).toMatchObject({ amount: "10.00", status: "completed" });
    // A success ends the streak.
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });
  });

  it("three failed refunds pause refunds and payouts (503 CIRCUIT_BREAKER_OPEN) until resumed", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    await faucet(ws, "10");
    const id = p.id as string;
    for (const streak of [1, 2, 3]) {
      const r = await refundOk(ws.testKey, id, { amount: "1", destinationAddress: FAILURE_ADDRESS });
      expect(r.status).toBe("failed");
      expect(await payoutState(ws)).toMatchObject({ failStreak: streak });
    }
    const state = await payoutState(ws);
    expect(state).toMatchObject({ status: "paused", failStreak: 3, pausedAt: expect.stringMatching(ISO) });
    expect((await payment(ws, id)).refundedAmount).toBe("0.00");

    const a = address();
    const paused = await refund(ws.testKey, id, { amount: "1", destinationAddress: a });
    expect(paused.statusCode, paused.body).toBe(503);
    expect(paused.json()).toEqual({
      error: MSG.paused,
      code: "CIRCUIT_BREAKER_OPEN",
      circuitBreaker: true,
      failStreak: 3,
      pausedAt: state.pausedAt,
      resumeAction: expect.any(String),
    });
    const payout = await post(ws.testKey, "/api/v1/payouts", {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: a,
    });
    expect(payout.statusCode, payout.body).toBe(503);
    expect(payout.json()).toMatchObject({ code: "CIRCUIT_BREAKER_OPEN", circuitBreaker: true });
    // A return is paused as well.
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "1" });
    const ret = await returnTransfer(ws.testKey, transfer.id as string);
    expect(ret.statusCode, ret.body).toBe(503);
    expect(ret.json()).toMatchObject({ code: "CIRCUIT_BREAKER_OPEN" });
    expect((await unmatched(ws, transfer.id as string))?.status).toBe("open");
    expect(await ledger(a)).toBe(0n);
    expect((await payment(ws, id)).refundedAmount).toBe("0.00");
    expect(await outbox(ws, "refund.failed")).toHaveLength(3);

    const resumed = await post(ws.testKey, `/api/v1/workspaces/${ws.id}/resume`);
    expect(resumed.statusCode, resumed.body).toBe(200);
    const r = await refundOk(ws.testKey, id, { amount: "1", destinationAddress: a });
    expect(r.status).toBe("completed");
    expect(await ledger(a)).toBe(1_000_000n);
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });
  });

  it("a failed payout and failed refunds share one streak", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    const failedPayout = await post(ws.testKey, "/api/v1/payouts", {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: FAILURE_ADDRESS,
    });
    expect(failedPayout.statusCode, failedPayout.body).toBe(500);
    expect(await payoutState(ws)).toMatchObject({ failStreak: 1 });
    await refundOk(ws.testKey, p.id as string, { amount: "1", destinationAddress: FAILURE_ADDRESS });
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 2 });
    // The third failure, a payout's, pauses both.
    const third = await post(ws.testKey, "/api/v1/payouts", {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: FAILURE_ADDRESS,
    });
    expect(third.statusCode, third.body).toBe(503);
    const paused = await refund(ws.testKey, p.id as string, { amount: "1", destinationAddress: address() });
    expect(paused.statusCode, paused.body).toBe(503);
    expect(paused.json()).toMatchObject({ code: "CIRCUIT_BREAKER_OPEN", failStreak: 3 });
  });
});

// ---- idempotency ------------------------------------------------------------------------------

describe("POST /api/v1/payments/{id}/refunds: Idempotency-Key", () => {
  it("replays the same request with the same refund, and refuses another under the key with 409", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    const q = await pay(ws, "10");
    const a = address();
    const id = p.id as string;
    const body = { amount: "1.5", destinationAddress: a, reason: "late" };
    const first = await refundOk(ws.testKey, id, body, { "idempotency-key": "refund-1" });

    // Same key, same JSON (another key order): the same refund, marked replayed, nothing moves again.
    for (const again of [body, { reason: "late", destinationAddress: a, amount: "1.5" }]) {
      const res = await refund(ws.testKey, id, again, { "idempotency-key": "refund-1" });
      expect(res.statusCode, res.body).toBe(201);
      expect(res.headers["idempotent-replayed"]).toBe("true");
      expect(res.json()).toEqual({ refund: first });
    }
    expect(await ledger(a)).toBe(1_500_000n);
    expect((await payment(ws, id)).refundedAmount).toBe("1.50");
    expect(await refundsOf(ws, id)).toMatchObject({ total: 1 });

    // Same key, another request: 409 naming the refund the key made.
    for (const [what, target, other] of [
      ["another amount", id, { ...body, amount: "2" }],
      ["1.50 spelt otherwise", id, { ...body, amount: "1.50" }],
      ["no reason", id, { amount: "1.5", destinationAddress: a }],
      ["another payment", q.id as string, body],
    ] as Array<[string, string, Json]>) {
      const res = await refund(ws.testKey, target, other, { "idempotency-key": "refund-1" });
      expect(res.statusCode, `${what}: ${res.body}`).toBe(409);
      expect(res.json(), what).toEqual({ error: MSG.keyUsed, refund: first });
    }
    expect(await ledger(a)).toBe(1_500_000n);
    expect((await payment(ws, id)).refundedAmount).toBe("1.50");
    expect((await payment(ws, q.id as string)).refundedAmount).toBe("0.00");

    // Another key is another refund.
    const second = await refundOk(ws.testKey, id, body, { "idempotency-key": "refund-2" });
    expect(second.id).not.toBe(first.id);
    expect(await ledger(a)).toBe(3_000_000n);
  });

  it("replays a refund of the rest after the payment was fully refunded, and answers a failed one as failed", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    await faucet(ws, "1");
    const a = address();
    const id = p.id as string;
    const all = await refundOk(ws.testKey, id, { destinationAddress: a }, { "idempotency-key": "all" });
    expect(all.amount).toBe("10.00");
    const again = await refund(ws.testKey, id, { destinationAddress: a }, { "idempotency-key": "all" });
    expect(again.statusCode, again.body).toBe(201);
    expect(again.headers["idempotent-replayed"]).toBe("true");
    expect(again.json()).toEqual({ refund: all });

    const q = await pay(ws, "10");
    const failed = await refundOk(
      ws.testKey,
      q.id as string,
      { amount: "1", destinationAddress: FAILURE_ADDRESS },
      { "idempotency-key": "fails" },
    );
    expect(failed.status).toBe("failed");
    const repeat = await refund(
      ws.testKey,
      q.id as string,
      { amount: "1", destinationAddress: FAILURE_ADDRESS },
      { "idempotency-key": "fails" },
    );
    expect(repeat.statusCode, repeat.body).toBe(201);
    expect(repeat.headers["idempotent-replayed"]).toBe("true");
    expect(repeat.json()).toEqual({ refund: failed });
    // The replay sent nothing and counted nothing.
    expect(await payoutState(ws)).toMatchObject({ failStreak: 1 });
    expect(await outbox(ws, "refund.failed")).toHaveLength(1);
  });

  it("keys of refunds and returns are one space: a return under a refund's key is a 409", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    const r = await refundOk(
      ws.testKey,
      p.id as string,
      { amount: "1", destinationAddress: address() },
      {
        "idempotency-key": "shared",
      },
    );
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "2" });
    const res = await returnTransfer(ws.testKey, transfer.id as string, {}, { "idempotency-key": "shared" });
    expectError(res, 409, { error: MSG.keyUsed, refund: r });
    expect((await unmatched(ws, transfer.id as string))?.status).toBe("open");
  });
});
