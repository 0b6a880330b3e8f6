import { describe, expect, it } from "vitest";
import { expireDuePayments } from "../../src/modules/payments/expiry.ts";
import { createWorkspace } from "../support/app.ts";
import { untilConfirmed } from "../support/confirmations.ts";
import {
  api,
  attach,
  balanceOf,
  carve,
  chain,
  chainTransactionsFrom,
  deliveredCompletion,
  devnet,
  expectEoaTransfer,
  fmt,
  getPayment,
  type Json,
  newPayer,
  randomAddress,
  receiver,
  refund,
  returnTransfer,
  same,
  sentCount,
  TX_HASH,
  t,
  UUID,
  unmatched,
  useRefundsLive,
  WHOLE,
  waitForStatus,
  waitForUnmatched,
  workspaceWithGas,
} from "../support/refunds-live.ts";

// The live unmatched inbox (attach, return) and refund events in webhook registrations; refunds:
// live.test.ts; the devnet harness and helpers: support/refunds-live.ts.

useRefundsLive();

describe("the unmatched inbox: attach", () => {
  it("an underpayment (99.50 of 100.00) attached to its payment settles what it carried, fee, net and split on it", async () => {
    const { ws } = await workspaceWithGas();
    const payer = await newPayer();
    const merchant = randomAddress();
    // A split of 25% of the net, in the payment's snapshot (D15): carved from what was received.
    const splitDestination = randomAddress();
    const splits = await api(ws, "PUT", "/api/v1/splits", {
      enabled: true,
      splits: [{ label: "partner", percentBps: 2500, destination: splitDestination }],
    });
    expect(splits.statusCode, splits.body).toBe(200);
    const created = await api(ws, "POST", "/api/v1/payments", {
      tokenSymbol: "USDC",
      amount: "100.00",
      merchantWallet: merchant,
    });
    expect(created.statusCode, created.body).toBe(201);
    const paymentId = created.json().payment.id as string;
    const received = 99_500_000n;
    const txHash = await payer.pay("USDC", created.json().receivingAddress as string, received);

    // It does not match the amount: it lands in the inbox, the payment stays pending.
    const transfer = await waitForUnmatched(ws, txHash);
    // Attached or returned once the chain confirms it (D19, as a payment is confirmed).
    await untilConfirmed(chain, txHash);
    expect(transfer).toMatchObject({
      id: expect.stringMatching(UUID),
      status: "open",
      paymentId: null,
      amount: "99.50",
      token: "USDC",
      to: ws.eoaAddress,
    });
    expect(same(transfer.from, payer.address)).toBe(true);
    expect((await getPayment(ws, paymentId)).status).toBe("pending");
    // A pending payment cannot be refunded.
    const early = await refund(ws, paymentId, {});
    expect(early.statusCode, early.body).toBe(400);

    const treasury = devnet.accounts.treasury.address;
    const treasuryBefore = await balanceOf("USDC", treasury);
    const attached = await attach(ws, transfer.id as string, paymentId);
    expect(attached.statusCode, attached.body).toBe(200);
    // By hand: fee = 99,500,000 × 150 / 10,000 = 1,492,500 units (1.4925 USDC, exact), net 98,007,500.
    const expected = carve(received);
    expect(expected).toEqual({ gross: 99_500_000n, fee: 1_492_500n, net: 98_007_500n });
    expect(attached.json().transfer).toMatchObject({ id: transfer.id, status: "attached", paymentId });
    expect(attached.json().payment).toMatchObject({
      id: paymentId,
      status: "detected",
      amountReceived: "99.50",
      feeAmount: fmt(expected.fee, "USDC"),
      netAmount: fmt(expected.net, "USDC"),
      txHash,
    });
    expect(same(attached.json().payment.payerAddress, payer.address)).toBe(true);

    const forwarded = await waitForStatus(ws, paymentId, "forwarded");
    expect(forwarded).toMatchObject({
      amountReceived: "99.50",
      feeAmount: "1.4925",
      netAmount: "98.0075",
      refundedAmount: "0.00",
    });
    // The split: floor(98,007,500 × 2,500 / 10,000) = 24,501,875; the merchant the rest, 73,505,625.
    const split = (expected.net * 2_500n) / WHOLE;
    expect(split).toBe(24_501_875n);
    expect(await balanceOf("USDC", splitDestination)).toBe(split);
    expect(await balanceOf("USDC", merchant)).toBe(expected.net - split);
    expect((await balanceOf("USDC", treasury)) - treasuryBefore).toBe(expected.fee);
    expect(await balanceOf("USDC", ws.eoaAddress)).toBe(0n);
    // Once only; and it lists as attached to its payment.
    const twice = await attach(ws, transfer.id as string, paymentId);
    expect(twice.statusCode, twice.body).toBe(409);
    expect((await unmatched(ws)).find((u) => u.id === transfer.id)).toMatchObject({
      status: "attached",
      paymentId,
    });
    // Its refund base is what it received: 99.50, not 100.00 (checked before anything is sent).
    const over = await refund(ws, paymentId, { amount: "99.51" });
    expect(over.statusCode, over.body).toBe(400);
    expect(over.json()).toMatchObject({ error: "Refund exceeds the refundable amount", refundable: "99.50" });
    // Its settlement reports what was settled: gross = fee + net = what the transfer carried.
    const settlements = await api(ws, "GET", `/api/v1/settlements?paymentId=${paymentId}`);
    expect(settlements.json()).toMatchObject({
      total: 1,
      settlements: [
        {
          grossAmount: "99.50",
          feeAmount: "1.4925",
          netAmount: "98.0075",
          merchantAmount: "73.505625",
          splits: [{ amount: "24.501875", destination: splitDestination.toLowerCase(), status: "sent" }],
        },
      ],
    });
  }, 180_000);

  it("a payment made after its payment expired, attached to it, is forwarded", async () => {
    const { ws } = await workspaceWithGas();
    const payer = await newPayer();
    const merchant = randomAddress();
    const created = await api(ws, "POST", "/api/v1/payments", {
      tokenSymbol: "USDC",
      amount: "12.34",
      merchantWallet: merchant,
      expiresInMinutes: 1,
    });
    expect(created.statusCode, created.body).toBe(201);
    const paymentId = created.json().payment.id as string;
    // The expiry job, run as at a second past the payment's expiry.
    const expiresAt = Date.parse(created.json().payment.expiresAt as string);
    expect(await expireDuePayments(t.app.ctx.db, new Date(expiresAt + 1_000))).toBeGreaterThanOrEqual(1);
    expect((await getPayment(ws, paymentId)).status).toBe("expired");

    // The exact amount, too late: unmatched, the payment stays expired.
    const gross = 12_340_000n;
    const txHash = await payer.pay("USDC", ws.eoaAddress, gross);
    const transfer = await waitForUnmatched(ws, txHash);
    // Attached or returned once the chain confirms it (D19, as a payment is confirmed).
    await untilConfirmed(chain, txHash);
    expect(transfer).toMatchObject({ status: "open", amount: "12.34", paymentId: null });
    expect((await getPayment(ws, paymentId)).status).toBe("expired");

    const treasury = devnet.accounts.treasury.address;
    const treasuryBefore = await balanceOf("USDC", treasury);
    const attached = await attach(ws, transfer.id as string, paymentId);
    expect(attached.statusCode, attached.body).toBe(200);
    expect(attached.json().payment).toMatchObject({ status: "detected", amountReceived: "12.34" });
    await waitForStatus(ws, paymentId, "forwarded");
    const expected = carve(gross);
    expect(await balanceOf("USDC", merchant)).toBe(expected.net);
    expect((await balanceOf("USDC", treasury)) - treasuryBefore).toBe(expected.fee);
    expect(await balanceOf("USDC", ws.eoaAddress)).toBe(0n);
  }, 180_000);
});

describe("the unmatched inbox: return", () => {
  it("a stray transfer returned goes back to its sender exactly once; the transfer shows returned", async () => {
    const { ws, secret } = await workspaceWithGas();
    const payer = await newPayer();
    const stray = 7_770_000n;
    const txHash = await payer.pay("USDC", ws.eoaAddress, stray);
    const transfer = await waitForUnmatched(ws, txHash);
    // Attached or returned once the chain confirms it (D19, as a payment is confirmed).
    await untilConfirmed(chain, txHash);
    expect(transfer).toMatchObject({ status: "open", amount: "7.77", token: "USDC", paymentId: null });
    expect(same(transfer.from, payer.address)).toBe(true);

    const payerBefore = await balanceOf("USDC", payer.address);
    const sentBefore = await sentCount(ws.eoaAddress);
    const res = await returnTransfer(ws, transfer.id as string, { reason: "not ours" }, "return-1");
    expect(res.statusCode, res.body).toBe(201);
    const r = res.json().refund as Json;
    expect(r).toMatchObject({
      id: expect.stringMatching(UUID),
      paymentId: null,
      amount: "7.77",
      tokenSymbol: "USDC",
      status: "completed",
      txHash: expect.stringMatching(TX_HASH),
      reason: "not ours",
    });
    expect(same(r.destinationAddress, payer.address)).toBe(true);
    await expectEoaTransfer("USDC", r.txHash as string, ws.eoaAddress, payer.address, stray);
    expect((await balanceOf("USDC", payer.address)) - payerBefore).toBe(stray);
    expect(await balanceOf("USDC", ws.eoaAddress)).toBe(0n);
    expect(await sentCount(ws.eoaAddress)).toBe(sentBefore + 1);
    expect((await unmatched(ws)).find((u) => u.id === transfer.id)).toMatchObject({
      status: "returned",
      paymentId: null,
    });

    // The same key: the same return, nothing sent. Without it: already returned (409), nothing sent.
    const replay = await returnTransfer(ws, transfer.id as string, { reason: "not ours" }, "return-1");
    expect(replay.statusCode, replay.body).toBe(201);
    expect(replay.json().refund).toEqual(r);
    const again = await returnTransfer(ws, transfer.id as string, {});
    expect(again.statusCode, again.body).toBe(409);
    // Nor can a returned transfer be attached afterwards.
    const pending = await api(ws, "POST", "/api/v1/payments", {
      tokenSymbol: "USDC",
      amount: "7.77",
      merchantWallet: randomAddress(),
    });
    expect(pending.statusCode, pending.body).toBe(201);
    const late = await attach(ws, transfer.id as string, pending.json().payment.id as string);
    expect(late.statusCode, late.body).toBe(409);
    expect((await getPayment(ws, pending.json().payment.id as string)).status).toBe("pending");
    expect(await sentCount(ws.eoaAddress)).toBe(sentBefore + 1);
    expect((await balanceOf("USDC", payer.address)) - payerBefore).toBe(stray);

    const sent = (await chainTransactionsFrom(ws.eoaAddress)).filter((tx) => tx.purpose === "return");
    expect(sent.map((tx) => [tx.tx_hash, tx.status, tx.payout_id, tx.amount])).toEqual([
      [r.txHash, "mined", r.id, "7770000"],
    ]);
    const delivery = await deliveredCompletion(r.id as string, secret);
    expect(delivery.json).toEqual({ event: "refund.completed", data: r });
  }, 180_000);
});

describe("refund events in webhook registrations (D20)", () => {
  it("a webhook can subscribe to refund.completed and refund.failed by name", async () => {
    const ws = await createWorkspace(t);
    const res = await api(ws, "POST", "/api/v1/webhooks", {
      url: receiver.url,
      events: ["refund.completed", "refund.failed"],
    });
    expect(res.statusCode, res.body).toBe(201);
    expect([...(res.json().webhook.events as string[])].sort()).toEqual([
      "refund.completed",
      "refund.failed",
    ]);
  });
});
