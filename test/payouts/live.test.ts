import { mkdtempSync, rmSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Address, type Hex, type PublicClient, parseEther, parseUnits } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Devnet, rpc as devnetRpc, startDevnet } from "../../src/devnet/chain.ts";
import { ChainWatcher } from "../../src/modules/payments/incoming/chain-watcher.ts";
import { openDatabase, pgliteDirFor } from "../../src/platform/db/database.ts";
import { createWorkers } from "../../src/workers.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { type DevnetClients, devnetClients } from "../support/devnet-clients.ts";
import { CRASH_ENV, LIVE_DEFAULT, liveNetworkEnv } from "../support/devnet-env.ts";
import { setMining } from "../support/mining.ts";
import {
  callService,
  type Json,
  startService,
  stopAllServices,
  stopService,
} from "../support/service-process.ts";

// Live payouts on a real local chain (interface 4.10, 7; decisions D6, D13): a workspace EOA funded
// by the devnet payer sends USDC and ETH with exact amounts, gas pre-checks, a payout's failure
// (a recipient refusing ETH too) counts toward the circuit breaker, one wallet's concurrent payouts use consecutive nonces, and a payout
// in flight when the process is killed -9 ends completed exactly once after a restart.

const ADMIN = "payouts-live-admin-secret-0123456789";
const TX_HASH = /^0x[0-9a-f]{64}$/;
const DECIMAL = /^[0-9]+\.[0-9]{2,}$/;

const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
const sameAddress = (a: string | null | undefined, b: string) => a?.toLowerCase() === b.toLowerCase();

let devnet: Devnet;
let t: TestApp;
let chain: PublicClient;
let fund: DevnetClients["fund"];
let credit: DevnetClients["credit"];
let payer: DevnetClients["payer"];
let usdcBalance: DevnetClients["usdcBalance"];

const rpc = (method: string, params: unknown[]) => devnetRpc(devnet.rpcUrl, method, params);

/** The devnet's defaults: a block on every transaction and one every second. */
const restoreMining = () => setMining(devnet.rpcUrl, true);

beforeAll(async () => {
  devnet = await startDevnet();
  t = await startTestApp(liveNetworkEnv(devnet));
  ({ chain, fund, credit, payer, usdcBalance } = devnetClients(devnet));
}, 120_000);

afterAll(async () => {
  if (devnet) await restoreMining().catch(() => undefined);
  await t?.close();
  await devnet?.stop();
});

const ethBalance = (address: string) => chain.getBalance({ address: address as Address });
const sentCount = (address: string) => chain.getTransactionCount({ address: address as Address });

const payout = (ws: CreatedWorkspace, body: Json) =>
  t.request({ method: "POST", url: "/api/v1/payouts", headers: bearer(ws.liveKey), payload: body });

function chainTransactionsFrom(address: string, db = t.database.db) {
  return db
    .selectFrom("chain_transactions")
    .select(["tx_hash", "nonce", "status", "purpose", "payout_id", "to_address", "amount"])
    .where((eb) => eb(eb.fn("lower", ["from_address"]), "=", address.toLowerCase()))
    .orderBy("nonce")
    .execute();
}

function outbox(ws: CreatedWorkspace, type: string) {
  return t.database.db
    .selectFrom("outbox_events")
    .select(["payload", "environment"])
    .where("workspace_id", "=", ws.id)
    .where("event_type", "=", type)
    .orderBy("id")
    .execute();
}

/**
 * A JSON-RPC endpoint in front of the devnet that answers null (not found) for the receipt and
 * the transaction of held hashes (every hash while `holdAll`), as a lagging node would.
 */
async function startReceiptHoldingProxy(target: string) {
  const held = new Set<string>();
  const proxy = { held, holdAll: false, url: "", close: async () => {} };
  const lookups = new Set(["eth_getTransactionReceipt", "eth_getTransactionByHash"]);
  const server = createHttpServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString();
    const calls = ([] as { id: unknown; method: string; params?: unknown[] }[]).concat(JSON.parse(body));
    const upstream = await fetch(target, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    const answer = (await upstream.json()) as
      | { id: unknown; result?: unknown }
      | { id: unknown; result?: unknown }[];
    for (const reply of Array.isArray(answer) ? answer : [answer]) {
      const call = calls.find((c) => c.id === reply.id);
      const hash = String(call?.params?.[0] ?? "").toLowerCase();
      if (call && lookups.has(call.method) && (proxy.holdAll || held.has(hash))) {
        reply.result = null;
      }
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  proxy.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return proxy;
}

describe("live payouts on the devnet", () => {
  it("sends USDC: exact balances, a success receipt, payout.completed", async () => {
    const ws = await createWorkspace(t);
    await credit(ws.eoaAddress, { USDC: "100", ETH: "0.1" });
    const destination = randomAddress();
    const res = await payout(ws, {
      tokenSymbol: "USDC",
      amount: "10",
      destinationAddress: destination,
      description: "live refund",
      metadata: { order: "A-1" },
    });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.timestamp).toEqual(expect.any(String));
    expect(body.payout).toMatchObject({
      txHash: expect.stringMatching(TX_HASH),
      amount: "10.00",
      tokenSymbol: "USDC",
      destinationAddress: destination,
      fromAddress: ws.eoaAddress,
      environment: "live",
      status: "completed",
      description: "live refund",
      metadata: { order: "A-1" },
    });

    const receipt = await chain.getTransactionReceipt({ hash: body.payout.txHash });
    expect(receipt.status).toBe("success");
    expect(sameAddress(receipt.from, ws.eoaAddress)).toBe(true);
    expect(sameAddress(receipt.to, devnet.tokens.USDC)).toBe(true);
    expect(await usdcBalance(destination)).toBe(parseUnits("10", 6));
    expect(await usdcBalance(ws.eoaAddress)).toBe(parseUnits("90", 6));

    const balance = await t.request({
      method: "GET",
      url: "/api/v1/wallet/balance",
      headers: bearer(ws.liveKey),
    });
    expect(balance.statusCode, balance.body).toBe(200);
    expect(balance.json()).toMatchObject({
      environment: "live",
      eoa: { address: ws.eoaAddress, balances: { USDC: "90.00", ADAO: "0.00" } },
      smartWallet: null,
    });

    const recorded = await chainTransactionsFrom(ws.eoaAddress);
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({ tx_hash: body.payout.txHash, status: "mined", purpose: "payout" });
    const completed = await outbox(ws, "payout.completed");
    expect(completed).toHaveLength(1);
    expect(completed[0]?.payload).toMatchObject({
      txHash: body.payout.txHash,
      amount: "10.00",
      environment: "live",
      status: "completed",
    });
    const history = await t.request({ method: "GET", url: "/api/v1/payouts", headers: bearer(ws.liveKey) });
    expect(history.json()).toMatchObject({
      total: 1,
      payouts: [
        { txHash: body.payout.txHash, type: "ERC20", details: { amount: "10.00", tokenSymbol: "USDC" } },
      ],
    });
  });

  it("sends ETH: the destination receives exactly the amount", async () => {
    const ws = await createWorkspace(t);
    await credit(ws.eoaAddress, { ETH: "1" });
    const destination = randomAddress();
    const res = await payout(ws, { tokenSymbol: "ETH", amount: "0.25", destinationAddress: destination });
    expect(res.statusCode, res.body).toBe(200);
    const txHash = res.json().payout.txHash;
    expect(res.json().payout).toMatchObject({ amount: "0.25", tokenSymbol: "ETH", status: "completed" });
    const receipt = await chain.getTransactionReceipt({ hash: txHash });
    expect(receipt.status).toBe("success");
    expect(await ethBalance(destination)).toBe(parseEther("0.25"));
    const gasPaid = receipt.gasUsed * receipt.effectiveGasPrice;
    expect(await ethBalance(ws.eoaAddress)).toBe(parseEther("1") - parseEther("0.25") - gasPaid);
  });

  it("sends ETH to a contract whose receiving code needs more than 21,000 gas (a multisig, a smart wallet)", async () => {
    const ws = await createWorkspace(t);
    await credit(ws.eoaAddress, { ETH: "1" });
    // Its code stores what it receives (CALLVALUE PUSH1 0 SSTORE STOP): 22,100 gas beyond the
    // transfer's 21,000, as a wallet contract's event or proxy call costs some.
    const deployed = await payer.deployContract({
      abi: [],
      bytecode: "0x6005600c60003960056000f33460005500",
    });
    const contract = (await chain.waitForTransactionReceipt({ hash: deployed })).contractAddress as Address;
    const res = await payout(ws, { tokenSymbol: "ETH", amount: "0.25", destinationAddress: contract });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().payout).toMatchObject({ status: "completed" });
    const receipt = await chain.getTransactionReceipt({ hash: res.json().payout.txHash });
    expect(receipt.status).toBe("success");
    expect(receipt.gasUsed).toBeGreaterThan(21_000n);
    expect(await ethBalance(contract)).toBe(parseEther("0.25"));
    expect(await chain.getStorageAt({ address: contract, slot: "0x0" })).toBe(
      `0x${parseEther("0.25").toString(16).padStart(64, "0")}`,
    );
  });

  it("an ERC-20 payout from an EOA without ETH → 400 INSUFFICIENT_GAS, and no transaction", async () => {
    const ws = await createWorkspace(t);
    await credit(ws.eoaAddress, { USDC: "50" });
    expect(await ethBalance(ws.eoaAddress)).toBe(0n);
    const destination = randomAddress();
    const res = await payout(ws, { tokenSymbol: "USDC", amount: "10", destinationAddress: destination });
    expect(res.statusCode, res.body).toBe(400);
    const body = res.json();
    expect(body).toEqual({
      error: "Insufficient ETH for gas",
      code: "INSUFFICIENT_GAS",
      ethBalance: "0.00",
      required: expect.stringMatching(DECIMAL),
      action: expect.any(String),
    });
    expect(Number(body.required)).toBeGreaterThan(0);
    expect(body.action.length).toBeGreaterThan(0);

    expect(await sentCount(ws.eoaAddress)).toBe(0);
    expect(await chainTransactionsFrom(ws.eoaAddress)).toEqual([]);
    expect(await usdcBalance(destination)).toBe(0n);
    expect(await usdcBalance(ws.eoaAddress)).toBe(parseUnits("50", 6));
    // A gas pre-check is not a failed transfer (D13).
    const state = await t.request({
      method: "GET",
      url: `/api/v1/workspaces/${ws.id}/payout-state`,
      headers: bearer(ws.liveKey),
    });
    expect(state.json()).toMatchObject({ status: "active", failStreak: 0 });
    expect(await outbox(ws, "payout.failed")).toEqual([]);
  });

  it("an ETH payout to a contract that refuses ETH fails before it is sent and counts: 500 PAYOUT_FAILED, payout.failed", async () => {
    const ws = await createWorkspace(t);
    await credit(ws.eoaAddress, { ETH: "1" });
    const contract = devnet.tokens.USDC; // an ERC-20 without a payable fallback
    const contractBefore = await ethBalance(contract);
    const ethBefore = await ethBalance(ws.eoaAddress);
    const res = await payout(ws, { tokenSymbol: "ETH", amount: "0.1", destinationAddress: contract });
    expect(res.statusCode, res.body).toBe(500);
    expect(res.json()).toEqual({
      error: "Payout failed",
      code: "PAYOUT_FAILED",
      detail: expect.stringMatching(/^the recipient's code refuses ETH/),
      failStreak: 1,
      remainingBeforePause: 2,
      circuitBreaker: false,
    });
    expect(await ethBalance(contract)).toBe(contractBefore);

    // The node's estimate reverts: nothing was signed or sent, no gas paid (issue 36).
    expect(await chainTransactionsFrom(ws.eoaAddress)).toEqual([]);
    expect(await sentCount(ws.eoaAddress)).toBe(0);
    expect(await ethBalance(ws.eoaAddress)).toBe(ethBefore);

    const failed = await outbox(ws, "payout.failed");
    expect(failed).toHaveLength(1);
    expect(failed[0]?.environment).toBe("live");
    expect(failed[0]?.payload).toMatchObject({
      amount: "0.10",
      tokenSymbol: "ETH",
      destinationAddress: contract,
      fromAddress: ws.eoaAddress,
      environment: "live",
      status: "failed",
      txHash: null,
      error: expect.stringMatching(/^the recipient's code refuses ETH/),
      failStreak: 1,
    });
    expect(await outbox(ws, "payout.completed")).toEqual([]);
    // A payout's recipient is the merchant's own choice: counted by the breaker (D13), unlike a
    // refund's (test/refunds/recipient-costs.test.ts, where a revert mined on chain counts too).
    const state = await t.request({
      method: "GET",
      url: `/api/v1/workspaces/${ws.id}/payout-state`,
      headers: bearer(ws.liveKey),
    });
    expect(state.json()).toMatchObject({ status: "active", failStreak: 1 });
    const history = await t.request({ method: "GET", url: "/api/v1/payouts", headers: bearer(ws.liveKey) });
    expect(history.json()).toMatchObject({ payouts: [], total: 0 });
  });

  it("20 concurrent payouts from one wallet all succeed, with consecutive nonces", async () => {
    const ws = await createWorkspace(t);
    await credit(ws.eoaAddress, { USDC: "1000", ETH: "1" });
    const jobs = Array.from({ length: 20 }, (_, i) => ({
      destination: randomAddress(),
      amount: `${i + 1}.5`,
    }));
    const responses = await Promise.all(
      jobs.map((job) =>
        payout(ws, { tokenSymbol: "USDC", amount: job.amount, destinationAddress: job.destination }),
      ),
    );
    for (const res of responses) expect(res.statusCode, res.body).toBe(200);
    const hashes = responses.map((r) => r.json().payout.txHash as string);
    expect(new Set(hashes).size).toBe(20);
    for (const [i, job] of jobs.entries()) {
      expect(await usdcBalance(job.destination), job.amount).toBe(parseUnits(job.amount, 6));
      const receipt = await chain.getTransactionReceipt({ hash: hashes[i] as Hex });
      expect(receipt.status).toBe("success");
    }
    const total = jobs.reduce((sum, job) => sum + parseUnits(job.amount, 6), 0n);
    expect(await usdcBalance(ws.eoaAddress)).toBe(parseUnits("1000", 6) - total);

    const recorded = await chainTransactionsFrom(ws.eoaAddress);
    expect(recorded).toHaveLength(20);
    expect(recorded.map((r) => Number(r.nonce))).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(recorded.every((r) => r.status === "mined" && r.purpose === "payout")).toBe(true);
    expect(recorded.map((r) => r.tx_hash).sort()).toEqual([...hashes].sort());
    expect(await sentCount(ws.eoaAddress)).toBe(20);
  }, 180_000);

  it("one wallet's payouts are pipelined: each sent without waiting for the previous receipt, balances reserved meanwhile", async () => {
    const ws = await createWorkspace(t);
    await credit(ws.eoaAddress, { USDC: "100", ETH: "1" });
    // No automine: the node mines one block a second, so a payout's receipt takes up to a second.
    await rpc("evm_setAutomine", [false]);
    try {
      // Nine payouts of 12 from 100 USDC. Which request reaches the wallet's turn last is up to the
      // scheduler; that one must be refused before it is sent, while the chain still shows 100 USDC
      // (nothing is mined yet): only the reservations of the 8 in flight (96) refuse it.
      const destinations = Array.from({ length: 9 }, () => randomAddress());
      const responses = await Promise.all(
        destinations.map((destination) =>
          payout(ws, { tokenSymbol: "USDC", amount: "12", destinationAddress: destination }),
        ),
      );
      const refused = responses.filter((r) => r.statusCode !== 200);
      expect(refused.map((r) => r.json())).toEqual([
        {
          error: "Insufficient balance",
          available: "4.00",
          requested: "12.00",
          tokenSymbol: "USDC",
          network: "default",
        },
      ]);
      const paid = responses.filter((r) => r.statusCode === 200);
      expect(paid).toHaveLength(8);
      // Sent one after the other, each after the previous receipt, they would take 8 blocks.
      const blocks = await Promise.all(
        paid.map(
          async (res) =>
            (await chain.getTransactionReceipt({ hash: res.json().payout.txHash as Hex })).blockNumber,
        ),
      );
      expect(new Set(blocks).size).toBeLessThanOrEqual(3);
      for (const res of paid)
        expect(await usdcBalance(res.json().payout.destinationAddress)).toBe(12_000_000n);
      expect(await usdcBalance(ws.eoaAddress)).toBe(4_000_000n);
      const recorded = await chainTransactionsFrom(ws.eoaAddress);
      expect(recorded.map((r) => Number(r.nonce))).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      expect(recorded.every((r) => r.status === "mined")).toBe(true);
    } finally {
      await restoreMining();
    }
  }, 120_000);

  it("a payout mined before the service has seen its receipt is not subtracted twice from the balance", async () => {
    // The node's RPC answers "no receipt yet" for the first payout although its block is mined,
    // as a node behind on its index would. Meanwhile the chain balance already shows it spent: the
    // next payout's check must not also subtract it as in flight.
    const rpcProxy = await startReceiptHoldingProxy(devnet.rpcUrl);
    const app = await startTestApp(liveNetworkEnv(devnet, { LIVE_RPC_URL: rpcProxy.url }));
    try {
      const ws = await createWorkspace(app);
      await credit(ws.eoaAddress, { USDC: "100", ETH: "1" });
      rpcProxy.holdAll = true;
      const first = app.request({
        method: "POST",
        url: "/api/v1/payouts",
        headers: bearer(ws.liveKey),
        payload: { tokenSymbol: "USDC", amount: "60", destinationAddress: randomAddress() },
      });
      let firstHash: Hex | undefined;
      while (!firstHash) {
        firstHash = (await chainTransactionsFrom(ws.eoaAddress, app.database.db))[0]?.tx_hash as Hex;
        if (!firstHash) await new Promise((r) => setTimeout(r, 10));
      }
      expect((await chain.waitForTransactionReceipt({ hash: firstHash })).status).toBe("success");
      expect(await usdcBalance(ws.eoaAddress)).toBe(40_000_000n);
      rpcProxy.held.add(firstHash);
      rpcProxy.holdAll = false;

      const second = await app.request({
        method: "POST",
        url: "/api/v1/payouts",
        headers: bearer(ws.liveKey),
        payload: { tokenSymbol: "USDC", amount: "40", destinationAddress: randomAddress() },
      });
      expect(second.statusCode, second.body).toBe(200);
      // The first payout was still waiting for its receipt meanwhile.
      expect(await Promise.race([first.then(() => "answered"), Promise.resolve("waiting")])).toBe("waiting");

      rpcProxy.held.clear();
      const firstResponse = await first;
      expect(firstResponse.statusCode, firstResponse.body).toBe(200);
      expect(firstResponse.json().payout.txHash).toBe(firstHash);
      expect(await usdcBalance(ws.eoaAddress)).toBe(0n);
      const recorded = await chainTransactionsFrom(ws.eoaAddress, app.database.db);
      expect(recorded.map((r) => [Number(r.nonce), r.status])).toEqual([
        [0, "mined"],
        [1, "mined"],
      ]);
    } finally {
      await app.close();
      await rpcProxy.close();
    }
  }, 120_000);

  it("a transaction the node refuses is never skipped: a cancellation takes its nonce, and only then does its payout fail", async () => {
    const ws = await createWorkspace(t);
    await credit(ws.eoaAddress, { USDC: "50", ETH: "1" });
    await rpc("evm_setIntervalMining", [0]);
    try {
      // The next block's base fee far above what the fee estimate (from the latest block) offers:
      // the automining node refuses the transaction instead of pooling it, and its cancellation
      // too. Neither can be mined now, but the signed payout could be later: it is not failed.
      await rpc("hardhat_setNextBlockBaseFeePerGas", ["0x174876e8000"]); // 1,600 gwei
      const firstDestination = randomAddress();
      const first = await payout(ws, {
        tokenSymbol: "USDC",
        amount: "10",
        destinationAddress: firstDestination,
      });
      expect(first.statusCode, first.body).toBe(202);
      const refusedHash = first.json().payout.txHash;
      // By nonce, then purpose ("cancel" before "payout").
      const byNonce = async () =>
        (await chainTransactionsFrom(ws.eoaAddress))
          .map((r) => [Number(r.nonce), r.status, r.purpose] as const)
          .sort((a, b) => a[0] - b[0] || a[2].localeCompare(b[2]));
      expect(await byNonce()).toEqual([
        [0, "signed", "cancel"],
        [0, "signed", "payout"],
      ]);
      expect(await sentCount(ws.eoaAddress)).toBe(0);

      // The next payout takes nonce 1; the node has nothing at 0, so the cancellation goes first.
      await rpc("hardhat_setNextBlockBaseFeePerGas", ["0x3b9aca00"]); // 1 gwei
      const destination = randomAddress();
      const second = await payout(ws, { tokenSymbol: "USDC", amount: "10", destinationAddress: destination });
      expect(second.statusCode, second.body).toBe(200);
      expect(await usdcBalance(destination)).toBe(10_000_000n);
      expect(await sentCount(ws.eoaAddress)).toBe(2);

      // The reconcilers: the refused transaction's nonce is taken, so it can never be mined; its
      // payout fails (payout.failed, counted) and is never paid.
      await t.app.ctx.chains.defaultOf("live")?.sender?.reconcile();
      expect(await t.app.services.transfers.reconcile(LIVE_DEFAULT)).toBe(1);
      expect(await byNonce()).toEqual([
        [0, "mined", "cancel"],
        [0, "replaced", "payout"],
        [1, "mined", "payout"],
      ]);
      const again = await payout(ws, {
        tokenSymbol: "USDC",
        amount: "10",
        destinationAddress: firstDestination,
        idempotencyKey: "unused",
      });
      expect(again.statusCode, again.body).toBe(200);
      const failed = (await outbox(ws, "payout.failed")).map((row) => row.payload);
      expect(failed).toEqual([
        expect.objectContaining({
          txHash: refusedHash,
          failStreak: 1,
          error: expect.stringMatching(/maxFeePerGas/),
        }),
      ]);
      expect(await usdcBalance(firstDestination)).toBe(10_000_000n); // the third payout, once
    } finally {
      await restoreMining();
    }
  }, 60_000);
});

// ---------------------------------------------------------------------------------------------
// Crash safety with the real process

const tempDirs: string[] = [];

const startServer = (dataDir: string) =>
  startService({ ...liveNetworkEnv(devnet, CRASH_ENV), DATA_DIR: dataDir, ADMIN_SECRET: ADMIN });

/** Transactions from `address` waiting in the node's pool (the pending block). */
async function pendingFrom(address: string): Promise<Array<{ hash: Hex; nonce: Hex }>> {
  const block = (await rpc("eth_getBlockByNumber", ["pending", true])) as {
    transactions: Array<{ hash: Hex; from: string; nonce: Hex }>;
  } | null;
  return (block?.transactions ?? []).filter((tx) => sameAddress(tx.from, address));
}

describe("live payout crash safety (real process, kill -9)", () => {
  afterEach(async () => {
    await restoreMining();
    await stopAllServices("SIGKILL");
  });

  afterAll(() => {
    for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  });

  it("a payout in flight when the process is killed ends completed exactly once after a restart", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "payouts-live-crash-"));
    tempDirs.push(dataDir);
    const first = await startServer(dataDir);
    const created = await callService(first, "POST", "/api/v1/workspaces", ADMIN, {
      name: "Crash Co",
      settlementAddress: randomAddress(),
    });
    expect(created.status, JSON.stringify(created.json)).toBe(201);
    const workspace = created.json.workspace as { id: string; eoa: { address: string } };
    const liveKey = (created.json.apiKeys as { live: { key: string } }).live.key;
    const eoa = workspace.eoa.address;
    await credit(eoa, { USDC: "100", ETH: "1" });
    const destination = randomAddress();

    // No more blocks: the payout is signed, recorded and broadcast, then waits for its receipt.
    await rpc("evm_setAutomine", [false]);
    await rpc("evm_setIntervalMining", [0]);
    const hanging = fetch(`${first.baseUrl}/api/v1/payouts`, {
      method: "POST",
      headers: { authorization: `Bearer ${liveKey}`, "content-type": "application/json" },
      body: JSON.stringify({ tokenSymbol: "USDC", amount: "10", destinationAddress: destination }),
    }).then(
      (res) => ({ status: res.status }),
      (err: Error) => ({ error: err.message }),
    );

    let pending: Array<{ hash: Hex; nonce: Hex }> = [];
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && pending.length === 0) {
      pending = await pendingFrom(eoa);
      if (pending.length === 0) await new Promise((r) => setTimeout(r, 100));
    }
    expect(pending, `stderr: ${first.stderr()}`).toHaveLength(1);
    const txHash = pending[0]?.hash as Hex;

    await stopService(first.child, "SIGKILL");
    expect(await first.exited).toEqual({ code: null, signal: "SIGKILL" });
    // The request never got an answer.
    expect(await hanging).toHaveProperty("error");
    expect(await chain.getTransactionCount({ address: eoa as Address })).toBe(0);

    await restoreMining();
    const second = await startServer(dataDir);
    let page: Json = {};
    const until = Date.now() + 60_000;
    while (Date.now() < until) {
      const res = await callService(second, "GET", "/api/v1/payouts", liveKey);
      expect(res.status).toBe(200);
      page = res.json;
      if (page.total === 1) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(page, `stderr: ${second.stderr()}`).toMatchObject({
      total: 1,
      payouts: [
        {
          txHash,
          type: "ERC20",
          details: { amount: "10.00", tokenSymbol: "USDC", destinationAddress: destination },
        },
      ],
    });
    // A few more blocks and reconcile rounds: nothing is sent a second time. A fixed wait on
    // purpose: what is proved is that nothing happens, which has no event to poll for.
    await new Promise((r) => setTimeout(r, 2_500));
    expect(await usdcBalance(destination)).toBe(parseUnits("10", 6));
    expect(await usdcBalance(eoa)).toBe(parseUnits("90", 6));
    expect(await chain.getTransactionCount({ address: eoa as Address })).toBe(1);
    expect((await chain.getTransactionReceipt({ hash: txHash })).status).toBe("success");
    const again = await callService(second, "GET", "/api/v1/payouts", liveKey);
    expect(again.json).toMatchObject({ total: 1 });

    // The database, read once the process has stopped: one payout, one chain transaction.
    await stopService(second.child, "SIGTERM");
    expect(await second.exited, `stderr: ${second.stderr()}`).toEqual({ code: 0, signal: null });
    const database = await openDatabase({ pgliteDir: pgliteDirFor(dataDir) });
    try {
      const payouts = await database.db
        .selectFrom("payouts")
        .select(["id", "status", "tx_hash"])
        .where("workspace_id", "=", workspace.id)
        .execute();
      expect(payouts).toEqual([{ id: expect.any(String), status: "completed", tx_hash: txHash }]);
      const sent = await chainTransactionsFrom(eoa, database.db);
      expect(sent).toEqual([
        expect.objectContaining({
          tx_hash: txHash,
          status: "mined",
          purpose: "payout",
          payout_id: payouts[0]?.id,
          amount: "10000000",
        }),
      ]);
      const completed = await database.db
        .selectFrom("outbox_events")
        .select("payload")
        .where("workspace_id", "=", workspace.id)
        .where("event_type", "=", "payout.completed")
        .execute();
      expect(completed).toHaveLength(1);
      expect(completed[0]?.payload).toMatchObject({ txHash, status: "completed", amount: "10.00" });
    } finally {
      await database.close();
    }
  }, 240_000);
});

describe("payouts from a wallet that holds money of payments not settled yet", () => {
  it("leaves a detected payment's money for its settlement, which then completes with exact amounts", async () => {
    const ws = await createWorkspace(t);
    await credit(ws.eoaAddress, { USDC: "10", ETH: "1" }); // the merchant's own money, and gas
    const merchant = randomAddress();
    const created = await t.request({
      method: "POST",
      url: "/api/v1/payments",
      headers: bearer(ws.liveKey),
      payload: { tokenSymbol: "USDC", amount: "100", merchantWallet: merchant },
    });
    expect(created.statusCode, created.body).toBe(201);
    const paymentId = created.json().payment.id as string;
    await fund(ws.eoaAddress, { USDC: "100" }); // the payer pays it
    expect(await usdcBalance(ws.eoaAddress)).toBe(parseUnits("110", 6));

    // The real watcher detects it; nothing settles it yet.
    const live = t.app.ctx.chains.defaultOf("live")?.network;
    if (!live) throw new Error("no live network");
    const watcher = new ChainWatcher(t.database.db, live, t.app.ctx.log, () => new Date());
    const status = async () =>
      (
        await t.request({ method: "GET", url: `/api/v1/payments/${paymentId}`, headers: bearer(ws.liveKey) })
      ).json().payment.status as string;
    for (let i = 0; i < 50 && (await status()) === "pending"; i++) await watcher.tick();
    // Detected, or confirmed when the devnet (a block a second) mined its confirmations first.
    expect(["detected", "confirmed"]).toContain(await status());

    const tooMuch = await payout(ws, {
      tokenSymbol: "USDC",
      amount: "50",
      destinationAddress: randomAddress(),
    });
    expect(tooMuch.statusCode, tooMuch.body).toBe(400);
    expect(tooMuch.json()).toEqual({
      error: "Insufficient balance",
      available: "10.00",
      requested: "50.00",
      tokenSymbol: "USDC",
      network: "default",
    });
    const own = await payout(ws, { tokenSymbol: "USDC", amount: "10", destinationAddress: randomAddress() });
    expect(own.statusCode, own.body).toBe(200);
    expect(own.json().payout.status).toBe("completed");

    const treasury = devnet.accounts.treasury.address;
    const treasuryBefore = await usdcBalance(treasury);
    const workers = createWorkers(t.app);
    workers.start();
    try {
      const deadline = Date.now() + 30_000;
      while ((await status()) !== "forwarded" && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 100));
      expect(await status()).toBe("forwarded");
    } finally {
      await workers.stop();
    }
    expect(await usdcBalance(merchant)).toBe(parseUnits("98.5", 6));
    expect((await usdcBalance(treasury)) - treasuryBefore).toBe(parseUnits("1.5", 6));
    expect(await usdcBalance(ws.eoaAddress)).toBe(0n);
  }, 120_000);
});
