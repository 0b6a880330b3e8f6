import { type Address, type Hex, parseEther } from "viem";
import { describe, expect, it } from "vitest";
import { createWorkspace } from "../support/app.ts";
import { creditToken } from "../support/devnet-credit.ts";
import {
  aa,
  api,
  balanceOf,
  bundler,
  chain,
  chainTransactionsFrom,
  deliveredCompletion,
  devnet,
  expectEoaTransfer,
  forwardedPayment,
  getPayment,
  type Json,
  newPayer,
  outboxOf,
  randomAddress,
  receiver,
  refund,
  registerWebhook,
  same,
  sentCount,
  TX_HASH,
  t,
  UUID,
  usdcTransfers,
  useRefundsLive,
  workspaceWithGas,
} from "../support/refunds-live.ts";

// Live refunds from the EOA and the smart wallet, and failed ones; the unmatched inbox and refund
// events: live-inbox.test.ts; the devnet harness and helpers: support/refunds-live.ts.

useRefundsLive();

describe("refunds from the workspace EOA", () => {
  it("a USDC payment refunded in part, then the rest: exact balances, mined transactions, refund.completed, idempotent", async () => {
    const { ws, secret } = await workspaceWithGas();
    const payer = await newPayer();
    const paid = await forwardedPayment(ws, payer, "USDC", "40");
    // The payment's money left with the settlement; the refund is the workspace's own money.
    expect(await balanceOf("USDC", ws.eoaAddress)).toBe(0n);
    await creditToken(devnet, "USDC", ws.eoaAddress as Address, "50");

    const payerBefore = await balanceOf("USDC", payer.address);
    const ethBefore = await balanceOf("ETH", ws.eoaAddress);
    const merchantBefore = await balanceOf("USDC", paid.merchant);
    const first = await refund(ws, paid.id, { amount: "15.25", reason: "damaged in transit" }, "refund-1");
    expect(first.statusCode, first.body).toBe(201);
    const one = first.json().refund as Json;
    expect(one).toEqual({
      id: expect.stringMatching(UUID),
      paymentId: paid.id,
      amount: "15.25",
      tokenSymbol: "USDC",
      network: "default",
      destinationAddress: expect.any(String),
      status: "completed",
      txHash: expect.stringMatching(TX_HASH),
      reason: "damaged in transit",
      createdAt: expect.any(String),
    });
    expect(same(one.destinationAddress, payer.address)).toBe(true); // the payerAddress by default
    const gas1 = await expectEoaTransfer(
      "USDC",
      one.txHash as string,
      ws.eoaAddress,
      payer.address,
      15_250_000n,
    );
    expect((await balanceOf("USDC", payer.address)) - payerBefore).toBe(15_250_000n);
    expect(await balanceOf("USDC", ws.eoaAddress)).toBe(50_000_000n - 15_250_000n);
    expect(await balanceOf("ETH", ws.eoaAddress)).toBe(ethBefore - gas1);
    expect(await balanceOf("USDC", paid.merchant)).toBe(merchantBefore); // never the merchant's wallet
    expect((await getPayment(ws, paid.id)).refundedAmount).toBe("15.25");

    // The same Idempotency-Key and body: the same refund, nothing sent again.
    const sentBefore = await sentCount(ws.eoaAddress);
    const repeat = await refund(ws, paid.id, { amount: "15.25", reason: "damaged in transit" }, "refund-1");
    expect(repeat.statusCode, repeat.body).toBe(201);
    expect(repeat.json().refund).toEqual(one);
    // The same key with another request is a conflict.
    const reused = await refund(ws, paid.id, { amount: "1.00" }, "refund-1");
    expect(reused.statusCode, reused.body).toBe(409);
    // More than is left: 400 with what is refundable, nothing sent.
    const tooMuch = await refund(ws, paid.id, { amount: "24.76" });
    expect(tooMuch.statusCode, tooMuch.body).toBe(400);
    expect(tooMuch.json()).toMatchObject({
      error: "Refund exceeds the refundable amount",
      refundable: "24.75",
    });
    expect(await sentCount(ws.eoaAddress)).toBe(sentBefore);
    expect((await balanceOf("USDC", payer.address)) - payerBefore).toBe(15_250_000n);

    // No amount: what is left (24.75), to the payer again.
    const rest = await refund(ws, paid.id, {}, "refund-2");
    expect(rest.statusCode, rest.body).toBe(201);
    const two = rest.json().refund as Json;
    expect(two).toMatchObject({ paymentId: paid.id, amount: "24.75", status: "completed", reason: null });
    expect(two.id).not.toBe(one.id);
    await expectEoaTransfer("USDC", two.txHash as string, ws.eoaAddress, payer.address, 24_750_000n);
    expect((await balanceOf("USDC", payer.address)) - payerBefore).toBe(40_000_000n);
    expect(await balanceOf("USDC", ws.eoaAddress)).toBe(10_000_000n);
    expect(await sentCount(ws.eoaAddress)).toBe(sentBefore + 1);
    const after = await getPayment(ws, paid.id);
    expect(after).toMatchObject({ status: "forwarded", refundedAmount: "40.00", amountReceived: null });

    // Nothing is left to refund.
    const none = await refund(ws, paid.id, {});
    expect(none.statusCode, none.body).toBe(400);
    expect(none.json()).toMatchObject({ error: "Refund exceeds the refundable amount", refundable: "0.00" });

    // The payment's refunds, oldest first, as the POSTs answered them.
    const listed = await api(ws, "GET", `/api/v1/payments/${paid.id}/refunds`);
    expect(listed.statusCode, listed.body).toBe(200);
    expect(listed.json()).toMatchObject({ total: 2, refunds: [one, two] });

    // Each refund's transaction recorded (purpose refund, named by the refund) and mined.
    const sent = (await chainTransactionsFrom(ws.eoaAddress)).filter((tx) => tx.purpose === "refund");
    expect(sent.map((tx) => [tx.tx_hash, tx.status, tx.payout_id, tx.amount])).toEqual([
      [one.txHash, "mined", one.id, "15250000"],
      [two.txHash, "mined", two.id, "24750000"],
    ]);
    // refund.completed, once each, delivered with the refund as its data.
    for (const r of [one, two]) {
      const delivery = await deliveredCompletion(r.id as string, secret);
      expect(delivery.json).toEqual({ event: "refund.completed", data: r });
    }
    expect(await outboxOf(ws, "refund.completed")).toHaveLength(2);
    expect(await outboxOf(ws, "refund.failed")).toEqual([]);
    // A refund is not a payout: the payout history stays empty.
    const payouts = await api(ws, "GET", "/api/v1/payouts");
    expect(payouts.json()).toMatchObject({ total: 0 });
  }, 180_000);

  it("an ETH refund: the destination gets exactly the amount, the EOA pays the amount and the receipt's gas", async () => {
    const { ws, secret } = await workspaceWithGas("1");
    const payer = await newPayer();
    const paid = await forwardedPayment(ws, payer, "ETH", "0.5");

    // To an address of the merchant's choosing.
    const destination = randomAddress();
    const eoaBefore = await balanceOf("ETH", ws.eoaAddress);
    const res = await refund(ws, paid.id, { amount: "0.2", destinationAddress: destination });
    expect(res.statusCode, res.body).toBe(201);
    const partial = res.json().refund as Json;
    expect(partial).toMatchObject({
      paymentId: paid.id,
      amount: "0.20",
      tokenSymbol: "ETH",
      destinationAddress: destination,
      status: "completed",
      txHash: expect.stringMatching(TX_HASH),
    });
    const gas = await expectEoaTransfer(
      "ETH",
      partial.txHash as string,
      ws.eoaAddress,
      destination,
      parseEther("0.2"),
    );
    expect(gas).toBeGreaterThan(0n);
    expect(await balanceOf("ETH", destination)).toBe(parseEther("0.2"));
    expect(await balanceOf("ETH", ws.eoaAddress)).toBe(eoaBefore - parseEther("0.2") - gas);

    // The rest, to the payer (who sends nothing meanwhile): exactly 0.3 more.
    const payerBefore = await balanceOf("ETH", payer.address);
    const eoaMid = await balanceOf("ETH", ws.eoaAddress);
    const rest = await refund(ws, paid.id);
    expect(rest.statusCode, rest.body).toBe(201);
    const full = rest.json().refund as Json;
    expect(full).toMatchObject({ amount: "0.30", tokenSymbol: "ETH", status: "completed" });
    expect(same(full.destinationAddress, payer.address)).toBe(true);
    const gas2 = await expectEoaTransfer(
      "ETH",
      full.txHash as string,
      ws.eoaAddress,
      payer.address,
      parseEther("0.3"),
    );
    expect((await balanceOf("ETH", payer.address)) - payerBefore).toBe(parseEther("0.3"));
    expect(await balanceOf("ETH", ws.eoaAddress)).toBe(eoaMid - parseEther("0.3") - gas2);
    expect((await getPayment(ws, paid.id)).refundedAmount).toBe("0.50");
    for (const r of [partial, full]) {
      const delivery = await deliveredCompletion(r.id as string, secret);
      expect(delivery.json).toEqual({ event: "refund.completed", data: r });
    }
  }, 180_000);

  it("a refund the EOA cannot pay → 400 Insufficient balance: nothing sent, nothing taken, the key left free", async () => {
    const { ws } = await workspaceWithGas();
    const payer = await newPayer();
    const paid = await forwardedPayment(ws, payer, "USDC", "20");
    expect(await balanceOf("USDC", ws.eoaAddress)).toBe(0n); // the payment's money was forwarded

    const sentBefore = await sentCount(ws.eoaAddress);
    const payerBefore = await balanceOf("USDC", payer.address);
    const res = await refund(ws, paid.id, { amount: "5" }, "short-1");
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({
      error: "Insufficient balance",
      available: "0.00",
      requested: "5.00",
      tokenSymbol: "USDC",
      network: "default",
    });
    expect(await sentCount(ws.eoaAddress)).toBe(sentBefore);
    expect(await balanceOf("USDC", payer.address)).toBe(payerBefore);
    expect((await getPayment(ws, paid.id)).refundedAmount).toBe("0.00");
    const listed = await api(ws, "GET", `/api/v1/payments/${paid.id}/refunds`);
    expect(listed.json()).toMatchObject({ total: 0, refunds: [] });
    expect((await chainTransactionsFrom(ws.eoaAddress)).filter((tx) => tx.purpose === "refund")).toEqual([]);
    expect(await outboxOf(ws, "refund.failed")).toEqual([]);
    // A balance pre-check is not a failed transfer (D13): the breaker counted nothing.
    const state = await api(ws, "GET", `/api/v1/workspaces/${ws.id}/payout-state`);
    expect(state.json()).toMatchObject({ status: "active", failStreak: 0 });

    // Once the wallet holds the money, the same key and body refund it (the refusal took nothing).
    await creditToken(devnet, "USDC", ws.eoaAddress as Address, "5");
    const again = await refund(ws, paid.id, { amount: "5" }, "short-1");
    expect(again.statusCode, again.body).toBe(201);
    expect(again.json().refund).toMatchObject({ amount: "5.00", status: "completed" });
    expect((await balanceOf("USDC", payer.address)) - payerBefore).toBe(5_000_000n);
    expect(await balanceOf("USDC", ws.eoaAddress)).toBe(0n);
    expect((await getPayment(ws, paid.id)).refundedAmount).toBe("5.00");
  }, 180_000);
});

describe("refunds that fail, and the circuit breaker (D6, D13, issue 36)", () => {
  it("a refund its recipient refuses is failed: nothing sent, its amount given back, refund.failed; not counted", async () => {
    const { ws } = await workspaceWithGas("1");
    const payer = await newPayer();
    const paid = await forwardedPayment(ws, payer, "ETH", "0.5");
    // An ERC-20 contract has no payable fallback: ETH sent to it reverts, and the node's estimate
    // says so before anything is signed.
    const contract = devnet.tokens.USDC;
    const contractBefore = await balanceOf("ETH", contract);
    const sentBefore = await sentCount(ws.eoaAddress);
    const eoaBefore = await balanceOf("ETH", ws.eoaAddress);
    const failedRefunds: Json[] = [];
    for (let i = 1; i <= 3; i++) {
      const res = await refund(ws, paid.id, { amount: "0.01", destinationAddress: contract });
      expect(res.statusCode, res.body).toBe(201);
      const body = res.json();
      expect(body.refund).toMatchObject({ amount: "0.01", status: "failed", txHash: null });
      expect(body.refund.error).toMatch(/^the recipient's code refuses ETH/);
      failedRefunds.push(body.refund as Json);
      expect((await getPayment(ws, paid.id)).refundedAmount).toBe("0.00");
      // Its recipient's doing, not the workspace's sending: the breaker counts nothing.
      const state = await api(ws, "GET", `/api/v1/workspaces/${ws.id}/payout-state`);
      expect(state.json()).toMatchObject({ status: "active", failStreak: 0 });
    }
    // Not a transaction, not a wei of gas.
    expect(await sentCount(ws.eoaAddress)).toBe(sentBefore);
    expect(await balanceOf("ETH", ws.eoaAddress)).toBe(eoaBefore);
    expect(await balanceOf("ETH", contract)).toBe(contractBefore);
    for (const r of failedRefunds) {
      const [delivery] = await receiver.waitFor(
        1,
        (q) => q.json.event === "refund.failed" && (q.json.data as Json | undefined)?.id === r.id,
        30_000,
      );
      expect(delivery?.json).toMatchObject({ event: "refund.failed", data: { id: r.id, status: "failed" } });
    }
    expect(await outboxOf(ws, "refund.failed")).toHaveLength(3);

    // Refunds go on (the whole amount is refundable again).
    const payerBefore = await balanceOf("ETH", payer.address);
    const ok = await refund(ws, paid.id, { amount: "0.1" });
    expect(ok.statusCode, ok.body).toBe(201);
    expect(ok.json().refund).toMatchObject({ amount: "0.10", status: "completed" });
    expect((await balanceOf("ETH", payer.address)) - payerBefore).toBe(parseEther("0.1"));
    expect((await getPayment(ws, paid.id)).refundedAmount).toBe("0.10");
    const state = await api(ws, "GET", `/api/v1/workspaces/${ws.id}/payout-state`);
    expect(state.json()).toMatchObject({ status: "active", failStreak: 0 });
  }, 180_000);
});

describe("a refund from the smart wallet", () => {
  it("is one sponsored user operation: the smart wallet loses exactly the amount, the payer gets it, userOpHash", async () => {
    const ws = await createWorkspace(t);
    const secret = await registerWebhook(ws);
    // The smart wallet is the workspace's default: payments are received and refunds sent there.
    const wallet = await api(ws, "POST", `/api/v1/workspaces/${ws.id}/smart-wallet`, { setDefault: true });
    expect([200, 201], wallet.body).toContain(wallet.statusCode);
    expect(wallet.json().defaultWalletType).toBe("smart_wallet");
    const smart = wallet.json().smartWallet.address as Address;
    const payer = await newPayer();
    const paid = await forwardedPayment(ws, payer, "USDC", "25");
    expect(paid.receivingAddress).toBe(smart);
    expect(await balanceOf("USDC", smart)).toBe(0n);
    await creditToken(devnet, "USDC", smart, "30");

    const payerBefore = await balanceOf("USDC", payer.address);
    const smartEthBefore = await balanceOf("ETH", smart);
    const eoaSent = await sentCount(ws.eoaAddress);
    const res = await refund(ws, paid.id, { amount: "12.5" }, "smart-1");
    expect(res.statusCode, res.body).toBe(201);
    const r = res.json().refund as Json;
    expect(r).toMatchObject({
      paymentId: paid.id,
      amount: "12.50",
      tokenSymbol: "USDC",
      status: "completed",
      txHash: expect.stringMatching(TX_HASH),
      userOpHash: expect.stringMatching(TX_HASH),
    });
    expect(same(r.destinationAddress, payer.address)).toBe(true);
    expect(r.userOpHash).not.toBe(r.txHash);

    // The transaction is the bundle that carried exactly this operation, paid by the paymaster.
    const op = await bundler.getUserOperationReceipt({ hash: r.userOpHash as Hex });
    expect(op.success).toBe(true);
    expect(op.receipt.transactionHash).toBe(r.txHash);
    expect(same(op.sender, smart)).toBe(true);
    expect(same(op.paymaster, aa.paymaster)).toBe(true);
    const receipt = await chain.getTransactionReceipt({ hash: r.txHash as Hex });
    expect(receipt.status).toBe("success");
    expect(same(receipt.to, aa.entryPoint)).toBe(true);
    expect(usdcTransfers(receipt.logs)).toEqual([
      [smart.toLowerCase(), payer.address.toLowerCase(), 12_500_000n],
    ]);
    expect((await balanceOf("USDC", payer.address)) - payerBefore).toBe(12_500_000n);
    expect(await balanceOf("USDC", smart)).toBe(30_000_000n - 12_500_000n);
    expect(await balanceOf("ETH", smart)).toBe(smartEthBefore); // sponsored
    expect(await sentCount(ws.eoaAddress)).toBe(eoaSent); // nothing left the EOA
    expect((await getPayment(ws, paid.id)).refundedAmount).toBe("12.50");

    const listed = await api(ws, "GET", `/api/v1/payments/${paid.id}/refunds`);
    expect(listed.json()).toMatchObject({ total: 1, refunds: [r] });
    const delivery = await deliveredCompletion(r.id as string, secret);
    expect(delivery.json).toEqual({ event: "refund.completed", data: r });
  }, 240_000);
});
