import { sql } from "kysely";
import { type Address, parseEther, parseUnits } from "viem";
import { describe, expect, it } from "vitest";
import { rpc } from "../../src/devnet/chain.ts";
import { createWorkers } from "../../src/workers.ts";
import { createWorkspace, startTestApp } from "../support/app.ts";
import { liveSmartWalletEnv } from "../support/devnet-env.ts";
import {
  aa,
  api,
  balanceOf,
  carveByHand,
  chainLegs,
  clients,
  createPayment,
  devnet,
  type Expected,
  expectLegTransaction,
  expectRecorded,
  type Json,
  pay,
  payBoth,
  randomAddress,
  registerWebhook,
  t,
  threeSplits,
  useSplitsLive,
  waitForStatus,
} from "../support/splits-live.ts";

// Live splits settled from the workspace EOA; from the smart wallet and the snapshot taken at
// creation: live-smart-wallet.test.ts; the devnet harness and helpers: support/splits-live.ts.

useSplitsLive();

describe("a live payment with three splits, settled from the workspace EOA", () => {
  it("pays each leg as its own transaction: exact balances, the settlement and its webhooks field by field", async () => {
    const ws = await createWorkspace(t);
    const secret = await registerWebhook(ws);
    const configured = await threeSplits(ws);
    const { payments, forwarded, receiving, treasury, treasuryBefore } = await payBoth(ws, "eoa", configured);
    expect(receiving).toEqual([ws.eoaAddress, ws.eoaAddress]);

    // By hand, for the USDC payment: 123.456789 USDC = 123,456,789 units.
    const usdc = payments[0] as Expected;
    expect(usdc.carved).toEqual({
      gross: 123_456_789n,
      fee: 1_851_852n, // 1,851,851.835 half up
      net: 121_604_937n,
      splits: [60_802_468n, 30_401_234n, 12_160n], // floors of …68.5, …34.25, 12,160.4937
      merchant: 30_389_075n,
    });

    for (const e of payments) {
      const { token, carved } = e;
      // Exact balances: the merchant, each destination (fresh addresses), the treasury's delta.
      expect(await balanceOf(token, e.merchantWallet)).toBe(carved.merchant);
      for (const [i, split] of configured.entries())
        expect(await balanceOf(token, split.destination)).toBe(carved.splits[i]);
      expect((await balanceOf(token, treasury)) - treasuryBefore[token]).toBe(carved.fee);
    }
    // The wallet kept none of the USDC it received.
    expect(await balanceOf("USDC", ws.eoaAddress)).toBe(0n);

    for (const [p, e] of payments.entries()) {
      // One transaction per leg, recorded before broadcast, each mined: five distinct ones in nonce order.
      const legs = await chainLegs(e.paymentId);
      const byPurpose = new Map(legs.map((leg) => [leg.purpose, leg]));
      expect(legs.map((leg) => leg.purpose)).toEqual([
        "settlement_net",
        "settlement_fee",
        ...configured.map((split) => `split:${split.id}`),
      ]);
      expect(legs.every((leg) => leg.status === "mined")).toBe(true);
      expect(new Set(legs.map((leg) => leg.tx_hash)).size).toBe(5);
      const nonces = legs.map((leg) => Number(leg.nonce));
      expect(nonces).toEqual(nonces.map((_, i) => (nonces[0] ?? 0) + i));

      const net = byPurpose.get("settlement_net")?.tx_hash as string;
      const fee = byPurpose.get("settlement_fee")?.tx_hash as string;
      const splitTx = configured.map((split) => byPurpose.get(`split:${split.id}`)?.tx_hash ?? null);
      expect(forwarded[p]?.settlementTxHashes).toEqual({ net, fee });
      // Each leg on chain: from the EOA, to its recipient, its exact amount, nothing else.
      await expectLegTransaction(e.token, net, ws.eoaAddress, e.merchantWallet, e.carved.merchant);
      await expectLegTransaction(e.token, fee, ws.eoaAddress, treasury, e.carved.fee);
      for (const [i, split] of configured.entries())
        await expectLegTransaction(
          e.token,
          splitTx[i] as string,
          ws.eoaAddress,
          split.destination,
          e.carved.splits[i] as bigint,
        );

      const settlement = await expectRecorded(ws, e, { merchant: net, splits: splitTx }, secret);
      expect(new Set([settlement.txRef, ...settlement.splits.map((s) => s.txRef)]).size).toBe(4);
    }
    const all = await api(ws, "GET", "/api/v1/settlements");
    expect(all.json().total).toBe(2);
  }, 240_000);

  it("a split of 0 (1 bps of a tiny net) is reported sent with no transaction, and nothing is sent for it", async () => {
    const ws = await createWorkspace(t);
    const secret = await registerWebhook(ws);
    const configured = await threeSplits(ws);
    const merchant = randomAddress();
    const created = await createPayment(ws, {
      tokenSymbol: "USDC",
      amount: "0.01",
      merchantWallet: merchant,
    });
    const carved = carveByHand(10_000n, [5000, 2500, 1]);
    // fee (1,500,000 + 5,000) / 10,000 = 150; net 9,850; 4,925 + 2,462 + 0; merchant 2,463.
    expect(carved).toEqual({
      gross: 10_000n,
      fee: 150n,
      net: 9_850n,
      splits: [4_925n, 2_462n, 0n],
      merchant: 2_463n,
    });
    const treasuryBefore = await balanceOf("USDC", devnet.accounts.treasury.address);
    await pay("USDC", created.receivingAddress, carved.gross);
    await waitForStatus(ws, created.payment.id, "forwarded");

    expect(await balanceOf("USDC", merchant)).toBe(2_463n);
    expect(await balanceOf("USDC", configured[0]?.destination as string)).toBe(4_925n);
    expect(await balanceOf("USDC", configured[1]?.destination as string)).toBe(2_462n);
    expect(await balanceOf("USDC", configured[2]?.destination as string)).toBe(0n);
    expect((await balanceOf("USDC", devnet.accounts.treasury.address)) - treasuryBefore).toBe(150n);
    const legs = await chainLegs(created.payment.id);
    expect(legs.map((leg) => leg.purpose)).toEqual([
      "settlement_net",
      "settlement_fee",
      `split:${configured[0]?.id}`,
      `split:${configured[1]?.id}`,
    ]);
    const tx = new Map(legs.map((leg) => [leg.purpose, leg.tx_hash]));
    const settlement = await expectRecorded(
      ws,
      {
        token: "USDC",
        paymentId: created.payment.id,
        merchantWallet: created.payment.merchantWallet,
        carved,
        configured,
      },
      {
        merchant: tx.get("settlement_net") ?? null,
        splits: [
          tx.get(`split:${configured[0]?.id}`) ?? null,
          tx.get(`split:${configured[1]?.id}`) ?? null,
          null,
        ],
      },
      secret,
    );
    expect(settlement.splits[2]).toMatchObject({ amount: "0.00", status: "sent", txRef: null });
  }, 120_000);
});

describe("an ETH payment received on the EOA while another payment of that EOA settles", () => {
  it("is settled in full: the other settlement's gas is not taken from it", async () => {
    // An app of its own (its own database and chain job) whose gas top-up job leaves wallets
    // alone (threshold 0): the EOA holds no ETH of its own, and gets gas on demand only, when a
    // settlement finds it short (as a wallet whose own ETH ran below a settlement's gas does).
    const own = await startTestApp(liveSmartWalletEnv(devnet, aa, { LIVE_GAS_TOPUP_THRESHOLD_WEI: "0" }));
    const ownWorkers = createWorkers(own.app, { dispatcher: { pollIntervalMs: 50 } });
    ownWorkers.start();
    try {
      const ws = await createWorkspace(own);
      const configured = await threeSplits(ws, own);
      const [usdcMerchant, ethMerchant] = [randomAddress(), randomAddress()];
      const usdcPayment = await createPayment(
        ws,
        { tokenSymbol: "USDC", amount: "40", merchantWallet: usdcMerchant },
        own,
      );
      const ethPayment = await createPayment(
        ws,
        { tokenSymbol: "ETH", amount: "0.5", merchantWallet: ethMerchant },
        own,
      );
      const treasury = devnet.accounts.treasury.address;
      const treasuryBefore = await balanceOf("ETH", treasury);
      expect(await balanceOf("ETH", ws.eoaAddress)).toBe(0n);
      // USDC paid in block N, ETH in N+1: at N+1 the USDC payment has its 2 confirmations and
      // settles (5 legs, gas paid by the EOA) while the ETH payment (1 confirmation) waits in the
      // same wallet. No more blocks until the USDC settlement acted: it either records its legs
      // (paying their gas from the ETH payment's money: the bug this guards against) or, since
      // that ETH is not its to spend, asks for a gas top-up first. The same order on every run.
      await rpc(devnet.rpcUrl, "evm_setAutomine", [false]);
      await rpc(devnet.rpcUrl, "evm_setIntervalMining", [0]);
      try {
        await clients.sendUsdc(ws.eoaAddress, parseUnits("40", 6));
        await rpc(devnet.rpcUrl, "evm_mine", []);
        await clients.payer.sendTransaction({ to: ws.eoaAddress as Address, value: parseEther("0.5") });
        await rpc(devnet.rpcUrl, "evm_mine", []);
        const deadline = Date.now() + 60_000;
        const topUpRecorded = async () =>
          (
            await own.database.db
              .selectFrom("chain_transactions")
              .select("tx_hash")
              .where("purpose", "=", "gas_topup")
              .where(sql<string>`lower(to_address)`, "=", ws.eoaAddress.toLowerCase())
              .execute()
          ).length > 0;
        while ((await chainLegs(usdcPayment.payment.id, own)).length < 5 && !(await topUpRecorded())) {
          if (Date.now() > deadline)
            throw new Error("the USDC settlement neither recorded its legs nor a top-up");
          await new Promise((r) => setTimeout(r, 50));
        }
      } finally {
        await rpc(devnet.rpcUrl, "evm_setAutomine", [true]);
        await rpc(devnet.rpcUrl, "evm_setIntervalMining", [1000]);
      }
      await waitForStatus(ws, usdcPayment.payment.id, "forwarded", 90_000, own);
      const deadline = Date.now() + 90_000;
      let eth: Json;
      for (;;) {
        const res = await api(ws, "GET", `/api/v1/payments/${ethPayment.payment.id}`, undefined, own);
        eth = res.json().payment as Json;
        if (eth.status === "forwarded" || eth.status === "failed") break;
        if (Date.now() > deadline) throw new Error(`the ETH payment stayed ${String(eth.status)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const topUps = await own.database.db
        .selectFrom("chain_transactions")
        .select(["amount", "status"])
        .where("purpose", "=", "gas_topup")
        .where("to_address", "=", ws.eoaAddress)
        .execute();
      expect(
        { status: eth.status, failureReason: eth.failureReason },
        `EOA ETH now ${await balanceOf("ETH", ws.eoaAddress)} wei; gas top-ups ${JSON.stringify(topUps)}`,
      ).toEqual({ status: "forwarded", failureReason: null });
      const carved = carveByHand(parseEther("0.5"), [5000, 2500, 1]);
      expect(await balanceOf("ETH", ethMerchant)).toBe(carved.merchant);
      for (const [i, split] of configured.entries())
        expect(await balanceOf("ETH", split.destination)).toBe(carved.splits[i]);
      expect((await balanceOf("ETH", treasury)) - treasuryBefore).toBe(carved.fee);
    } finally {
      await ownWorkers.stop();
      await own.close();
    }
  }, 180_000);
});
