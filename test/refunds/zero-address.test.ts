import { describe, expect, it } from "vitest";
import { createWorkspace, type TestApp } from "../support/app.ts";
import { address, expectError, refundHelpers, useRefundsApp } from "../support/refunds.ts";

// The zero address as a destination of money (issue 36): a payout, a refund and the return of an
// unmatched transfer that name it, or whose default destination is it (a transfer sent from it, as
// a token's mint is), are refused with 400 naming destinationAddress, as splits refuse it, before
// anything is recorded or moved. Sandbox keys on the simulated ledger; the live paths are in
// recipient-costs.test.ts.

const ZERO = `0x${"0".repeat(40)}`;
const REFUSED = { error: "destinationAddress must not be the zero address" };

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
  payment,
  refundsOf,
  ledger,
  payoutState,
  outbox,
  incoming,
  unmatched,
} = refundHelpers(() => t);

describe("the zero address as a destination (sandbox)", () => {
  it("a payout to it → 400, nothing sent, nothing counted", async () => {
    const ws = await createWorkspace(t);
    await pay(ws, "10");
    const res = await post(ws.testKey, "/api/v1/payouts", {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: ZERO,
    });
    expectError(res, 400, REFUSED);
    expect(await ledger(ZERO)).toBe(0n);
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });
    expect(await outbox(ws, "payout.failed")).toEqual([]);
    // Any other address goes through.
    const ok = await post(ws.testKey, "/api/v1/payouts", {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: address(),
    });
    expect(ok.statusCode, ok.body).toBe(200);
  });

  it("a refund to it → 400: refundedAmount unchanged, the Idempotency-Key still free", async () => {
    const ws = await createWorkspace(t);
    const p = await pay(ws, "10");
    const id = p.id as string;
    const res = await refund(
      ws.testKey,
      id,
      { amount: "1", destinationAddress: ZERO },
      { "idempotency-key": "zero-1" },
    );
    expectError(res, 400, REFUSED);
    expect((await payment(ws, id)).refundedAmount).toBe("0.00");
    expect(await refundsOf(ws, id)).toMatchObject({ refunds: [], total: 0 });
    expect(await ledger(ZERO)).toBe(0n);
    expect(await outbox(ws, "refund.failed")).toEqual([]);
    // The key was not taken by the refusal: another request under it is a new refund.
    const a = address();
    const ok = await refundOk(
      ws.testKey,
      id,
      { amount: "1", destinationAddress: a },
      { "idempotency-key": "zero-1" },
    );
    expect(ok).toMatchObject({ status: "completed", destinationAddress: a });
  });

  it("a return to it → 400, and one whose sender is the zero address needs another destination", async () => {
    const ws = await createWorkspace(t);
    const named = await incoming(ws, { tokenSymbol: "USDC", amount: "2" });
    expectError(
      await returnTransfer(ws.testKey, named.id as string, { destinationAddress: ZERO }),
      400,
      REFUSED,
    );
    expect((await unmatched(ws, named.id as string))?.status).toBe("open");

    // Sent from the zero address (a mint): its default destination, the sender, is refused.
    const minted = await incoming(ws, { tokenSymbol: "USDC", amount: "3", fromAddress: ZERO });
    const res = await returnTransfer(ws.testKey, minted.id as string, {});
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error).toMatch(
      /^destinationAddress must not be the zero address: the transfer's sender/,
    );
    expect((await unmatched(ws, minted.id as string))?.status).toBe("open");
    expect(await ledger(ZERO)).toBe(0n);
    expect(await outbox(ws, "refund.failed")).toEqual([]);
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });

    // Named elsewhere, it goes back.
    const a = address();
    const back = await returnTransfer(ws.testKey, minted.id as string, { destinationAddress: a });
    expect(back.statusCode, back.body).toBe(201);
    expect(back.json().refund).toMatchObject({ status: "completed", amount: "3.00", destinationAddress: a });
    expect(await ledger(a)).toBe(3_000_000n);
  });
});
