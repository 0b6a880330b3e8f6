import { randomUUID } from "node:crypto";
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
  SANDBOX_PAYER,
  TX,
  UUID,
  useRefundsApp,
} from "../support/refunds.ts";

// The unmatched inbox (decision D19): sandbox incoming transfers, their return to the sender (a
// transfer of its own kind through the payout operation, D6 and D13) and the refusals of attach,
// against the real app on a real database (PGlite, or the PostgreSQL server of DATABASE_URL).
// Money moves on the simulated ledger; the helpers are in support/refunds.ts.

let t: TestApp;
useRefundsApp((app) => {
  t = app;
});

const {
  post,
  getOk,
  returnTransfer,
  pay,
  faucet,
  payment,
  wallet,
  ledger,
  payoutState,
  outbox,
  incoming,
  unmatched,
} = refundHelpers(() => t);

// ---- the unmatched inbox: incoming transfers and returns --------------------------------------

describe("sandbox incoming transfers and their return", () => {
  it("credits the wallet, lists the transfer open, and returns it once to its sender", async () => {
    const ws = await createWorkspace(t);
    const payer = address();
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "7.5", fromAddress: payer });
    expect(transfer).toEqual({
      id: expect.stringMatching(UUID),
      status: "open",
      network: "sandbox-a",
      paymentId: null,
      amount: "7.50",
      token: "USDC",
      from: payer,
      to: ws.eoaAddress,
      txHash: expect.stringMatching(TX),
      blockNumber: expect.any(Number),
      reason: expect.any(String),
      createdAt: expect.stringMatching(ISO),
    });
    expect(await wallet(ws)).toBe("7.50");
    expect(await unmatched(ws, transfer.id as string)).toEqual(transfer);

    const res = await returnTransfer(ws.testKey, transfer.id as string, { reason: "unknown sender" });
    expect(res.statusCode, res.body).toBe(201);
    const ret = res.json().refund as Json;
    expect(ret).toEqual({
      id: expect.stringMatching(UUID),
      paymentId: null,
      amount: "7.50",
      tokenSymbol: "USDC",
      network: "sandbox-a",
      destinationAddress: payer,
      status: "completed",
      txHash: expect.stringMatching(TX),
      reason: "unknown sender",
      createdAt: expect.stringMatching(ISO),
      unmatchedTransferId: transfer.id,
    });
    // 7.50 back: the wallet is empty, the sender holds it.
    expect(await wallet(ws)).toBe("0.00");
    expect(await ledger(payer)).toBe(7_500_000n);
    expect(await unmatched(ws, transfer.id as string)).toEqual({
      ...transfer,
      status: "returned",
      paymentId: null,
    });

    const twice = await returnTransfer(ws.testKey, transfer.id as string);
    expect(twice.statusCode, twice.body).toBe(409);
    expect(twice.json()).toMatchObject({
      error: "Unmatched transfer is already returned",
      status: "returned",
    });
    expect(await ledger(payer)).toBe(7_500_000n);
    expect(await outbox(ws, "refund.completed")).toEqual([{ payload: ret }]);
    // A return is no payment's refund and no payout.
    expect(await getOk(ws.testKey, "/api/v1/payouts")).toMatchObject({ total: 0 });
  });

  it("returns to the sandbox payer by default, or to destinationAddress, and refuses an amount", async () => {
    const ws = await createWorkspace(t);
    const first = await incoming(ws, { tokenSymbol: "ETH", amount: "0.25" });
    expect(first).toMatchObject({ from: SANDBOX_PAYER, to: ws.eoaAddress, amount: "0.25", token: "ETH" });
    const before = await ledger(SANDBOX_PAYER, "ETH");
    const back = await returnTransfer(ws.testKey, first.id as string);
    expect(back.statusCode, back.body).toBe(201);
    expect(back.json().refund).toMatchObject({
      destinationAddress: SANDBOX_PAYER,
      amount: "0.25",
      tokenSymbol: "ETH",
      status: "completed",
    });
    expect((await ledger(SANDBOX_PAYER, "ETH")) - before).toBe(250_000_000_000_000_000n);

    const second = await incoming(ws, { tokenSymbol: "USDC", amount: "3", fromAddress: address() });
    const elsewhere = address();
    expectError(await returnTransfer(ws.testKey, second.id as string, { amount: "1" }), 400, {
      error: "amount cannot be set: a return sends the whole transfer back",
    });
    expectError(await returnTransfer(ws.testKey, second.id as string, { destinationAddress: "0x12" }), 400, {
      error: MSG.destination,
    });
    expectError(await returnTransfer(ws.testKey, second.id as string, { reason: "x".repeat(501) }), 400, {
      error: MSG.reason,
    });
    expect((await unmatched(ws, second.id as string))?.status).toBe("open");
    const to = await returnTransfer(ws.testKey, second.id as string, { destinationAddress: elsewhere });
    expect(to.statusCode, to.body).toBe(201);
    expect(to.json().refund).toMatchObject({
      destinationAddress: elsewhere,
      amount: "3.00",
      status: "completed",
    });
    expect(await ledger(elsewhere)).toBe(3_000_000n);
    expect(await wallet(ws)).toBe("0.00");
  });

  it("refuses incoming transfers with a live key (403) and malformed ones (400)", async () => {
    const ws = await createWorkspace(t);
    const live = await post(ws.liveKey, "/api/v1/sandbox/incoming-transfer", {
      tokenSymbol: "USDC",
      amount: "1",
    });
    expectError(live, 403, {
      error: "Incoming transfers are simulated only in the sandbox: use a svc_test_ key",
    });
    const cases: Array<[Json, string]> = [
      [{ tokenSymbol: "XYZ", amount: "1" }, "Invalid token symbol"],
      [{ tokenSymbol: "USD", amount: "1" }, "Invalid token symbol"],
      [{ tokenSymbol: "USDC", amount: "1e2" }, MSG.amount],
      [{ tokenSymbol: "USDC", amount: 1 }, MSG.amount],
      [{ tokenSymbol: "USDC", amount: "1", fromAddress: "0xnope" }, "Invalid fromAddress format"],
      [{ tokenSymbol: "USDC", amount: "1", walletType: "workspace" }, MSG.walletType],
    ];
    for (const [body, error] of cases) {
      expectError(await post(ws.testKey, "/api/v1/sandbox/incoming-transfer", body), 400, { error });
    }
    expect(await wallet(ws)).toBe("0.00");
    expect(await getOk(ws.testKey, "/api/v1/transfers/unmatched")).toMatchObject({ transfers: [], total: 0 });
  });

  it("answers 404 for another tenant's transfer, the other environment's key and unknown ids", async () => {
    const ws = await createWorkspace(t);
    const other = await createWorkspace(t);
    await faucet(other, "100");
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "4" });
    const notFound = { error: MSG.transferNotFound };
    expectError(await returnTransfer(other.testKey, transfer.id as string), 404, notFound);
    expectError(await returnTransfer(ws.liveKey, transfer.id as string), 404, notFound);
    expectError(await returnTransfer(ws.testKey, randomUUID()), 404, notFound);
    expectError(await returnTransfer(ws.testKey, "nope"), 404, notFound);
    expect(await getOk(other.testKey, "/api/v1/transfers/unmatched")).toMatchObject({ total: 0 });
    expect((await unmatched(ws, transfer.id as string))?.status).toBe("open");
    expect(await wallet(other)).toBe("100.00");
    expect(await wallet(ws)).toBe("4.00");
  });

  it("a failed return leaves the transfer open, and a second return succeeds", async () => {
    const ws = await createWorkspace(t);
    const payer = address();
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "3", fromAddress: payer });
    const failed = await returnTransfer(ws.testKey, transfer.id as string, {
      destinationAddress: FAILURE_ADDRESS,
    });
    expect(failed.statusCode, failed.body).toBe(201);
    expect(failed.json().refund).toMatchObject({
      paymentId: null,
      amount: "3.00",
      destinationAddress: FAILURE_ADDRESS,
      status: "failed",
      unmatchedTransferId: transfer.id,
    });
    expect(await unmatched(ws, transfer.id as string)).toMatchObject({ status: "open", paymentId: null });
    expect(await wallet(ws)).toBe("3.00");
    expect(await payoutState(ws)).toMatchObject({ failStreak: 1 });
    const events = await outbox(ws, "refund.failed");
    expect(events.map((e) => e.payload)).toEqual([{ ...failed.json().refund, error: expect.any(String) }]);

    const ok = await returnTransfer(ws.testKey, transfer.id as string);
    expect(ok.statusCode, ok.body).toBe(201);
    expect(ok.json().refund).toMatchObject({
      destinationAddress: payer,
      status: "completed",
      amount: "3.00",
    });
    expect(ok.json().refund.id).not.toBe(failed.json().refund.id);
    expect(await unmatched(ws, transfer.id as string)).toMatchObject({ status: "returned" });
    expect(await wallet(ws)).toBe("0.00");
    expect(await ledger(payer)).toBe(3_000_000n);
    expect(await payoutState(ws)).toMatchObject({ failStreak: 0 });
  });

  it("an open transfer's money is held: payouts leave it, the balance shows it, its return releases it", async () => {
    const ws = await createWorkspace(t);
    const payer = address();
    await faucet(ws, "3");
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "5", fromAddress: payer });
    expect(await wallet(ws)).toBe("8.00");
    const balance = await getOk(ws.testKey, "/api/v1/wallet/balance");
    expect((balance.eoa as Json).held).toEqual({ USDC: "5.00" });
    expect(((balance.networks as Json)["sandbox-b"] as Json).eoa).not.toHaveProperty("held");

    // A payout may spend the 3.00 the faucet gave, not the sender's 5.00.
    const payout = (amount: string) =>
      post(ws.testKey, "/api/v1/payouts", { tokenSymbol: "USDC", amount, destinationAddress: address() });
    expectError(await payout("3.01"), 400, {
      error: MSG.insufficient,
      available: "3.00",
      requested: "3.01",
      tokenSymbol: "USDC",
      network: "sandbox-a",
    });
    expect((await payout("3")).statusCode).toBe(200);
    expectError(await payout("0.01"), 400, {
      error: MSG.insufficient,
      available: "0.00",
      requested: "0.01",
      tokenSymbol: "USDC",
      network: "sandbox-a",
    });
    expect(await unmatched(ws, transfer.id as string)).toMatchObject({ status: "open" });
    expect(await payoutState(ws)).toMatchObject({ failStreak: 0 });

    // Its return spends exactly it, and nothing is held afterwards.
    const back = await returnTransfer(ws.testKey, transfer.id as string, {});
    expect(back.statusCode, back.body).toBe(201);
    expect(back.json().refund).toMatchObject({ status: "completed", amount: "5.00" });
    expect(await ledger(payer)).toBe(5_000_000n);
    expect(await wallet(ws)).toBe("0.00");
    expect((await getOk(ws.testKey, "/api/v1/wallet/balance")).eoa).not.toHaveProperty("held");
  });

  it("kept as the wallet's own money, once: no longer held, and no longer returnable", async () => {
    const ws = await createWorkspace(t);
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "4", fromAddress: address() });
    const id = transfer.id as string;
    const payout = () =>
      post(ws.testKey, "/api/v1/payouts", {
        tokenSymbol: "USDC",
        amount: "4",
        destinationAddress: address(),
      });
    expectError(await payout(), 400, {
      error: MSG.insufficient,
      available: "0.00",
      requested: "4.00",
      tokenSymbol: "USDC",
      network: "sandbox-a",
    });

    const keep = () => post(ws.testKey, `/api/v1/transfers/unmatched/${id}/keep`, {});
    const kept = await keep();
    expect(kept.statusCode, kept.body).toBe(200);
    expect(kept.json().transfer).toEqual({ ...transfer, status: "kept" });
    expect(await unmatched(ws, id)).toMatchObject({ status: "kept" });
    expect((await getOk(ws.testKey, "/api/v1/wallet/balance")).eoa).not.toHaveProperty("held");

    const again = await keep();
    expect(again.statusCode, again.body).toBe(409);
    expect(again.json().error).toContain("kept");
    const back = await returnTransfer(ws.testKey, id, {});
    expect(back.statusCode, back.body).toBe(409);
    const other = await createWorkspace(t);
    const foreign = await post(other.testKey, `/api/v1/transfers/unmatched/${id}/keep`, {});
    expect(foreign.statusCode, foreign.body).toBe(404);

    expect((await payout()).statusCode).toBe(200);
    expect(await wallet(ws)).toBe("0.00");
  });

  it("replays a return under its Idempotency-Key and refuses another request under it", async () => {
    const ws = await createWorkspace(t);
    const payer = address();
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "2", fromAddress: payer });
    const first = await returnTransfer(
      ws.testKey,
      transfer.id as string,
      { reason: "a" },
      { "idempotency-key": "ret-1" },
    );
    expect(first.statusCode, first.body).toBe(201);
    const again = await returnTransfer(
      ws.testKey,
      transfer.id as string,
      { reason: "a" },
      { "idempotency-key": "ret-1" },
    );
    expect(again.statusCode, again.body).toBe(201);
    expect(again.headers["idempotent-replayed"]).toBe("true");
    expect(again.json()).toEqual(first.json());
    const other = await returnTransfer(
      ws.testKey,
      transfer.id as string,
      { reason: "b" },
      { "idempotency-key": "ret-1" },
    );
    expectError(other, 409, { error: MSG.keyUsed, refund: first.json().refund });
    expect(await ledger(payer)).toBe(2_000_000n);
  });
});

describe("POST /api/v1/transfers/unmatched/{id}/attach: refusals", () => {
  it("refuses unknown ids, a missing paymentId, another tenant's transfer and a forwarded payment", async () => {
    const ws = await createWorkspace(t);
    const other = await createWorkspace(t);
    const p = await pay(ws, "10");
    const transfer = await incoming(ws, { tokenSymbol: "USDC", amount: "10" });
    const attach = (key: string, id: string, body?: unknown) =>
      post(key, `/api/v1/transfers/unmatched/${id}/attach`, body);

    expectError(await attach(ws.testKey, randomUUID(), { paymentId: p.id }), 404, {
      error: MSG.transferNotFound,
    });
    expectError(await attach(ws.testKey, "nope", { paymentId: p.id }), 404, { error: MSG.transferNotFound });
    for (const body of [{}, { paymentId: "" }, { paymentId: null }, undefined]) {
      expectError(await attach(ws.testKey, transfer.id as string, body), 400, {
        error: "paymentId is required",
      });
    }
    const otherPayment = await pay(other, "10");
    expectError(await attach(other.testKey, transfer.id as string, { paymentId: otherPayment.id }), 404, {
      error: MSG.transferNotFound,
    });
    expectError(await attach(ws.liveKey, transfer.id as string, { paymentId: p.id }), 404, {
      error: MSG.transferNotFound,
    });
    expectError(await attach(ws.testKey, transfer.id as string, { paymentId: randomUUID() }), 404, {
      error: MSG.notFound,
    });
    // Another workspace's payment is no payment of this one.
    expectError(await attach(ws.testKey, transfer.id as string, { paymentId: otherPayment.id }), 404, {
      error: MSG.notFound,
    });
    // Every sandbox payment is forwarded already.
    expectError(await attach(ws.testKey, transfer.id as string, { paymentId: p.id }), 400, {
      error: "Only a pending or expired payment can take an unmatched transfer",
      status: "forwarded",
    });
    expect(await unmatched(ws, transfer.id as string)).toMatchObject({ status: "open", paymentId: null });
    expect(await payment(ws, p.id as string)).toMatchObject({ status: "forwarded", amountReceived: null });

    // A returned transfer cannot be attached either.
    expect((await returnTransfer(ws.testKey, transfer.id as string)).statusCode).toBe(201);
    const late = await attach(ws.testKey, transfer.id as string, { paymentId: p.id });
    expect(late.statusCode, late.body).toBe(409);
    expect(late.json()).toMatchObject({
      error: "Unmatched transfer is already returned",
      status: "returned",
    });
  });
});
