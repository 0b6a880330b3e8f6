// What the live smart wallet suites (test/smart-wallets/live*.test.ts) share.

import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { type Address, type Hex, http, type PublicClient, parseAbi } from "viem";
import { type BundlerClient, createBundlerClient } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import { type Devnet, startDevnet } from "../../src/devnet/chain.ts";
import { createWorkers, type Workers } from "../../src/workers.ts";
import { bearer, type CreatedWorkspace, createWorkspace, startTestApp, type TestApp } from "./app.ts";
import { type DevnetClients, devnetClients } from "./devnet-clients.ts";
import { creditToken } from "./devnet-credit.ts";
import { liveSmartWalletEnv } from "./devnet-env.ts";

// Smart wallets (ERC-4337) on a real local chain with EntryPoint v0.8, a SimpleAccountFactory, a
// verifying paymaster (the devnet's ERC-7677 service signs each operation) and an Alto bundler
// (interface 4.1, 4.10, 4.13, 4.18, 7; decisions D11, D13): the counterfactual address the service
// reports is the factory's, it receives a live payment that settles as ONE user operation, and
// payouts from it need no ETH for gas (txHash + userOpHash).

export const TX_HASH = /^0x[0-9a-f]{64}$/;
export const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
export const FACTORY_ABI = parseAbi([
  "function getAddress(address owner, uint256 salt) view returns (address)",
]);
export const ACCOUNT_ABI = parseAbi(["function owner() view returns (address)"]);
export const PAYMASTER_ABI = parseAbi(["function getDeposit() view returns (uint256)"]);

export type Json = Record<string, unknown>;

export const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
export const same = (a: string | null | undefined, b: string) => a?.toLowerCase() === b.toLowerCase();

export let devnet: Devnet;
export let aa: NonNullable<Devnet["aa"]>;
export let env: Record<string, string>;
export let t: TestApp;
export let chain: PublicClient;
export let bundler: BundlerClient;
export let fund: DevnetClients["fund"];
/** The workspace's own money, credited with no transaction (devnet-credit.ts). */
export let credit: DevnetClients["credit"];
export let usdcBalance: DevnetClients["usdcBalance"];
export let sendUsdc: DevnetClients["sendUsdc"];
export let workers: Workers | undefined;
/** Apps started by one test, closed (keeping the shared database) after it. */
export const extraApps: TestApp[] = [];

export function startWorkers(app: TestApp = t) {
  workers = createWorkers(app.app, { dispatcher: { pollIntervalMs: 50 } });
  workers.start();
  return workers;
}

// ---------------------------------------------------------------------------------------------
// Chain helpers

export const ethBalance = (address: string) => chain.getBalance({ address: address as Address });
export const paymasterDeposit = () =>
  chain.readContract({ address: aa.paymaster, abi: PAYMASTER_ABI, functionName: "getDeposit" });

/** The transaction carried exactly this user operation of this sender, and it succeeded. */
export async function expectCarriedUserOperation(
  txHash: string,
  userOpHash: string | undefined,
  sender: string,
) {
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

export async function createSmartWallet(ws: CreatedWorkspace, app: TestApp = t, payload?: Json) {
  const res = await app.request({
    method: "POST",
    url: `/api/v1/workspaces/${ws.id}/smart-wallet`,
    headers: bearer(ws.liveKey),
    ...(payload ? { payload } : {}),
  });
  expect([200, 201], res.body).toContain(res.statusCode);
  return { status: res.statusCode, body: res.json() };
}

export async function smartWalletOf(ws: CreatedWorkspace, app: TestApp = t): Promise<Address> {
  const created = await createSmartWallet(ws, app);
  return created.body.smartWallet.address as Address;
}

/** A live USDC payment of `amount` to be received on the workspace's smart wallet; its 201 body. */
export async function smartWalletPayment(
  ws: CreatedWorkspace,
  amount: string,
  merchant: string,
  app: TestApp = t,
) {
  const res = await app.request({
    method: "POST",
    url: "/api/v1/payments",
    headers: bearer(ws.liveKey),
    payload: { tokenSymbol: "USDC", amount, merchantWallet: merchant, walletType: "smart_wallet" },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

export const payout = (ws: CreatedWorkspace, body: Json, app: TestApp = t) =>
  app.request({ method: "POST", url: "/api/v1/payouts", headers: bearer(ws.liveKey), payload: body });

/** A new workspace on `app` whose smart wallet holds `usdc`, and a USDC payout from that smart wallet. */
export async function fundedSmartWallet(app: TestApp, usdc: string) {
  const ws = await createWorkspace(app);
  const smart = (await createSmartWallet(ws, app)).body.smartWallet.address as Address;
  await creditToken(devnet, "USDC", smart, usdc);
  const smartPayout = (amount: string, destinationAddress: string) =>
    payout(ws, { tokenSymbol: "USDC", amount, destinationAddress, walletType: "smart_wallet" }, app);
  return { ws, smart, smartPayout };
}

export async function payoutState(ws: CreatedWorkspace, app: TestApp = t) {
  const res = await app.request({
    method: "GET",
    url: `/api/v1/workspaces/${ws.id}/payout-state`,
    headers: bearer(ws.liveKey),
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

export function outbox(ws: CreatedWorkspace, type: string) {
  return t.database.db
    .selectFrom("outbox_events")
    .select(["payload"])
    .where("workspace_id", "=", ws.id)
    .where("environment", "=", "live")
    .where("event_type", "=", type)
    .orderBy("id")
    .execute();
}

export async function waitForStatus(key: string, id: string, status: string, timeoutMs = 30_000) {
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
export type ProxyAnswer = (
  method: string,
  params: unknown[],
) => Promise<{ error: Json } | "lose" | undefined>;

/**
 * A JSON-RPC proxy in front of the devnet's Alto that lists the methods asked for; `answer` may
 * answer a request itself instead of passing it on.
 */
export async function bundlerProxy(answer: ProxyAnswer = async () => undefined) {
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

/** A devnet (with account abstraction) and the app for the file; workers and extra apps stopped after each test. */
export function useSmartWalletsLive(): void {
  beforeAll(async () => {
    devnet = await startDevnet({ accountAbstraction: true });
    if (!devnet.aa) throw new Error("startDevnet({ accountAbstraction: true }) returned no aa");
    aa = devnet.aa;
    env = liveSmartWalletEnv(devnet, aa);
    t = await startTestApp(env);
    ({ chain, fund, credit, usdcBalance, sendUsdc } = devnetClients(devnet));
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
}
