// What the live refund suites (test/refunds/live*.test.ts) share.

import { createHmac } from "node:crypto";
import {
  type Address,
  type Chain,
  createWalletClient,
  erc20Abi,
  type Hex,
  http,
  type PublicClient,
  parseUnits,
  type Transport,
  type WalletClient,
} from "viem";
import type { BundlerClient } from "viem/account-abstraction";
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { expect } from "vitest";
import { type Devnet, mintToken } from "../../src/devnet/chain.ts";
import type { Workers } from "../../src/workers.ts";
import { bearer, type CreatedWorkspace, createWorkspace, type TestApp } from "./app.ts";
import type { DevnetClients } from "./devnet-clients.ts";
import {
  DECIMALS,
  expectTransferTransaction,
  FEE_BPS,
  fmt,
  type Token,
  usdcTransfersOf,
  useLiveService,
  WHOLE,
} from "./live-service.ts";
import type { ReceivedRequest, WebhookReceiver } from "./receiver.ts";

export { DECIMALS, FEE_BPS, fmt, type Token, WHOLE };

// Refunds and the unmatched inbox (D19) for real on the devnet. A refund of a forwarded crypto
// payment is a transfer of its token out of a workspace wallet (the EOA: a transaction; the smart
// wallet: a sponsored user operation), never out of the merchant's wallet, so each test first puts
// money of the workspace's own on that wallet. Every expected amount is computed here by hand
// (bigint) and checked against the chain: the destination receives exactly the amount, the wallet
// loses exactly the amount (and, for ETH from the EOA, the gas its receipt shows). Attaching an
// unmatched transfer (an underpayment, a payment made after expiry) settles what it carried; a stray
// transfer is returned to its sender. Each test pays from a fresh payer of its own, so the payer's
// balance is exact too.

export const TX_HASH = /^0x[0-9a-f]{64}$/;
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export type Json = Record<string, unknown>;

export const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
export const same = (a: unknown, b: string) => typeof a === "string" && a.toLowerCase() === b.toLowerCase();
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The fee rule by hand: 150 bps of the gross in the smallest unit, half up; net = gross − fee. */
export function carve(gross: bigint) {
  const fee = (gross * FEE_BPS + WHOLE / 2n) / WHOLE;
  return { gross, fee, net: gross - fee };
}

export let devnet: Devnet;
export let aa: NonNullable<Devnet["aa"]>;
export let t: TestApp;
export let workers: Workers;
export let receiver: WebhookReceiver;
export let chain: PublicClient;
export let bundler: BundlerClient;
export let clients: DevnetClients;

// ---------------------------------------------------------------------------------------------
// Chain

export const balanceOf = (token: Token, address: string) =>
  token === "USDC" ? clients.usdcBalance(address) : chain.getBalance({ address: address as Address });
export const sentCount = (address: string) => chain.getTransactionCount({ address: address as Address });

export interface Payer {
  address: Address;
  /** Sends `units` of `token` to `to`, awaited to a successful receipt; its hash. */
  pay(token: Token, to: string, units: bigint): Promise<Hex>;
}

/** A fresh payer holding 1,000 USDC and 10 ETH. */
export async function newPayer(): Promise<Payer> {
  const account = privateKeyToAccount(generatePrivateKey());
  const wallet: WalletClient<Transport, Chain, PrivateKeyAccount> = createWalletClient({
    account,
    chain: devnet.chain,
    transport: http(devnet.rpcUrl),
  });
  await mintToken(devnet, "USDC", account.address, "1000");
  await clients.fund(account.address, { ETH: "10" });
  return {
    address: account.address,
    async pay(token, to, units) {
      const hash =
        token === "USDC"
          ? await wallet.writeContract({
              address: devnet.tokens.USDC,
              abi: erc20Abi,
              functionName: "transfer",
              args: [to as Address, units],
            })
          : await wallet.sendTransaction({ to: to as Address, value: units });
      const receipt = await chain.waitForTransactionReceipt({ hash });
      expect(receipt.status).toBe("success");
      return hash;
    },
  };
}

/** The USDC Transfer events of a receipt, as [from, to, value] in lower case. */
export const usdcTransfers = (logs: Parameters<typeof usdcTransfersOf>[1]) =>
  usdcTransfersOf(devnet.tokens.USDC, logs);

/**
 * `txHash` is a mined transaction sent by the EOA `from`, carrying exactly `amount` of `token` to
 * `to` and nothing else; the ETH it cost in gas.
 */
export const expectEoaTransfer = (token: Token, txHash: string, from: string, to: string, amount: bigint) =>
  expectTransferTransaction({ chain, usdc: devnet.tokens.USDC }, { token, txHash, from, to, amount });

// ---------------------------------------------------------------------------------------------
// Service

export const api = (
  ws: CreatedWorkspace,
  method: "GET" | "POST" | "PUT",
  url: string,
  payload?: unknown,
  headers: Record<string, string> = {},
) =>
  t.request({
    method,
    url,
    headers: { ...bearer(ws.liveKey), ...headers },
    ...(payload === undefined ? {} : { payload: payload as Json }),
  });

export const refund = (ws: CreatedWorkspace, paymentId: string, body: Json = {}, key?: string) =>
  api(ws, "POST", `/api/v1/payments/${paymentId}/refunds`, body, key ? { "idempotency-key": key } : {});

export const returnTransfer = (ws: CreatedWorkspace, transferId: string, body: Json = {}, key?: string) =>
  api(
    ws,
    "POST",
    `/api/v1/transfers/unmatched/${transferId}/return`,
    body,
    key ? { "idempotency-key": key } : {},
  );

export const attach = (ws: CreatedWorkspace, transferId: string, paymentId: string) =>
  api(ws, "POST", `/api/v1/transfers/unmatched/${transferId}/attach`, { paymentId });

export async function getPayment(ws: CreatedWorkspace, id: string): Promise<Json> {
  const res = await api(ws, "GET", `/api/v1/payments/${id}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json().payment as Json;
}

export async function waitForStatus(ws: CreatedWorkspace, id: string, status: string, timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const payment = await getPayment(ws, id);
    if (payment.status === status) return payment;
    if (payment.status === "failed" && status !== "failed")
      throw new Error(`payment ${id} failed: ${JSON.stringify(payment.failureReason)}`);
    if (Date.now() > deadline)
      throw new Error(`payment ${id} stayed ${String(payment.status)}, expected ${status}`);
    await sleep(100);
  }
}

/** The workspace's unmatched transfers (the first 100, as listed). */
export async function unmatched(ws: CreatedWorkspace): Promise<Json[]> {
  const res = await api(ws, "GET", "/api/v1/transfers/unmatched?limit=100");
  expect(res.statusCode, res.body).toBe(200);
  return res.json().transfers as Json[];
}

/** Waits (bounded) for the watcher to record the transfer of transaction `txHash` in the inbox. */
export async function waitForUnmatched(
  ws: CreatedWorkspace,
  txHash: string,
  timeoutMs = 30_000,
): Promise<Json> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = (await unmatched(ws)).find((u) => same(u.txHash, txHash));
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`transfer ${txHash} never reached the unmatched inbox`);
    await sleep(100);
  }
}

export async function registerWebhook(ws: CreatedWorkspace): Promise<string> {
  const res = await api(ws, "POST", "/api/v1/webhooks", { url: receiver.url, events: ["*"] });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().webhook.signingSecret as string;
}

/** The refund.completed delivery of refund `id` (signature checked), waited for. */
export async function deliveredCompletion(id: string, secret: string): Promise<ReceivedRequest> {
  const ofIt = (r: ReceivedRequest) =>
    r.json.event === "refund.completed" && (r.json.data as Json | undefined)?.id === id;
  const [delivery] = await receiver.waitFor(1, ofIt, 30_000);
  if (!delivery) throw new Error("no delivery");
  expect(delivery.headers["x-service-signature"]).toBe(
    createHmac("sha256", secret).update(delivery.rawBody).digest("hex"),
  );
  expect(delivery.headers["x-service-event"]).toBe("refund.completed");
  return delivery;
}

export const outboxOf = (ws: CreatedWorkspace, type: string) =>
  t.database.db
    .selectFrom("outbox_events")
    .select(["payload"])
    .where("workspace_id", "=", ws.id)
    .where("event_type", "=", type)
    .orderBy("id")
    .execute();

export const chainTransactionsFrom = (address: string) =>
  t.database.db
    .selectFrom("chain_transactions")
    .select(["tx_hash", "status", "purpose", "payout_id", "to_address", "amount"])
    .where((eb) => eb(eb.fn("lower", ["from_address"]), "=", address.toLowerCase()))
    .orderBy("nonce")
    .execute();

export interface Forwarded {
  id: string;
  merchant: Address;
  gross: bigint;
  receivingAddress: string;
  payment: Json;
}

/** A live payment of `amount` created, paid by `payer` and forwarded. */
export async function forwardedPayment(
  ws: CreatedWorkspace,
  payer: Payer,
  token: Token,
  amount: string,
  extra: Json = {},
): Promise<Forwarded> {
  const merchant = randomAddress();
  const created = await api(ws, "POST", "/api/v1/payments", {
    tokenSymbol: token,
    amount,
    merchantWallet: merchant,
    ...extra,
  });
  expect(created.statusCode, created.body).toBe(201);
  const id = created.json().payment.id as string;
  const receivingAddress = created.json().receivingAddress as string;
  const gross = parseUnits(amount, DECIMALS[token]);
  await payer.pay(token, receivingAddress, gross);
  const payment = await waitForStatus(ws, id, "forwarded");
  expect(same(payment.payerAddress, payer.address)).toBe(true);
  expect(payment.refundedAmount).toBe("0.00");
  expect(payment.amountReceived).toBeNull();
  expect(await balanceOf(token, merchant)).toBe(carve(gross).net);
  return { id, merchant, gross, receivingAddress, payment };
}

/** A workspace with a webhook on the receiver and `eth` ETH of its own on its EOA (for gas). */
export async function workspaceWithGas(eth = "1") {
  const ws = await createWorkspace(t);
  const secret = await registerWebhook(ws);
  await clients.credit(ws.eoaAddress, { ETH: eth });
  return { ws, secret };
}

// ---------------------------------------------------------------------------------------------

/** A devnet (with account abstraction), the app, its workers and a webhook receiver for the file. */
export function useRefundsLive(): void {
  // No periodic gas top-ups (threshold 0): a workspace EOA's ETH changes only by what the test
  // sends it and what it pays, so its balance is exact. Settlements still get gas on demand.
  useLiveService({ LIVE_GAS_TOPUP_THRESHOLD_WEI: "0" }, (service) => {
    ({ devnet, aa, t, workers, receiver, chain, bundler, clients } = service);
  });
}
