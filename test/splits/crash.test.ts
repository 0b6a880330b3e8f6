import { type Address, type Hex, parseUnits } from "viem";
import { describe, expect, it } from "vitest";
import {
  api,
  bundlerLog,
  pendingWhere,
  restoreMining,
  rpc,
  startServer,
  stopMining,
} from "../support/crash-harness.ts";
import { creditToken } from "../support/devnet-credit.ts";
import { untilDefined } from "../support/poll.ts";
import { stopService } from "../support/service-process.ts";
import {
  aa,
  BPS,
  carveByHand,
  chain,
  createPayment,
  credit,
  devnet,
  EXTRA_USDC,
  eventsOf,
  expectEventsOnce,
  expectOneSettlement,
  expectPaidOnce,
  holdingProxy,
  legsOf,
  newStore,
  paymentRow,
  payUsdc,
  payWithoutFurtherBlocks,
  same,
  TX_HASH,
  usdcBalance,
  useSplitsCrashDevnet,
  waitForForwarded,
  workspaceWithSplits,
} from "../support/splits-crash.ts";

// Crash safety of a settlement with splits (D15) with the real process (`node src/main.ts`),
// killed -9 at the worst moments and restarted on the same data: every leg (the merchant's part,
// the fee, each split) is recorded before it is broadcast and unique per (payment, leg), so each
// destination is paid exactly once and the payment is forwarded with one settlement.
//  - EOA, between legs: the node gets the first leg (mined), the process is killed while the second
//    one's broadcast is held by an RPC proxy: the other legs are recorded, never broadcast.
//  - EOA, every leg broadcast and none mined (no blocks): killed, then blocks again.
//  - Smart wallet: the one user operation carrying every leg is in a bundle that is not mined.
// Each receiving wallet holds money of its own besides the payment, so a leg sent twice would be
// paid (and show in the exact balances) rather than revert for want of funds.
// One process at a time on the embedded database (PGlite in DATA_DIR, read only while no process
// has it open): the dialect does not matter here, so the PostgreSQL pass leaves this file out
// (vitest.config.ts); two instances on PostgreSQL are two-instances.test.ts.

useSplitsCrashDevnet();

describe("an EOA settlement with splits, the process killed -9", () => {
  it("between legs (the first mined, the others recorded, never broadcast): each destination is paid exactly once after a restart", async () => {
    const started = performance.now();
    const store = await newStore();
    const proxy = await holdingProxy(2);
    const first = await startServer(store, { LIVE_RPC_URL: proxy.url });
    const setup = await workspaceWithSplits(first);
    // Gas and money of its own.
    await credit(setup.eoa, { USDC: EXTRA_USDC, ETH: "1" });
    const payment = await createPayment(first, setup, "123.456789");
    const carved = carveByHand(payment.gross, BPS);
    const treasuryBefore = await usdcBalance(devnet.accounts.treasury.address);

    proxy.arm(setup.eoa);
    await payUsdc(payment.receivingAddress, payment.gross);
    await proxy.whenHeld(first);
    // The second leg's broadcast is on its way to the node: kill now.
    await stopService(first.child, "SIGKILL");
    expect(await first.exited).toEqual({ code: null, signal: "SIGKILL" });
    proxy.drop();
    const killedAt = performance.now();

    // On chain: only the first leg (the merchant's part) was paid.
    expect(await usdcBalance(payment.merchant)).toBe(carved.merchant);
    for (const split of setup.splits) expect(await usdcBalance(split.destination)).toBe(0n);
    expect(await usdcBalance(devnet.accounts.treasury.address)).toBe(treasuryBefore);
    expect(await chain.getTransactionCount({ address: setup.eoa })).toBe(1);

    // In the database: every leg recorded, none with an outcome yet; the payment still confirmed.
    const left = await store.read(async (database) => ({
      legs: await legsOf(database, payment.id),
      payment: await paymentRow(database, payment.id),
    }));
    expect(left.payment).toMatchObject({ status: "confirmed", settlement_id: null });
    expect(left.legs.map((leg) => [leg.purpose, leg.status])).toEqual([
      ["settlement_net", "signed"],
      ["settlement_fee", "signed"],
      ...setup.splits.map((split) => [`split:${split.id}`, "signed"]),
    ]);
    const recorded = new Map(left.legs.map((leg) => [leg.purpose, leg.tx_hash]));
    // The node has the first leg only.
    for (const [i, leg] of left.legs.entries()) {
      const known = await rpc("eth_getTransactionByHash", [leg.tx_hash]);
      expect(known === null, leg.purpose).toBe(i > 0);
    }

    const second = await startServer(store);
    const forwarded = await waitForForwarded(second, setup, payment.id);
    const finishedAt = performance.now();
    expect(forwarded.settlementTxHashes).toEqual({
      net: recorded.get("settlement_net"),
      fee: recorded.get("settlement_fee"),
    });
    await expectPaidOnce(setup, [payment], treasuryBefore);
    expect(await usdcBalance(setup.eoa)).toBe(parseUnits(EXTRA_USDC, 6));
    // Five legs, five nonces: the recorded transactions were broadcast again, no new one signed.
    expect(await chain.getTransactionCount({ address: setup.eoa })).toBe(5);
    await expectOneSettlement(second, setup, payment.id, {
      merchant: recorded.get("settlement_net") as string,
      splits: setup.splits.map((split) => recorded.get(`split:${split.id}`) as string),
    });

    await stopService(second.child, "SIGTERM");
    expect(await second.exited, second.output()).toEqual({ code: 0, signal: null });
    const final = await store.read(async (database) => ({
      legs: await legsOf(database, payment.id),
      events: await eventsOf(database, setup.workspaceId),
    }));
    expect(final.legs.map((leg) => [leg.purpose, leg.status, leg.tx_hash])).toEqual(
      left.legs.map((leg) => [leg.purpose, "mined", leg.tx_hash]),
    );
    expectEventsOnce(final.events, 1);
    console.info(
      `[splits-crash] EOA between legs: killed after ${((killedAt - started) / 1000).toFixed(1)} s, forwarded ${((finishedAt - killedAt) / 1000).toFixed(1)} s after the kill (restart included)`,
    );
  }, 300_000);

  it("with every leg broadcast and none mined: after blocks resume and a restart, each destination is paid exactly once", async () => {
    const started = performance.now();
    const store = await newStore();
    const first = await startServer(store);
    const setup = await workspaceWithSplits(first);
    await credit(setup.eoa, { USDC: EXTRA_USDC, ETH: "1" });
    const payment = await createPayment(first, setup, "77.777777");
    const treasuryBefore = await usdcBalance(devnet.accounts.treasury.address);

    await stopMining();
    await payWithoutFurtherBlocks(payment.receivingAddress, payment.gross);
    const pending = await untilDefined(
      "the five legs in the node's pool",
      async () => {
        if (first.child.exitCode !== null) throw new Error(`the service exited\n${first.output()}`);
        const txs = await pendingWhere((tx) => same(tx.from, setup.eoa));
        return txs.length === 5 ? txs : undefined;
      },
      120_000,
    );
    await stopService(first.child, "SIGKILL");
    expect(await first.exited).toEqual({ code: null, signal: "SIGKILL" });
    const killedAt = performance.now();
    expect(await usdcBalance(payment.merchant)).toBe(0n);
    for (const split of setup.splits) expect(await usdcBalance(split.destination)).toBe(0n);

    const left = await store.read(async (database) => ({
      legs: await legsOf(database, payment.id),
      payment: await paymentRow(database, payment.id),
    }));
    expect(left.payment).toMatchObject({ status: "confirmed", settlement_id: null });
    expect(left.legs.map((leg) => leg.status)).toEqual(["signed", "signed", "signed", "signed", "signed"]);
    expect(new Set(left.legs.map((leg) => leg.tx_hash))).toEqual(new Set(pending.map((tx) => tx.hash)));

    // Blocks again (they are mined while the process is down), then the restart.
    await restoreMining();
    const second = await startServer(store);
    await waitForForwarded(second, setup, payment.id);
    const finishedAt = performance.now();
    await expectPaidOnce(setup, [payment], treasuryBefore);
    expect(await usdcBalance(setup.eoa)).toBe(parseUnits(EXTRA_USDC, 6));
    expect(await chain.getTransactionCount({ address: setup.eoa })).toBe(5);
    const recorded = new Map(left.legs.map((leg) => [leg.purpose, leg.tx_hash]));
    await expectOneSettlement(second, setup, payment.id, {
      merchant: recorded.get("settlement_net") as string,
      splits: setup.splits.map((split) => recorded.get(`split:${split.id}`) as string),
    });

    await stopService(second.child, "SIGTERM");
    expect(await second.exited, second.output()).toEqual({ code: 0, signal: null });
    const final = await store.read(async (database) => ({
      legs: await legsOf(database, payment.id),
      events: await eventsOf(database, setup.workspaceId),
    }));
    expect(final.legs.map((leg) => [leg.purpose, leg.status, leg.tx_hash])).toEqual(
      left.legs.map((leg) => [leg.purpose, "mined", leg.tx_hash]),
    );
    expectEventsOnce(final.events, 1);
    console.info(
      `[splits-crash] EOA legs pending: killed after ${((killedAt - started) / 1000).toFixed(1)} s, forwarded ${((finishedAt - killedAt) / 1000).toFixed(1)} s after the kill (restart included)`,
    );
  }, 300_000);
});

describe("a smart wallet settlement with splits, the process killed -9", () => {
  it("with its one operation in a bundle not mined yet: forwarded once after a restart, one operation for every leg", async () => {
    const started = performance.now();
    const store = await newStore();
    const first = await startServer(store);
    const setup = await workspaceWithSplits(first);
    const wallet = await api(
      first,
      "POST",
      `/api/v1/workspaces/${setup.workspaceId}/smart-wallet`,
      setup.liveKey,
    );
    expect([200, 201], JSON.stringify(wallet.json)).toContain(wallet.status);
    const smart = (wallet.json.smartWallet as { address: Address }).address;
    await creditToken(devnet, "USDC", smart, EXTRA_USDC);
    const payment = await createPayment(first, setup, "55.555555", "smart_wallet");
    expect(payment.receivingAddress).toBe(smart);
    const treasuryBefore = await usdcBalance(devnet.accounts.treasury.address);

    await stopMining();
    await payWithoutFurtherBlocks(smart, payment.gross);
    const pending = await untilDefined(
      "the settlement's bundle in the node's pool",
      async () => {
        if (first.child.exitCode !== null) throw new Error(`the service exited\n${first.output()}`);
        const txs = await pendingWhere((tx) => same(tx.to, aa.entryPoint));
        return txs.length > 0 ? txs : undefined;
      },
      120_000,
    );
    expect(pending, `bundler: ${bundlerLog}`).toHaveLength(1);
    const bundleHash = pending[0]?.hash as Hex;
    await stopService(first.child, "SIGKILL");
    expect(await first.exited).toEqual({ code: null, signal: "SIGKILL" });
    const killedAt = performance.now();
    expect(await usdcBalance(smart)).toBe(payment.gross + parseUnits(EXTRA_USDC, 6));

    const left = await store.read((database) => paymentRow(database, payment.id));
    expect(left).toMatchObject({
      status: "confirmed",
      settlement_id: null,
      settlement_user_op_hash: expect.stringMatching(TX_HASH),
    });

    await restoreMining();
    const second = await startServer(store);
    const forwarded = await waitForForwarded(second, setup, payment.id);
    const finishedAt = performance.now();
    // The bundle pending at the crash is the one transaction that carried every leg.
    expect(forwarded.settlementTxHashes).toEqual({ net: bundleHash, fee: bundleHash });
    await expectPaidOnce(setup, [payment], treasuryBefore);
    expect(await usdcBalance(smart)).toBe(parseUnits(EXTRA_USDC, 6));
    await expectOneSettlement(second, setup, payment.id, {
      merchant: bundleHash,
      splits: setup.splits.map(() => bundleHash),
    });

    await stopService(second.child, "SIGTERM");
    expect(await second.exited, second.output()).toEqual({ code: 0, signal: null });
    const final = await store.read(async (database) => ({
      payment: await paymentRow(database, payment.id),
      legs: await legsOf(database, payment.id),
      events: await eventsOf(database, setup.workspaceId),
    }));
    // The operation recorded before the crash is the one that was included; no EOA transaction.
    expect(final.payment).toMatchObject({
      status: "forwarded",
      settlement_user_op_hash: left.settlement_user_op_hash,
      settlement_net_tx_hash: bundleHash,
    });
    expect(final.legs).toEqual([]);
    expect(await chain.getTransactionCount({ address: setup.eoa })).toBe(0);
    expectEventsOnce(final.events, 1);
    console.info(
      `[splits-crash] smart wallet bundle pending: killed after ${((killedAt - started) / 1000).toFixed(1)} s, forwarded ${((finishedAt - killedAt) / 1000).toFixed(1)} s after the kill (restart included)`,
    );
  }, 300_000);
});
