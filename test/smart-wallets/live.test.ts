import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { type Address, type Hex, http, type PublicClient, parseAbi, parseEther, parseUnits } from "viem";
import { type BundlerClient, createBundlerClient } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { SmartAccounts } from "../../src/chain/evm/smart-accounts.ts";
import { type Devnet, freePort, mintToken, rpc, startDevnet } from "../../src/devnet/chain.ts";
import { createWorkers, type Workers } from "../../src/workers.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { type DevnetClients, devnetClients } from "../support/devnet-clients.ts";
import { liveSmartWalletEnv } from "../support/devnet-env.ts";
import { startRpcProxy } from "../support/rpc-proxy.ts";

// Smart wallets (ERC-4337) on a real local chain with EntryPoint v0.8, a SimpleAccountFactory, a
// sponsoring paymaster and an Alto bundler (interface 4.1, 4.10, 4.13, 4.18, 7; decisions D11, D13):
// the counterfactual address the service reports is the factory's, it receives a live payment
// that settles as ONE user operation, and payouts from it need no ETH for gas (txHash + userOpHash).

const TX_HASH = /^0x[0-9a-f]{64}$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const FACTORY_ABI = parseAbi(["function getAddress(address owner, uint256 salt) view returns (address)"]);
const ACCOUNT_ABI = parseAbi(["function owner() view returns (address)"]);
const PAYMASTER_ABI = parseAbi(["function getDeposit() view returns (uint256)"]);

type Json = Record<string, unknown>;

const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
const same = (a: string | null | undefined, b: string) => a?.toLowerCase() === b.toLowerCase();

let devnet: Devnet;
let aa: NonNullable<Devnet["aa"]>;
let env: Record<string, string>;
let t: TestApp;
let chain: PublicClient;
let bundler: BundlerClient;
let fund: DevnetClients["fund"];
let usdcBalance: DevnetClients["usdcBalance"];
let sendUsdc: DevnetClients["sendUsdc"];
let workers: Workers | undefined;
/** Apps started by one test, closed (keeping the shared database) after it. */
const extraApps: TestApp[] = [];

beforeAll(async () => {
  devnet = await startDevnet({ accountAbstraction: true });
  if (!devnet.aa) throw new Error("startDevnet({ accountAbstraction: true }) returned no aa");
  aa = devnet.aa;
  env = liveSmartWalletEnv(devnet, aa);
  t = await startTestApp(env);
  ({ chain, fund, usdcBalance, sendUsdc } = devnetClients(devnet));
  bundler = createBundlerClient({ client: chain, transport: http(aa.bundlerUrl), pollingInterval: 100 });
}, 120_000);

afterEach(async () => {
  await workers?.stop();
  workers = undefined;
  for (const app of extraApps.splice(0)) await app.close(true);
});

afterAll(async () => {
  await workers?.stop();
  await t?.close();
  await devnet?.stop();
});

function startWorkers(app: TestApp = t) {
  workers = createWorkers(app.app, { dispatcher: { pollIntervalMs: 50 } });
  workers.start();
  return workers;
}

// ---------------------------------------------------------------------------------------------
// Chain helpers

const ethBalance = (address: string) => chain.getBalance({ address: address as Address });
const paymasterDeposit = () =>
  chain.readContract({ address: aa.paymaster, abi: PAYMASTER_ABI, functionName: "getDeposit" });

/** The transaction carried exactly this user operation of this sender, and it succeeded. */
async function expectCarriedUserOperation(txHash: string, userOpHash: string | undefined, sender: string) {
  const receipt = await chain.getTransactionReceipt({ hash: txHash as Hex });
  expect(receipt.status).toBe("success");
  expect(same(receipt.to, aa.entryPoint)).toBe(true); // handleOps, sent by the bundler
  if (userOpHash) {
    const op = await bundler.getUserOperationReceipt({ hash: userOpHash as Hex });
    expect(op.success).toBe(true);
    expect(op.receipt.transactionHash).toBe(txHash);
    expect(same(op.sender, sender)).toBe(true);
    expect(same(op.paymaster, aa.paymaster)).toBe(true);
  }
  return receipt;
}

// ---------------------------------------------------------------------------------------------
// Service helpers

async function createSmartWallet(ws: CreatedWorkspace, app: TestApp = t, payload?: Json) {
  const res = await app.request({
    method: "POST",
    url: `/api/v1/workspaces/${ws.id}/smart-wallet`,
    headers: bearer(ws.liveKey),
    ...(payload ? { payload } : {}),
  });
  expect([200, 201], res.body).toContain(res.statusCode);
  return { status: res.statusCode, body: res.json() };
}

async function smartWalletOf(ws: CreatedWorkspace, app: TestApp = t): Promise<Address> {
  const created = await createSmartWallet(ws, app);
  return created.body.smartWallet.address as Address;
}

/** A live USDC payment of `amount` to be received on the workspace's smart wallet; its 201 body. */
async function smartWalletPayment(ws: CreatedWorkspace, amount: string, merchant: string, app: TestApp = t) {
  const res = await app.request({
    method: "POST",
    url: "/api/v1/payments",
    headers: bearer(ws.liveKey),
    payload: { tokenSymbol: "USDC", amount, merchantWallet: merchant, walletType: "smart_wallet" },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

const payout = (ws: CreatedWorkspace, body: Json, app: TestApp = t) =>
  app.request({ method: "POST", url: "/api/v1/payouts", headers: bearer(ws.liveKey), payload: body });

/** A new workspace on `app` whose smart wallet holds `usdc`, and a USDC payout from that smart wallet. */
async function fundedSmartWallet(app: TestApp, usdc: string) {
  const ws = await createWorkspace(app);
  const smart = (await createSmartWallet(ws, app)).body.smartWallet.address as Address;
  await mintToken(devnet, "USDC", smart, usdc);
  const smartPayout = (amount: string, destinationAddress: string) =>
    payout(ws, { tokenSymbol: "USDC", amount, destinationAddress, walletType: "smart_wallet" }, app);
  return { ws, smart, smartPayout };
}

async function payoutState(ws: CreatedWorkspace, app: TestApp = t) {
  const res = await app.request({
    method: "GET",
    url: `/api/v1/workspaces/${ws.id}/payout-state`,
    headers: bearer(ws.liveKey),
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

function outbox(ws: CreatedWorkspace, type: string) {
  return t.database.db
    .selectFrom("outbox_events")
    .select(["payload"])
    .where("workspace_id", "=", ws.id)
    .where("environment", "=", "live")
    .where("event_type", "=", type)
    .orderBy("id")
    .execute();
}

async function waitForStatus(key: string, id: string, status: string, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  let payment: Json | undefined;
  while (Date.now() < deadline) {
    const res = await t.request({ method: "GET", url: `/api/v1/payments/${id}`, headers: bearer(key) });
    payment = res.json().payment;
    if (!payment) throw new Error(`GET payment answered ${res.statusCode} ${res.body}`);
    last = String(payment.status);
    if (last === status) return payment;
    if (last === "failed" && status !== "failed") {
      throw new Error(`payment ${id} failed: ${JSON.stringify(payment.failureReason)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`payment ${id} stayed ${last}, expected ${status}`);
}

// ---------------------------------------------------------------------------------------------

/**
 * Answers a request in the proxy's place (a JSON-RPC error), drops its connection without passing
 * it on ("lose"), or passes it on (undefined).
 */
type ProxyAnswer = (method: string, params: unknown[]) => Promise<{ error: Json } | "lose" | undefined>;

/**
 * A JSON-RPC proxy in front of the devnet's Alto that lists the methods asked for; `answer` may
 * answer a request itself instead of passing it on.
 */
async function bundlerProxy(answer: ProxyAnswer = async () => undefined) {
  const methods: string[] = [];
  const proxy = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", async () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const message = JSON.parse(body) as { id: number; method: string; params: unknown[] };
      methods.push(message.method);
      res.setHeader("content-type", "application/json");
      const own = await answer(message.method, message.params);
      if (own === "lose") {
        req.socket.destroy();
        return;
      }
      if (own) {
        res.end(JSON.stringify({ jsonrpc: "2.0", id: message.id, error: own.error }));
        return;
      }
      const upstream = await fetch(aa.bundlerUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
      res.end(await upstream.text());
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
    methods,
    close: () => new Promise<void>((resolve) => proxy.close(() => resolve())),
  };
}

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
  });

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
      const recorded = async () =>
        (
          await t.database.db
            .selectFrom("payments")
            .select(["status", "settlement_user_op_hash"])
            .where("id", "=", id)
            .executeTakeFirstOrThrow()
        ).settlement_user_op_hash;
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

describe("live payouts from the smart wallet (gas sponsored)", () => {
  it("sends USDC with no ETH in the smart wallet: 200 with txHash and userOpHash, exact balances", async () => {
    const ws = await createWorkspace(t);
    const smart = await smartWalletOf(ws);
    await mintToken(devnet, "USDC", smart, "100");
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
    await fund(smart, { ETH: "0.5" });
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
    await mintToken(devnet, "USDC", smart, "10");
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
      expect(await app.app.services.payouts.reconcile("live")).toBe(1);
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
      await app.app.services.payouts.reconcile("live");
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
      await app.app.services.payouts.reconcile("live");
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

      await app.app.services.payouts.reconcile("live");
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
    await mintToken(devnet, "USDC", smart, "5");
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
    await mintToken(devnet, "USDC", smart, "3");
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
    await mintToken(devnet, "USDC", smart, "50");
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
    const network = t.config.networks.live;
    if (!network) throw new Error("no live network in the test config");
    const accounts = new SmartAccounts(network);
    const owner = generatePrivateKey();
    const smart = await accounts.address(owner);
    await mintToken(devnet, "USDC", smart, "11");
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
