import { type Address, type Hex, parseUnits } from "viem";
import { describe, expect, it } from "vitest";
import { untilConfirmed } from "../support/confirmations.ts";
import { creditToken } from "../support/devnet-credit.ts";
import { elapse, untilDefined } from "../support/poll.ts";
import {
  aa,
  api,
  bundler,
  bundlerLog,
  chain,
  clients,
  devnet,
  forwardedPayment,
  hangingPost,
  holdingProxy,
  newPayer,
  newStore,
  newWorkspace,
  paymentOf,
  pendingWhere,
  refundedAmountOf,
  refundsOf,
  restoreMining,
  rpc,
  same,
  sentCount,
  startServer,
  stopMining,
  TX_HASH,
  transfersOut,
  usdc,
  useRefundsCrash,
} from "../support/refunds-crash.ts";
import { type Json, stopService } from "../support/service-process.ts";

// The return of an unmatched transfer and a smart wallet refund across a kill -9; EOA refunds:
// crash.test.ts; the harness: support/refunds-crash.ts.

useRefundsCrash();

describe("the return of an unmatched transfer, the process killed -9 between its record and its broadcast", () => {
  it("ends completed exactly once after a restart: the sender paid back once, the transfer returned", async () => {
    const started = performance.now();
    const store = await newStore();
    const proxy = await holdingProxy();
    const first = await startServer(store, { LIVE_RPC_URL: proxy.url });
    const setup = await newWorkspace(first);
    await clients.credit(setup.eoa, { ETH: "1" });
    await creditToken(devnet, "USDC", setup.eoa, "20"); // money of its own besides the stray transfer
    const payer = await newPayer();
    const strayHash = await payer.payUsdc(setup.eoa, 6_660_000n);
    const transfer = await untilDefined(
      "the stray transfer in the unmatched inbox",
      async () => {
        const res = await api(first, "GET", "/api/v1/transfers/unmatched?limit=100", setup.liveKey);
        expect(res.status).toBe(200);
        return (res.json.transfers as Json[]).find((u) => same(u.txHash, strayHash));
      },
      60_000,
    );
    expect(transfer).toMatchObject({ status: "open", amount: "6.66", paymentId: null });
    const payerBefore = await usdc(payer.address);
    const sentBefore = await sentCount(setup.eoa);

    proxy.arm(setup.eoa);
    // Returned once the chain confirms it (D19, as a payment is confirmed).
    await untilConfirmed(chain, strayHash);
    const path = `/api/v1/transfers/unmatched/${transfer.id}/return`;
    const hanging = hangingPost(first, path, setup.liveKey, {}, "crash-return-1");
    await proxy.whenHeld(first);
    await stopService(first.child, "SIGKILL");
    expect(await first.exited).toEqual({ code: null, signal: "SIGKILL" });
    proxy.drop();
    const killedAt = performance.now();
    expect(await hanging).toHaveProperty("error");

    expect(await usdc(payer.address)).toBe(payerBefore);
    expect(await sentCount(setup.eoa)).toBe(sentBefore);
    const left = await store.read(async (database) => ({
      ...(await transfersOut(database, setup)),
      inbox: await database.db
        .selectFrom("unmatched_transfers")
        .select(["status"])
        .where("id", "=", transfer.id as string)
        .executeTakeFirstOrThrow(),
    }));
    expect(left.rows).toEqual([
      expect.objectContaining({
        kind: "return",
        status: "processing",
        unmatched_transfer_id: transfer.id,
        amount: "6660000",
      }),
    ]);
    const returnId = left.rows[0]?.id as string;
    expect(left.sent).toEqual([
      expect.objectContaining({ purpose: "return", status: "signed", payout_id: returnId }),
    ]);
    const recordedHash = left.sent[0]?.tx_hash as Hex;
    expect(await rpc("eth_getTransactionByHash", [recordedHash])).toBeNull();
    expect(left.inbox.status).toBe("returned"); // claimed when the return was recorded

    const second = await startServer(store);
    // The client's retry with its key answers the return as it stands, until it completed.
    const done = await untilDefined(
      "the return to complete after the restart",
      async () => {
        const res = await api(
          second,
          "POST",
          path,
          setup.liveKey,
          {},
          { "idempotency-key": "crash-return-1" },
        );
        expect(res.status, JSON.stringify(res.json)).toBe(201);
        const r = res.json.refund as Json;
        return r.status === "completed" ? r : undefined;
      },
      120_000,
    );
    const finishedAt = performance.now();
    expect(done).toMatchObject({
      id: returnId,
      paymentId: null,
      amount: "6.66",
      status: "completed",
      txHash: recordedHash,
    });
    expect(same(done.destinationAddress, payer.address)).toBe(true);

    // A fixed wait on purpose: more blocks and reconcile rounds, in which nothing is sent again.
    await elapse(3_000);
    expect((await usdc(payer.address)) - payerBefore).toBe(6_660_000n);
    expect(await usdc(setup.eoa)).toBe(parseUnits("20", 6));
    expect(await sentCount(setup.eoa)).toBe(sentBefore + 1);
    const listed = await api(second, "GET", "/api/v1/transfers/unmatched?limit=100", setup.liveKey);
    expect((listed.json.transfers as Json[]).find((u) => u.id === transfer.id)).toMatchObject({
      status: "returned",
    });
    const again = await api(second, "POST", path, setup.liveKey, {});
    expect(again.status, JSON.stringify(again.json)).toBe(409);

    await stopService(second.child, "SIGTERM");
    expect(await second.exited, second.output()).toEqual({ code: 0, signal: null });
    const final = await store.read((database) => transfersOut(database, setup));
    expect(final.rows).toEqual([
      expect.objectContaining({ id: returnId, kind: "return", status: "completed", tx_hash: recordedHash }),
    ]);
    expect(final.sent).toEqual([expect.objectContaining({ tx_hash: recordedHash, status: "mined" })]);
    expect(final.events.map((e) => e.event_type)).toEqual(["refund.completed"]);
    expect(final.events[0]?.payload).toMatchObject({ id: returnId, paymentId: null, status: "completed" });
    console.info(
      `[refunds-crash] return: killed after ${((killedAt - started) / 1000).toFixed(1)} s, completed ${((finishedAt - killedAt) / 1000).toFixed(1)} s after the kill (restart included)`,
    );
  }, 300_000);
});

describe("a smart wallet refund, the process killed -9 with its user operation recorded and not mined", () => {
  it("ends completed exactly once after a restart, by the operation recorded before the crash", async () => {
    const started = performance.now();
    const store = await newStore();
    const first = await startServer(store);
    const setup = await newWorkspace(first);
    const wallet = await api(
      first,
      "POST",
      `/api/v1/workspaces/${setup.workspaceId}/smart-wallet`,
      setup.liveKey,
    );
    expect([200, 201], JSON.stringify(wallet.json)).toContain(wallet.status);
    const smart = (wallet.json.smartWallet as { address: Address }).address;
    const payer = await newPayer();
    const paid = await forwardedPayment(first, setup, payer, "20", "smart_wallet");
    expect(paid.receivingAddress).toBe(smart);
    await creditToken(devnet, "USDC", smart, "20");
    const payerBefore = await usdc(payer.address);

    // No more blocks: the operation is recorded and sent; the bundler's transaction waits in the pool.
    await stopMining();
    const hanging = hangingPost(
      first,
      `/api/v1/payments/${paid.id}/refunds`,
      setup.liveKey,
      { amount: "8", walletType: "smart_wallet" },
      "crash-smart-1",
    );
    const pending = await untilDefined(
      "the refund's bundle in the node's pool",
      async () => {
        if (first.child.exitCode !== null) throw new Error(`the service exited\n${first.output()}`);
        const txs = await pendingWhere((tx) => same(tx.to, aa.entryPoint));
        return txs.length > 0 ? txs : undefined;
      },
      60_000,
    );
    expect(pending, `bundler: ${bundlerLog}`).toHaveLength(1);
    const bundleHash = pending[0]?.hash as Hex;
    await stopService(first.child, "SIGKILL");
    expect(await first.exited).toEqual({ code: null, signal: "SIGKILL" });
    const killedAt = performance.now();
    expect(await hanging).toHaveProperty("error");
    expect(await usdc(payer.address)).toBe(payerBefore);
    expect(await usdc(smart)).toBe(parseUnits("20", 6));

    const left = await store.read(async (database) => ({
      ...(await transfersOut(database, setup)),
      refunded: await refundedAmountOf(database, paid.id),
    }));
    expect(left.rows).toEqual([
      expect.objectContaining({
        kind: "refund",
        status: "processing",
        tx_hash: null,
        user_op_hash: expect.stringMatching(TX_HASH),
        user_operation: expect.any(String),
      }),
    ]);
    const refundId = left.rows[0]?.id as string;
    const userOpHash = left.rows[0]?.user_op_hash as Hex;
    expect(left.refunded).toBe("8000000");

    await restoreMining();
    const second = await startServer(store);
    const completed = await untilDefined(
      "the smart wallet refund to complete after the restart",
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
        amount: "8.00",
        status: "completed",
        txHash: bundleHash,
        userOpHash,
      }),
    ]);
    const op = await bundler.getUserOperationReceipt({ hash: userOpHash });
    expect(op.success).toBe(true);
    expect(op.receipt.transactionHash).toBe(bundleHash);
    expect(same(op.sender, smart)).toBe(true);

    // A fixed wait on purpose: more blocks and reconcile rounds, in which nothing is sent again.
    await elapse(3_000);
    expect((await usdc(payer.address)) - payerBefore).toBe(8_000_000n);
    expect(await usdc(smart)).toBe(parseUnits("12", 6));
    expect((await paymentOf(second, setup, paid.id)).refundedAmount).toBe("8.00");
    expect((await refundsOf(second, setup, paid.id)).total).toBe(1);

    await stopService(second.child, "SIGTERM");
    expect(await second.exited, second.output()).toEqual({ code: 0, signal: null });
    const final = await store.read(async (database) => ({
      ...(await transfersOut(database, setup)),
      refunded: await refundedAmountOf(database, paid.id),
    }));
    expect(final.rows).toEqual([
      expect.objectContaining({
        id: refundId,
        status: "completed",
        tx_hash: bundleHash,
        user_op_hash: userOpHash,
      }),
    ]);
    expect(final.refunded).toBe("8000000");
    expect(final.events.map((e) => e.event_type)).toEqual(["refund.completed"]);
    expect(final.events[0]?.payload).toMatchObject({ id: refundId, txHash: bundleHash, userOpHash });
    // Nothing left the EOA for it.
    expect(final.sent).toEqual([]);
    console.info(
      `[refunds-crash] smart wallet refund: killed after ${((killedAt - started) / 1000).toFixed(1)} s, completed ${((finishedAt - killedAt) / 1000).toFixed(1)} s after the kill (restart included)`,
    );
  }, 300_000);
});
