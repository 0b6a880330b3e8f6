import { type Hex, parseUnits } from "viem";
import { describe, expect, it } from "vitest";
import { creditToken } from "../support/devnet-credit.ts";
import { elapse, untilDefined } from "../support/poll.ts";
import {
  api,
  chain,
  cleanups,
  clients,
  devnet,
  forwardedPayment,
  hangingPost,
  holdingProxy,
  newPayer,
  newStore,
  newWorkspace,
  paymentOf,
  refundedAmountOf,
  refundsOf,
  rpc,
  same,
  sentCount,
  startServer,
  transfersOut,
  usdc,
  useRefundsCrash,
} from "../support/refunds-crash.ts";
import { startRpcProxy } from "../support/rpc-proxy.ts";
import { stopService } from "../support/service-process.ts";

// EOA refunds across a kill -9 (after the record, before the broadcast or the signature); the
// unmatched return and the smart wallet: crash-return-and-smart-wallet.test.ts. Harness: support/refunds-crash.ts.

useRefundsCrash();

describe("an EOA refund, the process killed -9 between its record and its broadcast", () => {
  it("ends completed exactly once after a restart: the destination paid once, refundedAmount counted once", async () => {
    const started = performance.now();
    const store = await newStore();
    const proxy = await holdingProxy();
    const first = await startServer(store, { LIVE_RPC_URL: proxy.url });
    const setup = await newWorkspace(first);
    await clients.credit(setup.eoa, { ETH: "1" });
    const payer = await newPayer();
    const paid = await forwardedPayment(first, setup, payer, "30");
    // The workspace's own money to refund from (the payment's left with its settlement).
    await creditToken(devnet, "USDC", setup.eoa, "30");
    const payerBefore = await usdc(payer.address);
    const sentBefore = await sentCount(setup.eoa);

    proxy.arm(setup.eoa);
    const hanging = hangingPost(
      first,
      `/api/v1/payments/${paid.id}/refunds`,
      setup.liveKey,
      { amount: "12.5", reason: "crash" },
      "crash-refund-1",
    );
    await proxy.whenHeld(first);
    await stopService(first.child, "SIGKILL");
    expect(await first.exited).toEqual({ code: null, signal: "SIGKILL" });
    proxy.drop();
    const killedAt = performance.now();
    expect(await hanging).toHaveProperty("error");

    // Nothing moved on chain; the node never got the transaction.
    expect(await usdc(payer.address)).toBe(payerBefore);
    expect(await usdc(setup.eoa)).toBe(parseUnits("30", 6));
    expect(await sentCount(setup.eoa)).toBe(sentBefore);
    const left = await store.read(async (database) => ({
      ...(await transfersOut(database, setup)),
      refunded: await refundedAmountOf(database, paid.id),
    }));
    expect(left.rows).toEqual([
      expect.objectContaining({
        kind: "refund",
        status: "processing",
        payment_id: paid.id,
        amount: "12500000",
      }),
    ]);
    const refundId = left.rows[0]?.id as string;
    expect(left.sent).toEqual([
      expect.objectContaining({
        purpose: "refund",
        status: "signed",
        payout_id: refundId,
        amount: "12500000",
      }),
    ]);
    const recordedHash = left.sent[0]?.tx_hash as Hex;
    expect(await rpc("eth_getTransactionByHash", [recordedHash])).toBeNull();
    expect(left.refunded).toBe("12500000"); // taken when it was recorded
    expect(left.events).toEqual([]);

    const second = await startServer(store);
    const completed = await untilDefined(
      "the refund to complete after the restart",
      async () => {
        const { refunds } = await refundsOf(second, setup, paid.id);
        return refunds[0]?.status === "completed" ? refunds : undefined;
      },
      120_000,
    );
    const finishedAt = performance.now();
    expect(completed).toEqual([
      expect.objectContaining({
        id: refundId,
        paymentId: paid.id,
        amount: "12.50",
        status: "completed",
        txHash: recordedHash,
        reason: "crash",
      }),
    ]);
    expect(same(completed[0]?.destinationAddress, payer.address)).toBe(true);
    const receipt = await chain.getTransactionReceipt({ hash: recordedHash });
    expect(receipt.status).toBe("success");

    // A few more blocks and reconcile rounds: nothing is sent a second time (a fixed wait on
    // purpose: nothing happening has no event to poll for).
    await elapse(3_000);
    expect((await usdc(payer.address)) - payerBefore).toBe(12_500_000n);
    expect(await usdc(setup.eoa)).toBe(parseUnits("30", 6) - 12_500_000n);
    expect(await sentCount(setup.eoa)).toBe(sentBefore + 1);
    expect((await paymentOf(second, setup, paid.id)).refundedAmount).toBe("12.50");
    // The client's retry with its key is answered with the refund as it stands: nothing new.
    const retried = await api(
      second,
      "POST",
      `/api/v1/payments/${paid.id}/refunds`,
      setup.liveKey,
      { amount: "12.5", reason: "crash" },
      { "idempotency-key": "crash-refund-1" },
    );
    expect(retried.status, JSON.stringify(retried.json)).toBe(201);
    expect(retried.json.refund).toEqual(completed[0]);
    expect(await sentCount(setup.eoa)).toBe(sentBefore + 1);
    expect((await refundsOf(second, setup, paid.id)).total).toBe(1);

    await stopService(second.child, "SIGTERM");
    expect(await second.exited, second.output()).toEqual({ code: 0, signal: null });
    const final = await store.read(async (database) => ({
      ...(await transfersOut(database, setup)),
      refunded: await refundedAmountOf(database, paid.id),
    }));
    expect(final.rows).toEqual([
      expect.objectContaining({ id: refundId, kind: "refund", status: "completed", tx_hash: recordedHash }),
    ]);
    expect(final.sent).toEqual([expect.objectContaining({ tx_hash: recordedHash, status: "mined" })]);
    expect(final.refunded).toBe("12500000");
    expect(final.events.map((e) => e.event_type)).toEqual(["refund.completed"]);
    expect(final.events[0]?.payload).toMatchObject({
      id: refundId,
      status: "completed",
      txHash: recordedHash,
    });
    console.info(
      `[refunds-crash] EOA refund: killed after ${((killedAt - started) / 1000).toFixed(1)} s, completed ${((finishedAt - killedAt) / 1000).toFixed(1)} s after the kill (restart included)`,
    );
  }, 300_000);
});

describe("an EOA refund, the process killed -9 after its record and before its transaction is signed", () => {
  it("fails as never sent after a restart: nothing paid, its amount given back, refund.failed; a new refund then pays once", async () => {
    const store = await newStore();
    // Once armed, the node's pending count of the wallet is never answered: the sender reads it
    // beside the refund's record and signs only with it, so the refund stays recorded, unsigned.
    let armed: string | undefined;
    let held = false;
    const proxy = await startRpcProxy(devnet.rpcUrl, async ({ method, params }) => {
      if (
        armed === undefined ||
        method !== "eth_getTransactionCount" ||
        params[1] !== "pending" ||
        !same(params[0], armed)
      )
        return undefined;
      held = true;
      return new Promise<undefined>(() => undefined);
    });
    cleanups.push(() => proxy.close());
    const first = await startServer(store, { LIVE_RPC_URL: proxy.url });
    const setup = await newWorkspace(first);
    await clients.credit(setup.eoa, { ETH: "1" });
    const payer = await newPayer();
    const paid = await forwardedPayment(first, setup, payer, "10");
    await creditToken(devnet, "USDC", setup.eoa, "10");
    const payerBefore = await usdc(payer.address);
    const sentBefore = await sentCount(setup.eoa);

    armed = setup.eoa;
    const path = `/api/v1/payments/${paid.id}/refunds`;
    const hanging = hangingPost(first, path, setup.liveKey, { amount: "4" }, "crash-unsigned-1");
    await untilDefined(
      "the refund's sender to ask for the wallet's nonce",
      async () => {
        if (first.child.exitCode !== null) throw new Error(`the service exited\n${first.output()}`);
        return held ? true : undefined;
      },
      60_000,
    );
    await untilDefined(
      "the refund to be recorded",
      async () => ((await refundsOf(first, setup, paid.id)).total === 1 ? true : undefined),
      60_000,
    );
    await stopService(first.child, "SIGKILL");
    expect(await first.exited).toEqual({ code: null, signal: "SIGKILL" });
    expect(await hanging).toHaveProperty("error");

    const left = await store.read(async (database) => ({
      ...(await transfersOut(database, setup)),
      refunded: await refundedAmountOf(database, paid.id),
    }));
    expect(left.rows).toEqual([
      expect.objectContaining({ kind: "refund", status: "processing", tx_hash: null }),
    ]);
    const refundId = left.rows[0]?.id as string;
    expect(left.sent).toEqual([]); // nothing signed
    expect(left.refunded).toBe("4000000");

    // After a restart the reconciler fails it once its lease has run out: it was never sent.
    const second = await startServer(store);
    const failed = await untilDefined(
      "the unsent refund to be failed",
      async () => {
        const { refunds } = await refundsOf(second, setup, paid.id);
        return refunds[0]?.status === "failed" ? refunds[0] : undefined;
      },
      120_000,
    );
    expect(failed).toMatchObject({ id: refundId, amount: "4.00", txHash: null });
    expect((await paymentOf(second, setup, paid.id)).refundedAmount).toBe("0.00");
    expect(await usdc(payer.address)).toBe(payerBefore);
    expect(await sentCount(setup.eoa)).toBe(sentBefore);
    // The client's retry with its key is answered with that refund, failed: nothing is sent.
    const retried = await api(
      second,
      "POST",
      path,
      setup.liveKey,
      { amount: "4" },
      {
        "idempotency-key": "crash-unsigned-1",
      },
    );
    expect(retried.status, JSON.stringify(retried.json)).toBe(201);
    expect(retried.json.refund).toMatchObject({ id: refundId, status: "failed" });
    expect(await sentCount(setup.eoa)).toBe(sentBefore);

    // The whole amount is refundable again, and paid exactly once.
    const fresh = await api(
      second,
      "POST",
      path,
      setup.liveKey,
      {},
      { "idempotency-key": "crash-unsigned-2" },
    );
    expect(fresh.status, JSON.stringify(fresh.json)).toBe(201);
    expect(fresh.json.refund).toMatchObject({ amount: "10.00", status: "completed" });
    // A fixed wait on purpose: time for a second send to show, were there one.
    await elapse(2_000);
    expect((await usdc(payer.address)) - payerBefore).toBe(10_000_000n);
    expect(await sentCount(setup.eoa)).toBe(sentBefore + 1);
    expect((await paymentOf(second, setup, paid.id)).refundedAmount).toBe("10.00");

    await stopService(second.child, "SIGTERM");
    expect(await second.exited, second.output()).toEqual({ code: 0, signal: null });
    const final = await store.read(async (database) => ({
      ...(await transfersOut(database, setup)),
      refunded: await refundedAmountOf(database, paid.id),
    }));
    expect(final.refunded).toBe("10000000");
    expect(final.rows.map((r) => [r.id === refundId, r.status]).sort()).toEqual([
      [false, "completed"],
      [true, "failed"],
    ]);
    // D19's events: the failed refund is announced (refund.failed), the new one completed.
    expect(final.events.map((e) => e.event_type).sort()).toEqual(["refund.completed", "refund.failed"]);
  }, 300_000);
});
