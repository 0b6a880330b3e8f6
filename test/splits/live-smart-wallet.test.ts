import { type Address, decodeEventLog, type Hex, parseUnits } from "viem";
import { entryPoint08Abi } from "viem/account-abstraction";
import { describe, expect, it } from "vitest";
import { bearer, createWorkspace } from "../support/app.ts";
import {
  aa,
  api,
  balanceOf,
  bundler,
  type Configured,
  carveByHand,
  chain,
  chainLegs,
  createPayment,
  devnet,
  expectRecorded,
  type Json,
  outboxOf,
  pay,
  payBoth,
  putSplits,
  randomAddress,
  registerWebhook,
  same,
  settlementOf,
  TX_HASH,
  t,
  threeSplits,
  usdcTransfers,
  useSplitsLive,
  waitForStatus,
} from "../support/splits-live.ts";

// Live splits settled from the smart wallet, and the snapshot taken at creation; from the EOA:
// live-eoa.test.ts; the devnet harness and helpers: support/splits-live.ts.

useSplitsLive();

describe("a live payment with three splits, settled from the smart wallet", () => {
  it("pays every leg in ONE sponsored user operation: exact balances, one transaction, the settlement and its webhooks", async () => {
    const ws = await createWorkspace(t);
    const secret = await registerWebhook(ws);
    const wallet = await api(ws, "POST", `/api/v1/workspaces/${ws.id}/smart-wallet`);
    expect([200, 201], wallet.body).toContain(wallet.statusCode);
    const smart = wallet.json().smartWallet.address as Address;
    const configured = await threeSplits(ws);
    const { payments, forwarded, receiving, treasury, treasuryBefore } = await payBoth(
      ws,
      "smart_wallet",
      configured,
    );
    expect(receiving).toEqual([smart, smart]);

    for (const e of payments) {
      const { token, carved } = e;
      expect(await balanceOf(token, e.merchantWallet)).toBe(carved.merchant);
      for (const [i, split] of configured.entries())
        expect(await balanceOf(token, split.destination)).toBe(carved.splits[i]);
      expect((await balanceOf(token, treasury)) - treasuryBefore[token]).toBe(carved.fee);
      // Sponsored: the smart wallet keeps nothing of either payment, ETH included (no gas paid).
      expect(await balanceOf(token, smart)).toBe(0n);
    }
    // Nothing left the EOA: no transaction of its own, nothing recorded for these payments.
    expect(await chain.getTransactionCount({ address: ws.eoaAddress as Address })).toBe(0);

    const bundles = new Set<string>();
    for (const [p, e] of payments.entries()) {
      expect(await chainLegs(e.paymentId)).toEqual([]);
      const row = await t.database.db
        .selectFrom("payments")
        .select(["settlement_user_op_hash"])
        .where("id", "=", e.paymentId)
        .executeTakeFirstOrThrow();
      const userOpHash = row.settlement_user_op_hash as Hex;
      expect(userOpHash).toMatch(TX_HASH);
      const op = await bundler.getUserOperationReceipt({ hash: userOpHash });
      expect(op.success).toBe(true);
      expect(same(op.sender, smart)).toBe(true);
      expect(same(op.paymaster, aa.paymaster)).toBe(true);
      const txHash = op.receipt.transactionHash;

      // Every leg's txRef is that one transaction, which carried exactly one operation (this one).
      expect(forwarded[p]?.settlementTxHashes).toEqual({ net: txHash, fee: txHash });
      const receipt = await chain.getTransactionReceipt({ hash: txHash });
      expect(receipt.status).toBe("success");
      expect(same(receipt.to, aa.entryPoint)).toBe(true);
      const operations = receipt.logs
        .filter((log) => same(log.address, aa.entryPoint))
        .map((log) => {
          try {
            return decodeEventLog({ abi: entryPoint08Abi, data: log.data, topics: log.topics });
          } catch {
            return undefined;
          }
        })
        .filter((event) => event?.eventName === "UserOperationEvent");
      expect(operations).toHaveLength(1);
      expect(operations[0]?.args).toMatchObject({ userOpHash, success: true });
      bundles.add(txHash);

      if (e.token === "USDC") {
        // The five transfers, all in that transaction, from the smart wallet.
        const expected: Array<[string, string, bigint]> = [
          [smart.toLowerCase(), e.merchantWallet.toLowerCase(), e.carved.merchant],
          [smart.toLowerCase(), treasury.toLowerCase(), e.carved.fee],
          ...configured.map((split, i): [string, string, bigint] => [
            smart.toLowerCase(),
            split.destination,
            e.carved.splits[i] as bigint,
          ]),
        ];
        const byRecipient = (a: [string, string, bigint], b: [string, string, bigint]) =>
          a[1].localeCompare(b[1]);
        expect(usdcTransfers(receipt.logs).sort(byRecipient)).toEqual(expected.sort(byRecipient));
      }

      const settlement = await expectRecorded(
        ws,
        e,
        { merchant: txHash, splits: configured.map(() => txHash) },
        secret,
      );
      expect(new Set([settlement.txRef, ...settlement.splits.map((s) => s.txRef)])).toEqual(
        new Set([txHash]),
      );
    }
    // One operation per payment: two payments, two bundles.
    expect(bundles.size).toBe(2);
  }, 300_000);

  it("splits taking the whole net leave the merchant 0.00 with no leg (txRef null); the others in one operation", async () => {
    const ws = await createWorkspace(t);
    const secret = await registerWebhook(ws);
    const wallet = await api(ws, "POST", `/api/v1/workspaces/${ws.id}/smart-wallet`);
    expect([200, 201], wallet.body).toContain(wallet.statusCode);
    const smart = wallet.json().smartWallet.address as Address;
    const configured = await putSplits(ws, true, [
      { label: "seller", percentBps: 6000, destination: randomAddress() },
      { label: "platform", percentBps: 4000, destination: randomAddress() },
    ]);
    const merchant = randomAddress();
    const created = await createPayment(ws, {
      tokenSymbol: "USDC",
      amount: "10",
      merchantWallet: merchant,
      walletType: "smart_wallet",
    });
    const carved = carveByHand(10_000_000n, [6000, 4000]);
    expect(carved).toEqual({
      gross: 10_000_000n,
      fee: 150_000n,
      net: 9_850_000n,
      splits: [5_910_000n, 3_940_000n],
      merchant: 0n,
    });
    const treasury = devnet.accounts.treasury.address;
    const treasuryBefore = await balanceOf("USDC", treasury);
    await pay("USDC", smart, carved.gross);
    const forwarded = await waitForStatus(ws, created.payment.id, "forwarded");

    const row = await t.database.db
      .selectFrom("payments")
      .select("settlement_user_op_hash")
      .where("id", "=", created.payment.id)
      .executeTakeFirstOrThrow();
    const op = await bundler.getUserOperationReceipt({ hash: row.settlement_user_op_hash as Hex });
    expect(op.success).toBe(true);
    const txHash = op.receipt.transactionHash;
    expect(forwarded.settlementTxHashes).toEqual({ net: null, fee: txHash });
    expect(await balanceOf("USDC", merchant)).toBe(0n);
    expect(await balanceOf("USDC", configured[0]?.destination as string)).toBe(5_910_000n);
    expect(await balanceOf("USDC", configured[1]?.destination as string)).toBe(3_940_000n);
    expect((await balanceOf("USDC", treasury)) - treasuryBefore).toBe(150_000n);
    expect(await balanceOf("USDC", smart)).toBe(0n);
    const receipt = await chain.getTransactionReceipt({ hash: txHash });
    expect(usdcTransfers(receipt.logs).map(([, to, value]) => [to, value])).toEqual(
      expect.arrayContaining([
        [treasury.toLowerCase(), 150_000n],
        [configured[0]?.destination, 5_910_000n],
        [configured[1]?.destination, 3_940_000n],
      ]),
    );
    expect(usdcTransfers(receipt.logs)).toHaveLength(3);
    const settlement = await expectRecorded(
      ws,
      {
        token: "USDC",
        paymentId: created.payment.id,
        merchantWallet: created.payment.merchantWallet,
        carved,
        configured,
      },
      { merchant: null, splits: [txHash, txHash] },
      secret,
    );
    expect(settlement).toMatchObject({ merchantAmount: "0.00", txRef: null });
  }, 180_000);
});

describe("the snapshot taken at creation", () => {
  it("a payment created before a PUT settles with its own splits; one created after with the new ones; splits off: none", async () => {
    const ws = await createWorkspace(t);
    const secret = await registerWebhook(ws);
    const before = await threeSplits(ws);
    const merchants = [randomAddress(), randomAddress(), randomAddress()];
    const first = await createPayment(ws, {
      tokenSymbol: "USDC",
      amount: "10",
      merchantWallet: merchants[0],
    });

    // Changed: "seller" kept (same id) with another share and destination, "affiliate" dropped,
    // "tax" disabled, "partner" new.
    const [newSeller, partner] = [randomAddress(), randomAddress()];
    const after = await putSplits(ws, true, [
      { label: "seller", percentBps: 1000, destination: newSeller },
      { label: "tax", percentBps: 1, destination: before[2]?.destination, enabled: false },
      { label: "partner", percentBps: 3333, destination: partner },
    ]);
    expect(after[0]?.id).toBe(before[0]?.id);
    expect(after[1]?.id).toBe(before[2]?.id);
    expect(after[2]?.id).not.toBe(before[1]?.id);
    const second = await createPayment(ws, {
      tokenSymbol: "USDC",
      amount: "20",
      merchantWallet: merchants[1],
    });

    // Splits switched off: a third payment keeps no splits.
    await putSplits(ws, false, [{ label: "seller", percentBps: 1000, destination: newSeller }]);
    const third = await createPayment(ws, {
      tokenSymbol: "USDC",
      amount: "30",
      merchantWallet: merchants[2],
    });
    // Splits on, every split disabled: a fourth payment keeps an empty snapshot (events, no split).
    await putSplits(ws, true, [
      { label: "seller", percentBps: 1000, destination: newSeller, enabled: false },
    ]);
    const fourthMerchant = randomAddress();
    const fourth = await createPayment(ws, {
      tokenSymbol: "USDC",
      amount: "40",
      merchantWallet: fourthMerchant,
    });

    const snapshots = await t.database.db
      .selectFrom("payments")
      .select(["id", "split_snapshot"])
      .where("workspace_id", "=", ws.id)
      .execute();
    const snapshotOf = new Map(snapshots.map((row) => [row.id, row.split_snapshot]));
    expect(snapshotOf.get(first.payment.id)?.map((s) => s.splitId)).toEqual(before.map((s) => s.id));
    expect(snapshotOf.get(second.payment.id)?.map((s) => s.splitId)).toEqual([after[0]?.id, after[2]?.id]);
    expect(snapshotOf.get(third.payment.id)).toBeNull();
    expect(snapshotOf.get(fourth.payment.id)).toEqual([]);

    const treasuryBefore = await balanceOf("USDC", devnet.accounts.treasury.address);
    for (const [created, amount] of [
      [first, "10"],
      [second, "20"],
      [third, "30"],
      [fourth, "40"],
    ] as const)
      await pay("USDC", created.receivingAddress, parseUnits(amount, 6));
    for (const created of [first, second, third, fourth])
      await waitForStatus(ws, created.payment.id, "forwarded");

    const c1 = carveByHand(parseUnits("10", 6), [5000, 2500, 1]);
    const c2 = carveByHand(parseUnits("20", 6), [1000, 3333]);
    const c3 = carveByHand(parseUnits("30", 6), []);
    const c4 = carveByHand(parseUnits("40", 6), []);
    expect(c2).toEqual({
      gross: 20_000_000n,
      fee: 300_000n,
      net: 19_700_000n,
      splits: [1_970_000n, 6_566_010n], // 19,700,000 × 3333 / 10,000 = 6,566,010 exactly
      merchant: 11_163_990n,
    });
    expect(await balanceOf("USDC", merchants[0] as string)).toBe(c1.merchant);
    expect(await balanceOf("USDC", merchants[1] as string)).toBe(c2.merchant);
    expect(await balanceOf("USDC", merchants[2] as string)).toBe(c3.net);
    expect(await balanceOf("USDC", fourthMerchant)).toBe(c4.net);
    // The first payment's splits went to the old destinations, at the old shares; the disabled
    // "tax" got only the first payment's part; the new ones only the second's.
    expect(await balanceOf("USDC", before[0]?.destination as string)).toBe(c1.splits[0]);
    expect(await balanceOf("USDC", before[1]?.destination as string)).toBe(c1.splits[1]);
    expect(await balanceOf("USDC", before[2]?.destination as string)).toBe(c1.splits[2]);
    expect(await balanceOf("USDC", newSeller)).toBe(c2.splits[0]);
    expect(await balanceOf("USDC", partner)).toBe(c2.splits[1]);
    expect((await balanceOf("USDC", devnet.accounts.treasury.address)) - treasuryBefore).toBe(
      c1.fee + c2.fee + c3.fee + c4.fee,
    );

    const txOf = async (paymentId: string) =>
      new Map((await chainLegs(paymentId)).map((leg) => [leg.purpose, leg.tx_hash]));
    const tx1 = await txOf(first.payment.id);
    await expectRecorded(
      ws,
      {
        token: "USDC",
        paymentId: first.payment.id,
        merchantWallet: first.payment.merchantWallet,
        carved: c1,
        configured: before,
      },
      {
        merchant: tx1.get("settlement_net") ?? null,
        splits: before.map((s) => tx1.get(`split:${s.id}`) ?? null),
      },
      secret,
    );
    const tx2 = await txOf(second.payment.id);
    const secondSplits = [after[0], after[2]] as Configured[];
    await expectRecorded(
      ws,
      {
        token: "USDC",
        paymentId: second.payment.id,
        merchantWallet: second.payment.merchantWallet,
        carved: c2,
        configured: secondSplits,
      },
      {
        merchant: tx2.get("settlement_net") ?? null,
        splits: secondSplits.map((s) => tx2.get(`split:${s.id}`) ?? null),
      },
      secret,
    );
    expect([...tx2.keys()].sort()).toEqual(
      ["settlement_fee", "settlement_net", ...secondSplits.map((s) => `split:${s.id}`)].sort(),
    );

    // Splits off: the settlement is recorded (no split), with no settlement.recorded event.
    const tx3 = await txOf(third.payment.id);
    expect([...tx3.keys()].sort()).toEqual(["settlement_fee", "settlement_net"]);
    const plain = await settlementOf(ws, third.payment.id);
    expect(plain).toMatchObject({
      paymentIds: [third.payment.id],
      grossAmount: "30.00",
      feeAmount: "0.45",
      netAmount: "29.55",
      merchantAmount: "29.55",
      txRef: tx3.get("settlement_net"),
      splits: [],
    });
    const events = await outboxOf(ws);
    expect(events.filter((ev) => (ev.payload as Json).settlementId === plain.settlementId)).toEqual([]);

    // Splits on with none enabled: settlement.recorded with no split, no split.recorded.
    const tx4 = await txOf(fourth.payment.id);
    expect([...tx4.keys()].sort()).toEqual(["settlement_fee", "settlement_net"]);
    await expectRecorded(
      ws,
      {
        token: "USDC",
        paymentId: fourth.payment.id,
        merchantWallet: fourth.payment.merchantWallet,
        carved: c4,
        configured: [],
      },
      { merchant: tx4.get("settlement_net") ?? null, splits: [] },
      secret,
    );

    expect(events.filter((ev) => ev.event_type === "split.recorded")).toHaveLength(3 + 2);
    const recorded = (await outboxOf(ws)).filter((ev) => ev.event_type === "settlement.recorded");
    expect(recorded).toHaveLength(3);
    expect((await api(ws, "GET", "/api/v1/settlements")).json().total).toBe(4);

    // Another workspace's key, and this workspace's sandbox key, see none of them.
    const other = await createWorkspace(t);
    const foreign = await api(other, "GET", `/api/v1/settlements/${plain.settlementId}`);
    expect(foreign.statusCode).toBe(404);
    expect(foreign.json()).toMatchObject({ error: "Settlement not found" });
    expect((await api(other, "GET", `/api/v1/settlements?paymentId=${third.payment.id}`)).json()).toEqual({
      settlements: [],
      total: 0,
    });
    const sandbox = await t.request({
      method: "GET",
      url: `/api/v1/settlements/${plain.settlementId}`,
      headers: bearer(ws.testKey),
    });
    expect(sandbox.statusCode).toBe(404);
  }, 240_000);
});
