import { type Address, type Hex, parseUnits } from "viem";
import { describe, expect, it } from "vitest";
import { rpc } from "../../src/devnet/chain.ts";
import { createWorkers, type Workers } from "../../src/workers.ts";
import { bearer, createWorkspace, startTestApp } from "../support/app.ts";
import { startRpcProxy } from "../support/rpc-proxy.ts";
import {
  ACCOUNT_ABI,
  ADDRESS,
  aa,
  chain,
  createSmartWallet,
  devnet,
  env,
  ethBalance,
  expectCarriedUserOperation,
  extraApps,
  FACTORY_ABI,
  fund,
  paymasterDeposit,
  randomAddress,
  same,
  sendUsdc,
  smartWalletOf,
  smartWalletPayment,
  startWorkers,
  TX_HASH,
  t,
  usdcBalance,
  useSmartWalletsLive,
  waitForStatus,
} from "../support/smart-wallets-live.ts";

// The live smart wallet: its address, payments received on it. Payouts from it: live-payouts.test.ts;
// the devnet harness and helpers: support/smart-wallets-live.ts.

useSmartWalletsLive();

describe("live smart wallet address", () => {
  it("is the factory's counterfactual SimpleAccount address of the EOA, stable across calls", async () => {
    const ws = await createWorkspace(t);
    const first = await createSmartWallet(ws);
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({
      success: true,
      workspaceId: ws.id,
      smartWallet: { address: expect.stringMatching(ADDRESS), ownerAddress: ws.eoaAddress },
      defaultWalletType: "workspace",
    });
    const address = first.body.smartWallet.address as Address;
    const expected = await chain.readContract({
      address: aa.accountFactory,
      abi: FACTORY_ABI,
      functionName: "getAddress",
      args: [ws.eoaAddress as Address, 0n],
    });
    expect(same(address, expected)).toBe(true);
    // Counterfactual: nothing deployed yet, nothing held.
    expect(await chain.getCode({ address })).toBeUndefined();
    expect(await ethBalance(address)).toBe(0n);

    const second = await createSmartWallet(ws);
    expect(second.body.smartWallet).toEqual(first.body.smartWallet);
    const viaTest = await t.request({
      method: "GET",
      url: `/api/v1/workspaces/${ws.id}/smart-wallet`,
      headers: bearer(ws.testKey),
    });
    expect(viaTest.json().smartWallet).toMatchObject({ address, walletId: first.body.smartWallet.walletId });
  });

  it("is the same after a restart of the app on the same database", async () => {
    const ws = await createWorkspace(t);
    const before = await createSmartWallet(ws);
    const restarted = await startTestApp(env, { database: t.database });
    extraApps.push(restarted);
    const get = await restarted.request({
      method: "GET",
      url: `/api/v1/workspaces/${ws.id}/smart-wallet`,
      headers: bearer(ws.liveKey),
    });
    expect(get.statusCode, get.body).toBe(200);
    expect(get.json().smartWallet).toMatchObject({
      address: before.body.smartWallet.address,
      walletId: before.body.smartWallet.walletId,
    });
    const again = await createSmartWallet(ws, restarted);
    expect(again.body.smartWallet).toEqual(before.body.smartWallet);
    const rows = await t.database.db
      .selectFrom("workspace_wallets")
      .select("id")
      .where("workspace_id", "=", ws.id)
      .where("kind", "=", "smart_wallet")
      .execute();
    expect(rows).toHaveLength(1);
  });

  it("a workspace created on the restarted app gets the factory address too, and the first app sees it", async () => {
    const restarted = await startTestApp(env, { database: t.database });
    extraApps.push(restarted);
    const ws = await createWorkspace(restarted);
    const created = await createSmartWallet(ws, restarted);
    const expected = await chain.readContract({
      address: aa.accountFactory,
      abi: FACTORY_ABI,
      functionName: "getAddress",
      args: [ws.eoaAddress as Address, 0n],
    });
    expect(same(created.body.smartWallet.address, expected)).toBe(true);
    const onFirst = await createSmartWallet(ws);
    expect(onFirst.body.smartWallet).toEqual(created.body.smartWallet);
  });
});

describe("a live USDC payment received on the smart wallet", () => {
  it("is forwarded by one sponsored user operation: exact merchant and treasury balances, no ETH used", async () => {
    const ws = await createWorkspace(t);
    const smart = await smartWalletOf(ws);
    const merchant = randomAddress();
    const treasury = devnet.accounts.treasury.address;
    const treasuryBefore = await usdcBalance(treasury);
    const depositBefore = await paymasterDeposit();

    const created = await smartWalletPayment(ws, "100", merchant);
    expect(created.receivingAddress).toBe(smart);
    expect(created.payment.status).toBe("pending");

    startWorkers();
    await fund(smart, { USDC: "100" });
    const forwarded = await waitForStatus(ws.liveKey, created.payment.id, "forwarded");

    expect(await usdcBalance(merchant)).toBe(parseUnits("98.5", 6));
    expect((await usdcBalance(treasury)) - treasuryBefore).toBe(parseUnits("1.5", 6));
    expect(await usdcBalance(smart)).toBe(0n);
    // Gas was sponsored: the smart wallet never held or spent ETH; the paymaster paid.
    expect(await ethBalance(smart)).toBe(0n);
    expect(await paymasterDeposit()).toBeLessThan(depositBefore);
    // The first operation deployed the account, owned by the workspace EOA.
    expect((await chain.getCode({ address: smart }))?.length ?? 0).toBeGreaterThan(2);
    const owner = await chain.readContract({ address: smart, abi: ACCOUNT_ABI, functionName: "owner" });
    expect(same(owner, ws.eoaAddress)).toBe(true);

    // One user operation carried both transfers: net and fee share one transaction.
    const hashes = forwarded.settlementTxHashes as { net: string; fee: string };
    expect(hashes.net).toMatch(TX_HASH);
    expect(hashes.fee).toBe(hashes.net);
    const receipt = await expectCarriedUserOperation(hashes.net, undefined, smart);
    const usdcTransfers = receipt.logs.filter((log) => same(log.address, devnet.tokens.USDC));
    expect(usdcTransfers).toHaveLength(2);
    // Nothing was sent from the EOA for this settlement.
    expect(await chain.getTransactionCount({ address: ws.eoaAddress as Address })).toBe(0);

    const events = await t.database.db
      .selectFrom("outbox_events")
      .select("event_type")
      .where("workspace_id", "=", ws.id)
      .where("environment", "=", "live")
      .where("event_type", "like", "payment.%")
      .orderBy("id")
      .execute();
    expect(events.map((e) => e.event_type)).toEqual([
      "payment.created",
      "payment.detected",
      "payment.confirmed",
      "payment.forwarded",
    ]);
  }, 60_000); // beyond waitForStatus's own 30 s, so that a payment stuck says at which status

  it("whose recorded operation an instance could not send is sent by the next one and forwarded with its transaction", async () => {
    // The first instance's bundler connection drops every send: its settlement records the
    // operation, then cannot tell whether the bundler has it, so the payment stays confirmed.
    const proxy = await startRpcProxy(aa.bundlerUrl, async ({ method }) =>
      method.includes("sendUserOperation") ? "drop" : undefined,
    );
    const first = await startTestApp({ ...env, LIVE_BUNDLER_URL: proxy.url }, { database: t.database });
    let firstWorkers: Workers | undefined;
    try {
      const ws = await createWorkspace(first);
      const smart = await smartWalletOf(ws, first);
      const merchant = randomAddress();
      const id = (await smartWalletPayment(ws, "20", merchant, first)).payment.id as string;
      firstWorkers = createWorkers(first.app, { dispatcher: { pollIntervalMs: 50 } });
      firstWorkers.start();
      await fund(smart, { USDC: "20" });
      // The operation recorded for its settlement, on its settlement transfer (migration 030).
      const recorded = async () =>
        (
          await t.database.db
            .selectFrom("payouts")
            .select("user_op_hash")
            .where("payment_id", "=", id)
            .where("kind", "=", "settlement")
            .executeTakeFirst()
        )?.user_op_hash;
      const deadline = Date.now() + 30_000;
      while (!(await recorded()) || !proxy.methods.some((m) => m.includes("sendUserOperation"))) {
        if (Date.now() > deadline) throw new Error("the first instance recorded no settlement operation");
        await new Promise((r) => setTimeout(r, 100));
      }
      await firstWorkers.stop();
      firstWorkers = undefined;
      expect((await waitForStatus(ws.liveKey, id, "confirmed")).settlementTxHashes).toBeNull();

      // The next instance sends the same recorded operation again, never a new one.
      startWorkers();
      const forwarded = await waitForStatus(ws.liveKey, id, "forwarded", 60_000);
      expect(await usdcBalance(merchant)).toBe(parseUnits("19.7", 6));
      const hashes = forwarded.settlementTxHashes as { net: string; fee: string };
      expect(hashes.net).toMatch(TX_HASH);
      expect(hashes.fee).toBe(hashes.net);
      await expectCarriedUserOperation(hashes.net, (await recorded()) ?? undefined, smart);
    } finally {
      await firstWorkers?.stop();
      await first.close(true);
      await proxy.close();
    }
  }, 120_000);

  it("waits out a bundler that does not answer while preparing it, instead of failing the payment", async () => {
    let down = true; // every bundler call loses its connection until the bundler is back
    const proxy = await startRpcProxy(aa.bundlerUrl, async () => (down ? "drop" : undefined));
    const app = await startTestApp({ ...env, LIVE_BUNDLER_URL: proxy.url }, { database: t.database });
    extraApps.push(app);
    try {
      const ws = await createWorkspace(app);
      const smart = await smartWalletOf(ws, app);
      const merchant = randomAddress();
      const id = (await smartWalletPayment(ws, "20", merchant, app)).payment.id as string;
      startWorkers(app);
      await fund(smart, { USDC: "20" });
      await waitForStatus(ws.liveKey, id, "confirmed");
      // One preparation is three tries (the transport's retries); a fourth is the next tick's.
      const estimates = () => proxy.methods.filter((m) => m === "eth_estimateUserOperationGas").length;
      const deadline = Date.now() + 30_000;
      while (estimates() < 4) {
        if (Date.now() > deadline) throw new Error("the settlement did not ask the bundler again");
        await new Promise((r) => setTimeout(r, 100));
      }
      expect((await waitForStatus(ws.liveKey, id, "confirmed")).failureReason).toBeNull();
      down = false;
      const forwarded = await waitForStatus(ws.liveKey, id, "forwarded", 60_000);
      expect(await usdcBalance(merchant)).toBe(parseUnits("19.7", 6));
      const hashes = forwarded.settlementTxHashes as { net: string; fee: string };
      expect(hashes.fee).toBe(hashes.net);
    } finally {
      await proxy.close();
    }
  }, 120_000);

  it("with the default set to smart_wallet, a payment without walletType is received and settled there", async () => {
    const ws = await createWorkspace(t);
    const created = await createSmartWallet(ws, t, { setDefault: true });
    expect(created.body.defaultWalletType).toBe("smart_wallet");
    const smart = created.body.smartWallet.address as Address;
    const merchant = randomAddress();
    const res = await t.request({
      method: "POST",
      url: "/api/v1/payments",
      headers: bearer(ws.liveKey),
      payload: { tokenSymbol: "USDC", amount: "20", merchantWallet: merchant },
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().receivingAddress).toBe(smart);
    startWorkers();
    await fund(smart, { USDC: "20" });
    const forwarded = await waitForStatus(ws.liveKey, res.json().payment.id, "forwarded");
    expect(await usdcBalance(merchant)).toBe(parseUnits("19.7", 6));
    expect(await ethBalance(smart)).toBe(0n);
    const hashes = forwarded.settlementTxHashes as { net: string; fee: string };
    expect(hashes.fee).toBe(hashes.net);
  });
});

describe("payments of a new smart wallet paid in one block", () => {
  it("are all forwarded: one operation deploys the account, the others follow it (none fails AA10)", async () => {
    const ws = await createWorkspace(t);
    const smart = await smartWalletOf(ws);
    const merchant = randomAddress();
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push((await smartWalletPayment(ws, "10", merchant)).payment.id);
    // All four transfers in one block: confirmed in one tick, settled together while the account
    // is not deployed yet.
    await rpc(devnet.rpcUrl, "evm_setAutomine", [false]);
    await rpc(devnet.rpcUrl, "evm_setIntervalMining", [0]);
    const hashes: Hex[] = [];
    try {
      for (let i = 0; i < 4; i++) hashes.push(await sendUsdc(smart, parseUnits("10", 6)));
      await rpc(devnet.rpcUrl, "evm_mine", []);
    } finally {
      await rpc(devnet.rpcUrl, "evm_setAutomine", [true]);
      await rpc(devnet.rpcUrl, "evm_setIntervalMining", [1000]);
    }
    const receipts = await Promise.all(hashes.map((hash) => chain.getTransactionReceipt({ hash })));
    expect(new Set(receipts.map((r) => r.blockNumber)).size).toBe(1);

    startWorkers();
    for (const id of ids) await waitForStatus(ws.liveKey, id, "forwarded");
    expect(await usdcBalance(merchant)).toBe(4n * parseUnits("9.85", 6));
    expect(await usdcBalance(smart)).toBe(0n);
  });
});
