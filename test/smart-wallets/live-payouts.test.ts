import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { type Address, parseEther, parseUnits } from "viem";
import { generatePrivateKey } from "viem/accounts";
import { afterAll, describe, expect, it, vi } from "vitest";
import { operationOf } from "../../src/chain/evm/bundler-rpc.ts";
import { SmartAccounts } from "../../src/chain/evm/smart-accounts.ts";
import { freePort, rpc } from "../../src/devnet/chain.ts";
import { bearer, createWorkspace, startTestApp } from "../support/app.ts";
import { creditToken } from "../support/devnet-credit.ts";
import { LIVE_DEFAULT } from "../support/devnet-env.ts";
import { startRpcProxy } from "../support/rpc-proxy.ts";
import {
  aa,
  bundler,
  bundlerProxy,
  chain,
  createSmartWallet,
  credit,
  devnet,
  env,
  ethBalance,
  expectCarriedUserOperation,
  extraApps,
  fundedSmartWallet,
  outbox,
  type ProxyAnswer,
  paymasterDeposit,
  payout,
  payoutState,
  randomAddress,
  smartWalletOf,
  TX_HASH,
  t,
  usdcBalance,
  useSmartWalletsLive,
} from "../support/smart-wallets-live.ts";

// Live payouts from the smart wallet (sponsored gas, concurrency, instant bundling); its address and
// payments: live.test.ts; the devnet harness and helpers: support/smart-wallets-live.ts.

useSmartWalletsLive();

describe("live payouts from the smart wallet (gas sponsored)", () => {
  it("sends USDC with no ETH in the smart wallet: 200 with txHash and userOpHash, exact balances", async () => {
    const ws = await createWorkspace(t);
    const smart = await smartWalletOf(ws);
    await creditToken(devnet, "USDC", smart, "100");
    expect(await ethBalance(smart)).toBe(0n);
    expect(await ethBalance(ws.eoaAddress)).toBe(0n);
    const destination = randomAddress();
    const depositBefore = await paymasterDeposit();

    const res = await payout(ws, {
      tokenSymbol: "USDC",
      amount: "12.5",
      destinationAddress: destination,
      walletType: "smart_wallet",
      description: "smart payout",
      metadata: { ref: "SW-1" },
    });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.payout).toMatchObject({
      txHash: expect.stringMatching(TX_HASH),
      userOpHash: expect.stringMatching(TX_HASH),
      amount: "12.50",
      tokenSymbol: "USDC",
      destinationAddress: destination,
      fromAddress: smart,
      environment: "live",
      status: "completed",
      description: "smart payout",
      metadata: { ref: "SW-1" },
    });
    expect(body.payout.userOpHash).not.toBe(body.payout.txHash);
    await expectCarriedUserOperation(body.payout.txHash, body.payout.userOpHash, smart);

    expect(await usdcBalance(destination)).toBe(parseUnits("12.5", 6));
    expect(await usdcBalance(smart)).toBe(parseUnits("87.5", 6));
    expect(await ethBalance(smart)).toBe(0n);
    expect(await ethBalance(ws.eoaAddress)).toBe(0n); // the EOA paid nothing either
    expect(await paymasterDeposit()).toBeLessThan(depositBefore);

    const completed = await outbox(ws, "payout.completed");
    expect(completed).toHaveLength(1);
    expect(completed[0]?.payload).toMatchObject({
      txHash: body.payout.txHash,
      userOpHash: body.payout.userOpHash,
      fromAddress: smart,
      amount: "12.50",
      status: "completed",
    });
    const balance = await t.request({
      method: "GET",
      url: "/api/v1/wallet/balance",
      headers: bearer(ws.liveKey),
    });
    expect(balance.json()).toMatchObject({
      environment: "live",
      smartWallet: { address: smart, balances: { USDC: "87.50", ETH: "0.00" } },
    });
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });
  });

  it("sends ETH: the destination gets exactly the amount and the smart wallet loses exactly it", async () => {
    const ws = await createWorkspace(t);
    const smart = await smartWalletOf(ws);
    await credit(smart, { ETH: "0.5" });
    const destination = randomAddress();
    const res = await payout(ws, {
      tokenSymbol: "ETH",
      amount: "0.2",
      destinationAddress: destination,
      walletType: "smart_wallet",
    });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.payout).toMatchObject({
      txHash: expect.stringMatching(TX_HASH),
      userOpHash: expect.stringMatching(TX_HASH),
      amount: "0.20",
      tokenSymbol: "ETH",
      fromAddress: smart,
      status: "completed",
    });
    await expectCarriedUserOperation(body.payout.txHash, body.payout.userOpHash, smart);
    expect(await ethBalance(destination)).toBe(parseEther("0.2"));
    expect(await ethBalance(smart)).toBe(parseEther("0.3")); // no gas taken from it
  });

  it("two payouts in a row (deployed account, next nonce) both succeed", async () => {
    const ws = await createWorkspace(t);
    const smart = await smartWalletOf(ws);
    await creditToken(devnet, "USDC", smart, "10");
    const destination = randomAddress();
    const hashes: string[] = [];
    for (const amount of ["1", "2"]) {
      const res = await payout(ws, {
        tokenSymbol: "USDC",
        amount,
        destinationAddress: destination,
        walletType: "smart_wallet",
      });
      expect(res.statusCode, res.body).toBe(200);
      hashes.push(res.json().payout.userOpHash);
    }
    expect(new Set(hashes).size).toBe(2);
    expect(await usdcBalance(destination)).toBe(parseUnits("3", 6));
    expect(await usdcBalance(smart)).toBe(parseUnits("7", 6));
    expect(await ethBalance(smart)).toBe(0n);
  });

  it("an operation like the last one reuses its gas limits; one the bundler refuses is estimated and sent again, once", async () => {
    // In front of the real bundler: a proxy that lists the methods called and can answer one
    // eth_sendUserOperation with a JSON-RPC error, as a bundler refusing the operation would.
    let refuseNextSend = false;
    const proxy = await bundlerProxy(async (method) => {
      if (method !== "eth_sendUserOperation" || !refuseNextSend) return undefined;
      refuseNextSend = false;
      return { error: { code: -32602, message: "preVerificationGas is not enough, required: 2, got: 1" } };
    });
    const methods = proxy.methods;
    try {
      const app = await startTestApp({ ...env, LIVE_BUNDLER_URL: proxy.url }, { database: t.database });
      extraApps.push(app);
      const { ws, smart, smartPayout } = await fundedSmartWallet(app, "20");
      const destination = randomAddress();
      const send = async (amount: string) => {
        methods.length = 0;
        const res = await smartPayout(amount, destination);
        expect(res.statusCode, res.body).toBe(200);
        const sent = methods.filter(
          (m) => m === "eth_estimateUserOperationGas" || m === "eth_sendUserOperation",
        );
        return { payout: res.json().payout, sent };
      };
      const ESTIMATE = "eth_estimateUserOperationGas";
      const SEND = "eth_sendUserOperation";

      // The first deploys the account; the second is the first estimate of a deployed account.
      expect((await send("1")).sent).toEqual([ESTIMATE, SEND]);
      expect((await send("1")).sent).toEqual([ESTIMATE, SEND]);
      // Known limits, the call's gas measured on the node: no estimate by the bundler.
      expect((await send("1")).sent).toEqual([SEND]);
      // Refused with known limits: estimated by the bundler, recorded and sent again.
      refuseNextSend = true;
      const retried = await send("2");
      expect(retried.sent).toEqual([SEND, ESTIMATE, SEND]);
      await expectCarriedUserOperation(retried.payout.txHash, retried.payout.userOpHash, smart);
      const row = await t.database.db
        .selectFrom("payouts")
        .select(["status", "user_op_hash", "tx_hash"])
        .where("workspace_id", "=", ws.id)
        .where("amount", "=", "2000000")
        .executeTakeFirstOrThrow();
      expect(row).toEqual({
        status: "completed",
        user_op_hash: retried.payout.userOpHash,
        tx_hash: retried.payout.txHash,
      });
      // The refused limits gave way to the bundler's new estimate, which the next one reuses.
      expect((await send("1")).sent).toEqual([SEND]);
      expect((await send("1")).sent).toEqual([SEND]);

      // Money moved once per payout, none of it for gas.
      expect(await usdcBalance(destination)).toBe(parseUnits("7", 6));
      expect(await usdcBalance(smart)).toBe(parseUnits("13", 6));
      expect(await ethBalance(smart)).toBe(0n);
      expect(await payoutState(ws, app)).toMatchObject({ status: "active", failStreak: 0 });
    } finally {
      await proxy.close();
    }
  });

  it("a send the bundler got but never answered: 202 pending, not a failure; the reconciler completes it once", async () => {
    // A proxy passes eth_sendUserOperation to the real bundler, then drops the connection before
    // the answer (every time, viem's retries included). No blocks meanwhile: the bundle waits in
    // the node's pool, so when the send gives up the operation has no receipt, yet it will be
    // included. Failing the payout then (and letting the merchant retry) could pay twice.
    let dropSends = true;
    const proxy = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", async () => {
        const body = Buffer.concat(chunks).toString("utf8");
        const answer = await fetch(aa.bundlerUrl, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
        });
        const text = await answer.text();
        if ((JSON.parse(body) as { method: string }).method === "eth_sendUserOperation" && dropSends) {
          req.socket.destroy();
          return;
        }
        res.setHeader("content-type", "application/json");
        res.end(text);
      });
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    try {
      const app = await startTestApp(
        { ...env, LIVE_BUNDLER_URL: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}` },
        { database: t.database },
      );
      extraApps.push(app);
      const { ws, smart, smartPayout } = await fundedSmartWallet(app, "10");
      const destination = randomAddress();
      await rpc(devnet.rpcUrl, "evm_setAutomine", [false]);
      await rpc(devnet.rpcUrl, "evm_setIntervalMining", [0]);
      let res: Awaited<ReturnType<typeof payout>>;
      try {
        res = await smartPayout("4", destination);
      } finally {
        dropSends = false;
        await rpc(devnet.rpcUrl, "evm_setAutomine", [true]);
        await rpc(devnet.rpcUrl, "evm_setIntervalMining", [1000]);
      }
      expect(res.statusCode, res.body).toBe(202);
      const pending = res.json().payout;
      expect(pending).toMatchObject({
        status: "processing",
        txHash: null,
        userOpHash: expect.stringMatching(TX_HASH),
      });
      expect(await payoutState(ws, app)).toMatchObject({ status: "active", failStreak: 0 });

      // Blocks again: the bundle is mined. The reconciler sends the recorded operation again (the
      // bundler refuses a duplicate; no evidence of failure) and finishes the payout from its receipt.
      const included = await bundler.waitForUserOperationReceipt({
        hash: pending.userOpHash,
        timeout: 30_000,
      });
      expect(included.success).toBe(true);
      expect(await app.app.services.transfers.reconcile(LIVE_DEFAULT)).toBe(1);
      const row = await t.database.db
        .selectFrom("payouts")
        .select(["status", "user_op_hash", "tx_hash"])
        .where("workspace_id", "=", ws.id)
        .executeTakeFirstOrThrow();
      expect(row).toEqual({
        status: "completed",
        user_op_hash: pending.userOpHash,
        tx_hash: included.receipt.transactionHash,
      });
      expect(await usdcBalance(destination)).toBe(parseUnits("4", 6));
      expect(await usdcBalance(smart)).toBe(parseUnits("6", 6));
      expect(await payoutState(ws, app)).toMatchObject({ status: "active", failStreak: 0 });
      expect(await outbox(ws, "payout.failed")).toEqual([]);
      expect(await outbox(ws, "payout.completed")).toHaveLength(1);
    } finally {
      await new Promise((resolve) => proxy.close(resolve));
    }
  });

  /**
   * A workspace with a smart wallet holding `usdc`, on an app whose bundler is a proxy that, while
   * `losing.sends` is true, drops the connection of every eth_sendUserOperation without passing it
   * on: the bundler never holds the operation (as when a bundler restarts with its mempool lost).
   */
  async function walletBehindLosingBundler(usdc: string) {
    const losing = { sends: true };
    const proxy = await bundlerProxy(async (method) =>
      method === "eth_sendUserOperation" && losing.sends ? "lose" : undefined,
    );
    const app = await startTestApp({ ...env, LIVE_BUNDLER_URL: proxy.url }, { database: t.database });
    extraApps.push(app);
    return { losing, proxy, app, ...(await fundedSmartWallet(app, usdc)) };
  }

  it("an operation the bundler lost: 202; its money is kept from the next payouts; the reconciler sends it again, paid once", async () => {
    const { losing, proxy, app, ws, smart, smartPayout } = await walletBehindLosingBundler("11");
    try {
      const [firstTo, lostTo, laterTo] = [randomAddress(), randomAddress(), randomAddress()];
      // The account is deployed by a first payout. (Operations prepared while it is not both carry
      // its deployment, and only the first of them included can be: see docs/api.md.)
      losing.sends = false;
      expect((await smartPayout("1", firstTo)).statusCode).toBe(200);
      losing.sends = true;

      const lost = await smartPayout("4", lostTo);
      expect(lost.statusCode, lost.body).toBe(202);
      expect(lost.json().payout).toMatchObject({
        status: "processing",
        userOpHash: expect.stringMatching(TX_HASH),
      });
      losing.sends = false;
      expect(
        await bundler.getUserOperation({ hash: lost.json().payout.userOpHash }).catch(() => null),
      ).toBeNull();

      // Its 4 USDC may still leave: 6 are available, not 10.
      const tooMuch = await smartPayout("7", laterTo);
      expect(tooMuch.statusCode, tooMuch.body).toBe(400);
      expect(tooMuch.json()).toMatchObject({ error: "Insufficient balance", available: "6.00" });
      const later = await smartPayout("5", laterTo);
      expect(later.statusCode, later.body).toBe(200);
      expect(await usdcBalance(laterTo)).toBe(parseUnits("5", 6));

      // The reconciler sends the lost operation again, and it is included.
      await app.app.services.transfers.reconcile(LIVE_DEFAULT);
      const rows = await t.database.db
        .selectFrom("payouts")
        .select(["destination_address", "status", "tx_hash"])
        .where("workspace_id", "=", ws.id)
        .orderBy("created_at")
        .execute();
      expect(rows.map((row) => [row.destination_address, row.status])).toEqual([
        [firstTo, "completed"],
        [lostTo, "completed"],
        [laterTo, "completed"],
      ]);
      await expectCarriedUserOperation(rows[1]?.tx_hash ?? "", lost.json().payout.userOpHash, smart);
      expect(await usdcBalance(lostTo)).toBe(parseUnits("4", 6));
      expect(await usdcBalance(smart)).toBe(parseUnits("1", 6));
      expect(await ethBalance(smart)).toBe(0n);
      expect(await outbox(ws, "payout.completed")).toHaveLength(3);
      expect(await outbox(ws, "payout.failed")).toEqual([]);
      expect(await payoutState(ws, app)).toMatchObject({ status: "active", failStreak: 0 });
      // Finished: a second pass changes nothing.
      await app.app.services.transfers.reconcile(LIVE_DEFAULT);
      expect(await outbox(ws, "payout.completed")).toHaveLength(3);
      expect(await usdcBalance(lostTo)).toBe(parseUnits("4", 6));
    } finally {
      await proxy.close();
    }
  });

  it("a lost operation that would deploy the wallet, after another one deployed it: failed by the reconciler, its money free again", async () => {
    // Both operations carry the wallet's deployment; the EntryPoint deploys an account once, so
    // the lost one can never be included once the later one is.
    const { losing, proxy, app, ws, smart, smartPayout } = await walletBehindLosingBundler("10");
    try {
      const [lostTo, laterTo] = [randomAddress(), randomAddress()];

      const lost = await smartPayout("4", lostTo);
      expect(lost.statusCode, lost.body).toBe(202);
      losing.sends = false;
      expect((await smartPayout("5", laterTo)).statusCode).toBe(200);
      expect(await chain.getCode({ address: smart })).toBeDefined();
      // Still kept for the lost one: 1 available.
      expect((await smartPayout("5", laterTo)).json()).toMatchObject({
        error: "Insufficient balance",
        available: "1.00",
      });

      await app.app.services.transfers.reconcile(LIVE_DEFAULT);
      const row = await t.database.db
        .selectFrom("payouts")
        .select(["status", "error", "tx_hash"])
        .where("workspace_id", "=", ws.id)
        .where("destination_address", "=", lostTo)
        .executeTakeFirstOrThrow();
      expect(row).toEqual({
        status: "failed",
        error: expect.stringMatching(/never included: it deploys the smart wallet/),
        tx_hash: null,
      });
      const failed = await outbox(ws, "payout.failed");
      expect(failed).toHaveLength(1);
      expect(failed[0]?.payload).toMatchObject({ destinationAddress: lostTo, failStreak: 1 });
      expect(await usdcBalance(lostTo)).toBe(0n);

      // Its 4 USDC are free again: the wallet's whole balance (5) can be paid out.
      const rest = await smartPayout("5", laterTo);
      expect(rest.statusCode, rest.body).toBe(200);
      expect(await usdcBalance(laterTo)).toBe(parseUnits("10", 6));
      expect(await usdcBalance(smart)).toBe(0n);
      expect(await ethBalance(smart)).toBe(0n);
    } finally {
      await proxy.close();
    }
  });

  it("the default wallet type smart_wallet makes a payout without walletType come from the smart wallet", async () => {
    const ws = await createWorkspace(t);
    const created = await createSmartWallet(ws, t, { setDefault: true });
    const smart = created.body.smartWallet.address as Address;
    await creditToken(devnet, "USDC", smart, "5");
    const destination = randomAddress();
    const res = await payout(ws, { tokenSymbol: "USDC", amount: "4", destinationAddress: destination });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().payout).toMatchObject({
      fromAddress: smart,
      userOpHash: expect.stringMatching(TX_HASH),
    });
    expect(await usdcBalance(destination)).toBe(parseUnits("4", 6));
    expect(await ethBalance(smart)).toBe(0n);
  });

  it("insufficient balance → 400 with the smart wallet's figures, no operation sent, breaker untouched", async () => {
    const ws = await createWorkspace(t);
    const smart = await smartWalletOf(ws);
    await creditToken(devnet, "USDC", smart, "3");
    const destination = randomAddress();
    const res = await payout(ws, {
      tokenSymbol: "USDC",
      amount: "10",
      destinationAddress: destination,
      walletType: "smart_wallet",
    });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({
      error: "Insufficient balance",
      available: "3.00",
      requested: "10.00",
      tokenSymbol: "USDC",
      network: "default",
    });
    expect(await usdcBalance(smart)).toBe(parseUnits("3", 6));
    expect(await usdcBalance(destination)).toBe(0n);
    expect(await chain.getCode({ address: smart })).toBeUndefined(); // no operation deployed it
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });
    expect(await outbox(ws, "payout.failed")).toEqual([]);
  });

  it("a bundler that is down → 500 PAYOUT_FAILED naming the bundler, counted by the breaker", async () => {
    const closedPort = await freePort();
    const down = await startTestApp(
      { ...env, LIVE_BUNDLER_URL: `http://127.0.0.1:${closedPort}` },
      {
        database: t.database,
      },
    );
    extraApps.push(down);
    const ws = await createWorkspace(down);
    const created = await createSmartWallet(ws, down);
    const smart = created.body.smartWallet.address as Address;
    await creditToken(devnet, "USDC", smart, "50");
    const destination = randomAddress();

    const res = await payout(
      ws,
      { tokenSymbol: "USDC", amount: "5", destinationAddress: destination, walletType: "smart_wallet" },
      down,
    );
    expect(res.statusCode, res.body).toBe(500);
    const body = res.json();
    expect(body).toMatchObject({
      error: "Payout failed",
      code: "PAYOUT_FAILED",
      detail: expect.stringMatching(/bundler/i),
      failStreak: 1,
      remainingBeforePause: 2,
      circuitBreaker: false,
    });
    expect(await usdcBalance(smart)).toBe(parseUnits("50", 6));
    expect(await usdcBalance(destination)).toBe(0n);
    expect(await payoutState(ws, down)).toMatchObject({ status: "active", failStreak: 1 });
    const failed = await outbox(ws, "payout.failed");
    expect(failed).toHaveLength(1);
    expect(failed[0]?.payload).toMatchObject({ failStreak: 1, fromAddress: smart });

    // The same workspace through the app whose bundler is up: the payout succeeds and resets the streak.
    const ok = await payout(ws, {
      tokenSymbol: "USDC",
      amount: "5",
      destinationAddress: destination,
      walletType: "smart_wallet",
    });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(await usdcBalance(destination)).toBe(parseUnits("5", 6));
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });
  });
});

describe("operations of one smart account at the same time", () => {
  it("prepared together and sent together, all are included: each has a nonce key of its own", async () => {
    // As a settlement and a payout of one smart wallet, or payouts from two instances: with one
    // shared nonce sequence both read the same nonce, and the bundler took only one of them.
    const network = t.config.networks.live[0];
    if (!network) throw new Error("no live network in the test config");
    const accounts = new SmartAccounts(network);
    const owner = generatePrivateKey();
    const smart = await accounts.address(owner);
    await creditToken(devnet, "USDC", smart, "11");
    const [first, second, third] = [randomAddress(), randomAddress(), randomAddress()];
    // The first operation deploys the account (two deploying at once could not both be included);
    // the second, the account's first as deployed, has its gas limits reused by the next ones.
    for (const amount of ["1", "1"]) {
      const sent = await accounts.send(
        await accounts.prepare(owner, [{ token: "USDC", to: first, amount: parseUnits(amount, 6) }]),
      );
      expect(sent.status).toBe("success");
    }

    // In one millisecond (viem's default nonce key is the time in milliseconds).
    const now = vi.spyOn(Date, "now").mockReturnValue(Date.now());
    const prepared = await Promise.all([
      accounts.prepare(owner, [{ token: "USDC", to: second, amount: parseUnits("2", 6) }]),
      accounts.prepare(owner, [{ token: "USDC", to: third, amount: parseUnits("3", 6) }]),
    ]).finally(() => now.mockRestore());
    const outcomes = await Promise.all(prepared.map((operation) => accounts.send(operation)));
    expect(prepared.map((operation) => operation.gasFrom)).toEqual(["known", "known"]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(["success", "success"]);
    for (const [index, outcome] of outcomes.entries()) {
      await expectCarriedUserOperation(
        outcome.status === "success" ? outcome.txHash : "",
        prepared[index]?.userOpHash,
        smart,
      );
    }
    expect(await usdcBalance(second)).toBe(parseUnits("2", 6));
    expect(await usdcBalance(third)).toBe(parseUnits("3", 6));
    expect(await usdcBalance(smart)).toBe(parseUnits("4", 6));
    expect(await ethBalance(smart)).toBe(0n);
  });
});

describe("preparing an operation", () => {
  it("prices it from the network's shared fee estimate, and reads no code once the account is known deployed", async () => {
    const network = t.config.networks.live[0];
    if (!network) throw new Error("no live network in the test config");
    // The service's node reads go through a proxy that lists them; the bundler reads the node itself.
    const node = await startRpcProxy(devnet.rpcUrl, async () => undefined);
    try {
      const quote = await chain.estimateFeesPerGas();
      let estimates = 0;
      const accounts = new SmartAccounts({ ...network, rpcUrl: node.url }, async () => {
        estimates += 1;
        return quote;
      });
      const owner = generatePrivateKey();
      const smart = await accounts.address(owner);
      await creditToken(devnet, "USDC", smart, "3");
      const destination = randomAddress();
      const sendOne = async () => {
        node.methods.length = 0;
        const prepared = await accounts.prepare(owner, [
          { token: "USDC", to: destination, amount: parseUnits("1", 6) },
        ]);
        const read = [...node.methods];
        expect(await accounts.send(prepared)).toMatchObject({ status: "success" });
        return { operation: operationOf(prepared.serialized), read };
      };
      // The first deploys the account; the second reads its code and finds it deployed; the third
      // knows it is.
      const [first, second, third] = [await sendOne(), await sendOne(), await sendOne()];
      expect(first.operation.factory).toBeDefined();
      expect(second.operation.factory).toBeUndefined();
      expect(third.operation.factory).toBeUndefined();
      expect(second.read).toContain("eth_getCode");
      expect(third.read).not.toContain("eth_getCode");
      // Each priced from the estimate (doubled for the bundler, as viem does), none read its own fees.
      expect(estimates).toBe(3);
      for (const { operation, read } of [first, second, third]) {
        expect(operation.maxFeePerGas).toBe(2n * quote.maxFeePerGas);
        expect(operation.maxPriorityFeePerGas).toBe(2n * quote.maxPriorityFeePerGas);
        expect(read).not.toContain("eth_maxPriorityFeePerGas");
        expect(read).not.toContain("eth_getBlockByNumber");
      }
      expect(await usdcBalance(destination)).toBe(parseUnits("3", 6));
    } finally {
      await node.close();
    }
  });
});

describe("live smart wallet payouts with instant bundling (pimlico_sendUserOperationNow)", () => {
  /**
   * An app whose bundler is a proxy in front of the devnet's Alto (which has the endpoint on),
   * with LIVE_BUNDLER_INSTANT_BUNDLING=true. `answer` may answer a method itself.
   */
  async function instantApp(answer?: ProxyAnswer) {
    const proxy = await bundlerProxy(answer);
    proxies.push(proxy);
    const app = await startTestApp(
      { ...env, LIVE_BUNDLER_URL: proxy.url, LIVE_BUNDLER_INSTANT_BUNDLING: "true" },
      { database: t.database },
    );
    extraApps.push(app);
    return { app, methods: proxy.methods };
  }
  const proxies: { close(): Promise<void> }[] = [];
  afterAll(async () => {
    await Promise.all(proxies.map((proxy) => proxy.close()));
  });

  /** Alto's own JSON-RPC request, for the proxy to pass an operation on as another method. */
  const altoRequest = (method: string, params: unknown[]) =>
    fetch(aa.bundlerUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    }).then((res) => res.json() as Promise<{ result?: unknown; error?: unknown }>);

  it("bundles the operation at once: one call answers with the receipt, no receipt polling, exact balances", async () => {
    const { app, methods } = await instantApp();
    const { ws, smart, smartPayout } = await fundedSmartWallet(app, "10");
    const destination = randomAddress();
    const depositBefore = await paymasterDeposit();

    for (const amount of ["1", "2"]) {
      methods.length = 0;
      const res = await smartPayout(amount, destination);
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json().payout;
      expect(body).toMatchObject({ status: "completed", fromAddress: smart });
      await expectCarriedUserOperation(body.txHash, body.userOpHash, smart);
      expect(methods).toContain("pimlico_sendUserOperationNow");
      expect(methods).not.toContain("eth_sendUserOperation");
      expect(methods).not.toContain("eth_getUserOperationReceipt");
    }
    expect(await usdcBalance(destination)).toBe(parseUnits("3", 6));
    expect(await usdcBalance(smart)).toBe(parseUnits("7", 6));
    expect(await ethBalance(smart)).toBe(0n);
    expect(await paymasterDeposit()).toBeLessThan(depositBefore);
    expect(await payoutState(ws, app)).toMatchObject({ status: "active", failStreak: 0 });
  });

  it("an error answer for an operation the bundler holds all the same: the payout completes, paid once", async () => {
    // The proxy hands the operation to Alto's mempool, then answers the instant call with an
    // error, as Alto does when a bundle could not be sent and its operations went back to the
    // mempool. The standard send of the same operation that follows is refused as a duplicate
    // (or finds it mined); failing the payout then could let a retry pay twice.
    const { app, methods } = await instantApp(async (method, params) => {
      if (method !== "pimlico_sendUserOperationNow") return undefined;
      const queued = await altoRequest("eth_sendUserOperation", params);
      expect(queued.error).toBeUndefined();
      return { error: { code: -32602, message: "unhandled error during bundle submission" } };
    });
    const { ws, smart, smartPayout } = await fundedSmartWallet(app, "10");
    const destination = randomAddress();

    const res = await smartPayout("4", destination);
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json().payout;
    expect(body.status).toBe("completed");
    await expectCarriedUserOperation(body.txHash, body.userOpHash, smart);
    expect(methods.filter((m) => m === "pimlico_sendUserOperationNow")).toHaveLength(1);
    expect(await usdcBalance(destination)).toBe(parseUnits("4", 6));
    expect(await usdcBalance(smart)).toBe(parseUnits("6", 6));
    expect(await payoutState(ws, app)).toMatchObject({ status: "active", failStreak: 0 });
    expect(await outbox(ws, "payout.failed")).toEqual([]);
  });

  it("an operation the bundler refuses and does not hold: 500 PAYOUT_FAILED with its reason, counted", async () => {
    const refusal = { code: -32500, message: "AA31 paymaster deposit too low" };
    const { app, methods } = await instantApp(async (method) =>
      method === "pimlico_sendUserOperationNow" || method === "eth_sendUserOperation"
        ? { error: refusal }
        : undefined,
    );
    const { ws, smart, smartPayout } = await fundedSmartWallet(app, "10");
    const destination = randomAddress();

    const res = await smartPayout("3", destination);
    expect(res.statusCode, res.body).toBe(500);
    expect(res.json()).toMatchObject({
      code: "PAYOUT_FAILED",
      detail: expect.stringContaining("AA31 paymaster deposit too low"),
      failStreak: 1,
    });
    // Asked whether it held the operation before the payout was failed.
    expect(methods).toContain("pimlico_getUserOperationStatus");
    expect(await usdcBalance(smart)).toBe(parseUnits("10", 6));
    expect(await usdcBalance(destination)).toBe(0n);
    expect(await payoutState(ws, app)).toMatchObject({ status: "active", failStreak: 1 });
    expect(await outbox(ws, "payout.failed")).toHaveLength(1);
  });
});
