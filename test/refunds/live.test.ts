import { createHmac } from "node:crypto";
import {
  type Address,
  type Chain,
  createWalletClient,
  decodeEventLog,
  erc20Abi,
  formatUnits,
  type Hex,
  http,
  type PublicClient,
  parseEther,
  parseUnits,
  type Transport,
  type WalletClient,
} from "viem";
import { type BundlerClient, createBundlerClient } from "viem/account-abstraction";
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Devnet, mintToken, startDevnet } from "../../src/devnet/chain.ts";
import { expireDuePayments } from "../../src/modules/payments/expiry.ts";
import { createWorkers, type Workers } from "../../src/workers.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { untilConfirmed } from "../support/confirmations.ts";
import { type DevnetClients, devnetClients } from "../support/devnet-clients.ts";
import { liveSmartWalletEnv } from "../support/devnet-env.ts";
import { type ReceivedRequest, WebhookReceiver } from "../support/receiver.ts";

// Refunds and the unmatched inbox (D19) for real on the devnet. A refund of a forwarded crypto
// payment is a transfer of its token out of a workspace wallet (the EOA: a transaction; the smart
// wallet: a sponsored user operation), never out of the merchant's wallet, so each test first puts
// money of the workspace's own on that wallet. Every expected amount is computed here by hand
// (bigint) and checked against the chain: the destination receives exactly the amount, the wallet
// loses exactly the amount (and, for ETH from the EOA, the gas its receipt shows). Attaching an
// unmatched transfer (an underpayment, a payment made after expiry) settles what it carried; a stray
// transfer is returned to its sender. Each test pays from a fresh payer of its own, so the payer's
// balance is exact too.

const TX_HASH = /^0x[0-9a-f]{64}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const FEE_BPS = 150n;
const WHOLE = 10_000n;
const DECIMALS = { USDC: 6, ETH: 18 } as const;
type Token = keyof typeof DECIMALS;
type Json = Record<string, unknown>;

const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
const same = (a: unknown, b: string) => typeof a === "string" && a.toLowerCase() === b.toLowerCase();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** D4's formatting, written again: at least two decimals, more only when needed. */
function fmt(units: bigint, token: Token): string {
  const text = formatUnits(units, DECIMALS[token]);
  const [whole, fraction = ""] = text.split(".");
  return `${whole}.${fraction.padEnd(2, "0")}`;
}

/** The fee rule by hand: 150 bps of the gross in the smallest unit, half up; net = gross − fee. */
function carve(gross: bigint) {
  const fee = (gross * FEE_BPS + WHOLE / 2n) / WHOLE;
  return { gross, fee, net: gross - fee };
}

let devnet: Devnet;
let aa: NonNullable<Devnet["aa"]>;
let t: TestApp;
let workers: Workers;
let receiver: WebhookReceiver;
let chain: PublicClient;
let bundler: BundlerClient;
let clients: DevnetClients;

beforeAll(async () => {
  devnet = await startDevnet({ accountAbstraction: true });
  if (!devnet.aa) throw new Error("startDevnet({ accountAbstraction: true }) returned no aa");
  aa = devnet.aa;
  // No periodic gas top-ups (threshold 0): a workspace EOA's ETH changes only by what the test
  // sends it and what it pays, so its balance is exact. Settlements still get gas on demand.
  t = await startTestApp(
    liveSmartWalletEnv(devnet, aa, { WEBHOOK_ALLOW_PRIVATE: "true", LIVE_GAS_TOPUP_THRESHOLD_WEI: "0" }),
  );
  clients = devnetClients(devnet);
  chain = clients.chain;
  bundler = createBundlerClient({ client: chain, transport: http(aa.bundlerUrl), pollingInterval: 100 });
  receiver = new WebhookReceiver();
  await receiver.start();
  workers = createWorkers(t.app, { dispatcher: { pollIntervalMs: 50 } });
  workers.start();
}, 180_000);

afterAll(async () => {
  await workers?.stop();
  await receiver?.stop();
  await t?.close();
  await devnet?.stop();
});

// ---------------------------------------------------------------------------------------------
// Chain

const balanceOf = (token: Token, address: string) =>
  token === "USDC" ? clients.usdcBalance(address) : chain.getBalance({ address: address as Address });
const sentCount = (address: string) => chain.getTransactionCount({ address: address as Address });

interface Payer {
  address: Address;
  /** Sends `units` of `token` to `to`, awaited to a successful receipt; its hash. */
  pay(token: Token, to: string, units: bigint): Promise<Hex>;
}

/** A fresh payer holding 1,000 USDC and 10 ETH. */
async function newPayer(): Promise<Payer> {
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
function usdcTransfers(logs: ReadonlyArray<{ address: string; data: Hex; topics: [Hex, ...Hex[]] | [] }>) {
  const transfers: Array<[string, string, bigint]> = [];
  for (const log of logs) {
    if (!same(log.address, devnet.tokens.USDC)) continue;
    const decoded = decodeEventLog({ abi: erc20Abi, data: log.data, topics: log.topics });
    if (decoded.eventName !== "Transfer") continue;
    transfers.push([decoded.args.from.toLowerCase(), decoded.args.to.toLowerCase(), decoded.args.value]);
  }
  return transfers;
}

/**
 * `txHash` is a mined transaction sent by the EOA `from`, carrying exactly `amount` of `token` to
 * `to` and nothing else; the ETH it cost in gas.
 */
async function expectEoaTransfer(token: Token, txHash: string, from: string, to: string, amount: bigint) {
  const [tx, receipt] = await Promise.all([
    chain.getTransaction({ hash: txHash as Hex }),
    chain.getTransactionReceipt({ hash: txHash as Hex }),
  ]);
  expect(receipt.status).toBe("success");
  expect(same(tx.from, from)).toBe(true);
  if (token === "ETH") {
    expect(same(tx.to, to)).toBe(true);
    expect(tx.value).toBe(amount);
    expect(receipt.logs).toEqual([]);
  } else {
    expect(same(tx.to, devnet.tokens.USDC)).toBe(true);
    expect(tx.value).toBe(0n);
    expect(usdcTransfers(receipt.logs)).toEqual([[from.toLowerCase(), to.toLowerCase(), amount]]);
  }
  return receipt.gasUsed * receipt.effectiveGasPrice;
}

// ---------------------------------------------------------------------------------------------
// Service

const api = (
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

const refund = (ws: CreatedWorkspace, paymentId: string, body: Json = {}, key?: string) =>
  api(ws, "POST", `/api/v1/payments/${paymentId}/refunds`, body, key ? { "idempotency-key": key } : {});

const returnTransfer = (ws: CreatedWorkspace, transferId: string, body: Json = {}, key?: string) =>
  api(
    ws,
    "POST",
    `/api/v1/transfers/unmatched/${transferId}/return`,
    body,
    key ? { "idempotency-key": key } : {},
  );

const attach = (ws: CreatedWorkspace, transferId: string, paymentId: string) =>
  api(ws, "POST", `/api/v1/transfers/unmatched/${transferId}/attach`, { paymentId });

async function getPayment(ws: CreatedWorkspace, id: string): Promise<Json> {
  const res = await api(ws, "GET", `/api/v1/payments/${id}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json().payment as Json;
}

async function waitForStatus(ws: CreatedWorkspace, id: string, status: string, timeoutMs = 90_000) {
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
async function unmatched(ws: CreatedWorkspace): Promise<Json[]> {
  const res = await api(ws, "GET", "/api/v1/transfers/unmatched?limit=100");
  expect(res.statusCode, res.body).toBe(200);
  return res.json().transfers as Json[];
}

/** Waits (bounded) for the watcher to record the transfer of transaction `txHash` in the inbox. */
async function waitForUnmatched(ws: CreatedWorkspace, txHash: string, timeoutMs = 30_000): Promise<Json> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = (await unmatched(ws)).find((u) => same(u.txHash, txHash));
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`transfer ${txHash} never reached the unmatched inbox`);
    await sleep(100);
  }
}

async function registerWebhook(ws: CreatedWorkspace): Promise<string> {
  const res = await api(ws, "POST", "/api/v1/webhooks", { url: receiver.url, events: ["*"] });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().webhook.signingSecret as string;
}

/** The refund.completed delivery of refund `id` (signature checked), waited for. */
async function deliveredCompletion(id: string, secret: string): Promise<ReceivedRequest> {
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

const outboxOf = (ws: CreatedWorkspace, type: string) =>
  t.database.db
    .selectFrom("outbox_events")
    .select(["payload"])
    .where("workspace_id", "=", ws.id)
    .where("event_type", "=", type)
    .orderBy("id")
    .execute();

const chainTransactionsFrom = (address: string) =>
  t.database.db
    .selectFrom("chain_transactions")
    .select(["tx_hash", "status", "purpose", "payout_id", "to_address", "amount"])
    .where((eb) => eb(eb.fn("lower", ["from_address"]), "=", address.toLowerCase()))
    .orderBy("nonce")
    .execute();

interface Forwarded {
  id: string;
  merchant: Address;
  gross: bigint;
  receivingAddress: string;
  payment: Json;
}

/** A live payment of `amount` created, paid by `payer` and forwarded. */
async function forwardedPayment(
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
async function workspaceWithGas(eth = "1") {
  const ws = await createWorkspace(t);
  const secret = await registerWebhook(ws);
  await clients.fund(ws.eoaAddress, { ETH: eth });
  return { ws, secret };
}

// ---------------------------------------------------------------------------------------------

describe("refunds from the workspace EOA", () => {
  it("a USDC payment refunded in part, then the rest: exact balances, mined transactions, refund.completed, idempotent", async () => {
    const { ws, secret } = await workspaceWithGas();
    const payer = await newPayer();
    const paid = await forwardedPayment(ws, payer, "USDC", "40");
    // The payment's money left with the settlement; the refund is the workspace's own money.
    expect(await balanceOf("USDC", ws.eoaAddress)).toBe(0n);
    await mintToken(devnet, "USDC", ws.eoaAddress as Address, "50");

    const payerBefore = await balanceOf("USDC", payer.address);
    const ethBefore = await balanceOf("ETH", ws.eoaAddress);
    const merchantBefore = await balanceOf("USDC", paid.merchant);
    const first = await refund(ws, paid.id, { amount: "15.25", reason: "damaged in transit" }, "refund-1");
    expect(first.statusCode, first.body).toBe(201);
    const one = first.json().refund as Json;
    expect(one).toEqual({
      id: expect.stringMatching(UUID),
      paymentId: paid.id,
      amount: "15.25",
      tokenSymbol: "USDC",
      destinationAddress: expect.any(String),
      status: "completed",
      txHash: expect.stringMatching(TX_HASH),
      reason: "damaged in transit",
      createdAt: expect.any(String),
    });
    expect(same(one.destinationAddress, payer.address)).toBe(true); // the payerAddress by default
    const gas1 = await expectEoaTransfer(
      "USDC",
      one.txHash as string,
      ws.eoaAddress,
      payer.address,
      15_250_000n,
    );
    expect((await balanceOf("USDC", payer.address)) - payerBefore).toBe(15_250_000n);
    expect(await balanceOf("USDC", ws.eoaAddress)).toBe(50_000_000n - 15_250_000n);
    expect(await balanceOf("ETH", ws.eoaAddress)).toBe(ethBefore - gas1);
    expect(await balanceOf("USDC", paid.merchant)).toBe(merchantBefore); // never the merchant's wallet
    expect((await getPayment(ws, paid.id)).refundedAmount).toBe("15.25");

    // The same Idempotency-Key and body: the same refund, nothing sent again.
    const sentBefore = await sentCount(ws.eoaAddress);
    const repeat = await refund(ws, paid.id, { amount: "15.25", reason: "damaged in transit" }, "refund-1");
    expect(repeat.statusCode, repeat.body).toBe(201);
    expect(repeat.json().refund).toEqual(one);
    // The same key with another request is a conflict.
    const reused = await refund(ws, paid.id, { amount: "1.00" }, "refund-1");
    expect(reused.statusCode, reused.body).toBe(409);
    // More than is left: 400 with what is refundable, nothing sent.
    const tooMuch = await refund(ws, paid.id, { amount: "24.76" });
    expect(tooMuch.statusCode, tooMuch.body).toBe(400);
    expect(tooMuch.json()).toMatchObject({
      error: "Refund exceeds the refundable amount",
      refundable: "24.75",
    });
    expect(await sentCount(ws.eoaAddress)).toBe(sentBefore);
    expect((await balanceOf("USDC", payer.address)) - payerBefore).toBe(15_250_000n);

    // No amount: what is left (24.75), to the payer again.
    const rest = await refund(ws, paid.id, {}, "refund-2");
    expect(rest.statusCode, rest.body).toBe(201);
    const two = rest.json().refund as Json;
    expect(two).toMatchObject({ paymentId: paid.id, amount: "24.75", status: "completed", reason: null });
    expect(two.id).not.toBe(one.id);
    await expectEoaTransfer("USDC", two.txHash as string, ws.eoaAddress, payer.address, 24_750_000n);
    expect((await balanceOf("USDC", payer.address)) - payerBefore).toBe(40_000_000n);
    expect(await balanceOf("USDC", ws.eoaAddress)).toBe(10_000_000n);
    expect(await sentCount(ws.eoaAddress)).toBe(sentBefore + 1);
    const after = await getPayment(ws, paid.id);
    expect(after).toMatchObject({ status: "forwarded", refundedAmount: "40.00", amountReceived: null });

    // Nothing is left to refund.
    const none = await refund(ws, paid.id, {});
    expect(none.statusCode, none.body).toBe(400);
    expect(none.json()).toMatchObject({ error: "Refund exceeds the refundable amount", refundable: "0.00" });

    // The payment's refunds, oldest first, as the POSTs answered them.
    const listed = await api(ws, "GET", `/api/v1/payments/${paid.id}/refunds`);
    expect(listed.statusCode, listed.body).toBe(200);
    expect(listed.json()).toMatchObject({ total: 2, refunds: [one, two] });

    // Each refund's transaction recorded (purpose refund, named by the refund) and mined.
    const sent = (await chainTransactionsFrom(ws.eoaAddress)).filter((tx) => tx.purpose === "refund");
    expect(sent.map((tx) => [tx.tx_hash, tx.status, tx.payout_id, tx.amount])).toEqual([
      [one.txHash, "mined", one.id, "15250000"],
      [two.txHash, "mined", two.id, "24750000"],
    ]);
    // refund.completed, once each, delivered with the refund as its data.
    for (const r of [one, two]) {
      const delivery = await deliveredCompletion(r.id as string, secret);
      expect(delivery.json).toEqual({ event: "refund.completed", data: r });
    }
    expect(await outboxOf(ws, "refund.completed")).toHaveLength(2);
    expect(await outboxOf(ws, "refund.failed")).toEqual([]);
    // A refund is not a payout: the payout history stays empty.
    const payouts = await api(ws, "GET", "/api/v1/payouts");
    expect(payouts.json()).toMatchObject({ total: 0 });
  }, 180_000);

  it("an ETH refund: the destination gets exactly the amount, the EOA pays the amount and the receipt's gas", async () => {
    const { ws, secret } = await workspaceWithGas("1");
    const payer = await newPayer();
    const paid = await forwardedPayment(ws, payer, "ETH", "0.5");

    // To an address of the merchant's choosing.
    const destination = randomAddress();
    const eoaBefore = await balanceOf("ETH", ws.eoaAddress);
    const res = await refund(ws, paid.id, { amount: "0.2", destinationAddress: destination });
    expect(res.statusCode, res.body).toBe(201);
    const partial = res.json().refund as Json;
    expect(partial).toMatchObject({
      paymentId: paid.id,
      amount: "0.20",
      tokenSymbol: "ETH",
      destinationAddress: destination,
      status: "completed",
      txHash: expect.stringMatching(TX_HASH),
    });
    const gas = await expectEoaTransfer(
      "ETH",
      partial.txHash as string,
      ws.eoaAddress,
      destination,
      parseEther("0.2"),
    );
    expect(gas).toBeGreaterThan(0n);
    expect(await balanceOf("ETH", destination)).toBe(parseEther("0.2"));
    expect(await balanceOf("ETH", ws.eoaAddress)).toBe(eoaBefore - parseEther("0.2") - gas);

    // The rest, to the payer (who sends nothing meanwhile): exactly 0.3 more.
    const payerBefore = await balanceOf("ETH", payer.address);
    const eoaMid = await balanceOf("ETH", ws.eoaAddress);
    const rest = await refund(ws, paid.id);
    expect(rest.statusCode, rest.body).toBe(201);
    const full = rest.json().refund as Json;
    expect(full).toMatchObject({ amount: "0.30", tokenSymbol: "ETH", status: "completed" });
    expect(same(full.destinationAddress, payer.address)).toBe(true);
    const gas2 = await expectEoaTransfer(
      "ETH",
      full.txHash as string,
      ws.eoaAddress,
      payer.address,
      parseEther("0.3"),
    );
    expect((await balanceOf("ETH", payer.address)) - payerBefore).toBe(parseEther("0.3"));
    expect(await balanceOf("ETH", ws.eoaAddress)).toBe(eoaMid - parseEther("0.3") - gas2);
    expect((await getPayment(ws, paid.id)).refundedAmount).toBe("0.50");
    for (const r of [partial, full]) {
      const delivery = await deliveredCompletion(r.id as string, secret);
      expect(delivery.json).toEqual({ event: "refund.completed", data: r });
    }
  }, 180_000);

  it("a refund the EOA cannot pay → 400 Insufficient balance: nothing sent, nothing taken, the key left free", async () => {
    const { ws } = await workspaceWithGas();
    const payer = await newPayer();
    const paid = await forwardedPayment(ws, payer, "USDC", "20");
    expect(await balanceOf("USDC", ws.eoaAddress)).toBe(0n); // the payment's money was forwarded

    const sentBefore = await sentCount(ws.eoaAddress);
    const payerBefore = await balanceOf("USDC", payer.address);
    const res = await refund(ws, paid.id, { amount: "5" }, "short-1");
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({
      error: "Insufficient balance",
      available: "0.00",
      requested: "5.00",
      tokenSymbol: "USDC",
    });
    expect(await sentCount(ws.eoaAddress)).toBe(sentBefore);
    expect(await balanceOf("USDC", payer.address)).toBe(payerBefore);
    expect((await getPayment(ws, paid.id)).refundedAmount).toBe("0.00");
    const listed = await api(ws, "GET", `/api/v1/payments/${paid.id}/refunds`);
    expect(listed.json()).toMatchObject({ total: 0, refunds: [] });
    expect((await chainTransactionsFrom(ws.eoaAddress)).filter((tx) => tx.purpose === "refund")).toEqual([]);
    expect(await outboxOf(ws, "refund.failed")).toEqual([]);
    // A balance pre-check is not a failed transfer (D13): the breaker counted nothing.
    const state = await api(ws, "GET", `/api/v1/workspaces/${ws.id}/payout-state`);
    expect(state.json()).toMatchObject({ status: "active", failStreak: 0 });

    // Once the wallet holds the money, the same key and body refund it (the refusal took nothing).
    await mintToken(devnet, "USDC", ws.eoaAddress as Address, "5");
    const again = await refund(ws, paid.id, { amount: "5" }, "short-1");
    expect(again.statusCode, again.body).toBe(201);
    expect(again.json().refund).toMatchObject({ amount: "5.00", status: "completed" });
    expect((await balanceOf("USDC", payer.address)) - payerBefore).toBe(5_000_000n);
    expect(await balanceOf("USDC", ws.eoaAddress)).toBe(0n);
    expect((await getPayment(ws, paid.id)).refundedAmount).toBe("5.00");
  }, 180_000);
});

describe("refunds that fail, and the circuit breaker (D6, D13, issue 36)", () => {
  it("a refund its recipient refuses is failed: nothing sent, its amount given back, refund.failed; not counted", async () => {
    const { ws } = await workspaceWithGas("1");
    const payer = await newPayer();
    const paid = await forwardedPayment(ws, payer, "ETH", "0.5");
    // An ERC-20 contract has no payable fallback: ETH sent to it reverts, and the node's estimate
    // says so before anything is signed.
    const contract = devnet.tokens.USDC;
    const contractBefore = await balanceOf("ETH", contract);
    const sentBefore = await sentCount(ws.eoaAddress);
    const eoaBefore = await balanceOf("ETH", ws.eoaAddress);
    const failedRefunds: Json[] = [];
    for (let i = 1; i <= 3; i++) {
      const res = await refund(ws, paid.id, { amount: "0.01", destinationAddress: contract });
      expect(res.statusCode, res.body).toBe(201);
      const body = res.json();
      expect(body.refund).toMatchObject({ amount: "0.01", status: "failed", txHash: null });
      expect(body.refund.error).toMatch(/^the recipient's code refuses ETH/);
      failedRefunds.push(body.refund as Json);
      expect((await getPayment(ws, paid.id)).refundedAmount).toBe("0.00");
      // Its recipient's doing, not the workspace's sending: the breaker counts nothing.
      const state = await api(ws, "GET", `/api/v1/workspaces/${ws.id}/payout-state`);
      expect(state.json()).toMatchObject({ status: "active", failStreak: 0 });
    }
    // Not a transaction, not a wei of gas.
    expect(await sentCount(ws.eoaAddress)).toBe(sentBefore);
    expect(await balanceOf("ETH", ws.eoaAddress)).toBe(eoaBefore);
    expect(await balanceOf("ETH", contract)).toBe(contractBefore);
    for (const r of failedRefunds) {
      const [delivery] = await receiver.waitFor(
        1,
        (q) => q.json.event === "refund.failed" && (q.json.data as Json | undefined)?.id === r.id,
        30_000,
      );
      expect(delivery?.json).toMatchObject({ event: "refund.failed", data: { id: r.id, status: "failed" } });
    }
    expect(await outboxOf(ws, "refund.failed")).toHaveLength(3);

    // Refunds go on (the whole amount is refundable again).
    const payerBefore = await balanceOf("ETH", payer.address);
    const ok = await refund(ws, paid.id, { amount: "0.1" });
    expect(ok.statusCode, ok.body).toBe(201);
    expect(ok.json().refund).toMatchObject({ amount: "0.10", status: "completed" });
    expect((await balanceOf("ETH", payer.address)) - payerBefore).toBe(parseEther("0.1"));
    expect((await getPayment(ws, paid.id)).refundedAmount).toBe("0.10");
    const state = await api(ws, "GET", `/api/v1/workspaces/${ws.id}/payout-state`);
    expect(state.json()).toMatchObject({ status: "active", failStreak: 0 });
  }, 180_000);
});

describe("a refund from the smart wallet", () => {
  it("is one sponsored user operation: the smart wallet loses exactly the amount, the payer gets it, userOpHash", async () => {
    const ws = await createWorkspace(t);
    const secret = await registerWebhook(ws);
    // The smart wallet is the workspace's default: payments are received and refunds sent there.
    const wallet = await api(ws, "POST", `/api/v1/workspaces/${ws.id}/smart-wallet`, { setDefault: true });
    expect([200, 201], wallet.body).toContain(wallet.statusCode);
    expect(wallet.json().defaultWalletType).toBe("smart_wallet");
    const smart = wallet.json().smartWallet.address as Address;
    const payer = await newPayer();
    const paid = await forwardedPayment(ws, payer, "USDC", "25");
    expect(paid.receivingAddress).toBe(smart);
    expect(await balanceOf("USDC", smart)).toBe(0n);
    await mintToken(devnet, "USDC", smart, "30");

    const payerBefore = await balanceOf("USDC", payer.address);
    const smartEthBefore = await balanceOf("ETH", smart);
    const eoaSent = await sentCount(ws.eoaAddress);
    const res = await refund(ws, paid.id, { amount: "12.5" }, "smart-1");
    expect(res.statusCode, res.body).toBe(201);
    const r = res.json().refund as Json;
    expect(r).toMatchObject({
      paymentId: paid.id,
      amount: "12.50",
      tokenSymbol: "USDC",
      status: "completed",
      txHash: expect.stringMatching(TX_HASH),
      userOpHash: expect.stringMatching(TX_HASH),
    });
    expect(same(r.destinationAddress, payer.address)).toBe(true);
    expect(r.userOpHash).not.toBe(r.txHash);

    // The transaction is the bundle that carried exactly this operation, paid by the paymaster.
    const op = await bundler.getUserOperationReceipt({ hash: r.userOpHash as Hex });
    expect(op.success).toBe(true);
    expect(op.receipt.transactionHash).toBe(r.txHash);
    expect(same(op.sender, smart)).toBe(true);
    expect(same(op.paymaster, aa.paymaster)).toBe(true);
    const receipt = await chain.getTransactionReceipt({ hash: r.txHash as Hex });
    expect(receipt.status).toBe("success");
    expect(same(receipt.to, aa.entryPoint)).toBe(true);
    expect(usdcTransfers(receipt.logs)).toEqual([
      [smart.toLowerCase(), payer.address.toLowerCase(), 12_500_000n],
    ]);
    expect((await balanceOf("USDC", payer.address)) - payerBefore).toBe(12_500_000n);
    expect(await balanceOf("USDC", smart)).toBe(30_000_000n - 12_500_000n);
    expect(await balanceOf("ETH", smart)).toBe(smartEthBefore); // sponsored
    expect(await sentCount(ws.eoaAddress)).toBe(eoaSent); // nothing left the EOA
    expect((await getPayment(ws, paid.id)).refundedAmount).toBe("12.50");

    const listed = await api(ws, "GET", `/api/v1/payments/${paid.id}/refunds`);
    expect(listed.json()).toMatchObject({ total: 1, refunds: [r] });
    const delivery = await deliveredCompletion(r.id as string, secret);
    expect(delivery.json).toEqual({ event: "refund.completed", data: r });
  }, 240_000);
});

describe("the unmatched inbox: attach", () => {
  it("an underpayment (99.50 of 100.00) attached to its payment settles what it carried, fee, net and split on it", async () => {
    const { ws } = await workspaceWithGas();
    const payer = await newPayer();
    const merchant = randomAddress();
    // A split of 25% of the net, in the payment's snapshot (D15): carved from what was received.
    const splitDestination = randomAddress();
    const splits = await api(ws, "PUT", "/api/v1/splits", {
      enabled: true,
      splits: [{ label: "partner", percentBps: 2500, destination: splitDestination }],
    });
    expect(splits.statusCode, splits.body).toBe(200);
    const created = await api(ws, "POST", "/api/v1/payments", {
      tokenSymbol: "USDC",
      amount: "100.00",
      merchantWallet: merchant,
    });
    expect(created.statusCode, created.body).toBe(201);
    const paymentId = created.json().payment.id as string;
    const received = 99_500_000n;
    const txHash = await payer.pay("USDC", created.json().receivingAddress as string, received);

    // It does not match the amount: it lands in the inbox, the payment stays pending.
    const transfer = await waitForUnmatched(ws, txHash);
    // Attached or returned once the chain confirms it (D19, as a payment is confirmed).
    await untilConfirmed(chain, txHash);
    expect(transfer).toMatchObject({
      id: expect.stringMatching(UUID),
      status: "open",
      paymentId: null,
      amount: "99.50",
      token: "USDC",
      to: ws.eoaAddress,
    });
    expect(same(transfer.from, payer.address)).toBe(true);
    expect((await getPayment(ws, paymentId)).status).toBe("pending");
    // A pending payment cannot be refunded.
    const early = await refund(ws, paymentId, {});
    expect(early.statusCode, early.body).toBe(400);

    const treasury = devnet.accounts.treasury.address;
    const treasuryBefore = await balanceOf("USDC", treasury);
    const attached = await attach(ws, transfer.id as string, paymentId);
    expect(attached.statusCode, attached.body).toBe(200);
    // By hand: fee = 99,500,000 × 150 / 10,000 = 1,492,500 units (1.4925 USDC, exact), net 98,007,500.
    const expected = carve(received);
    expect(expected).toEqual({ gross: 99_500_000n, fee: 1_492_500n, net: 98_007_500n });
    expect(attached.json().transfer).toMatchObject({ id: transfer.id, status: "attached", paymentId });
    expect(attached.json().payment).toMatchObject({
      id: paymentId,
      status: "detected",
      amountReceived: "99.50",
      feeAmount: fmt(expected.fee, "USDC"),
      netAmount: fmt(expected.net, "USDC"),
      txHash,
    });
    expect(same(attached.json().payment.payerAddress, payer.address)).toBe(true);

    const forwarded = await waitForStatus(ws, paymentId, "forwarded");
    expect(forwarded).toMatchObject({
      amountReceived: "99.50",
      feeAmount: "1.4925",
      netAmount: "98.0075",
      refundedAmount: "0.00",
    });
    // The split: floor(98,007,500 × 2,500 / 10,000) = 24,501,875; the merchant the rest, 73,505,625.
    const split = (expected.net * 2_500n) / WHOLE;
    expect(split).toBe(24_501_875n);
    expect(await balanceOf("USDC", splitDestination)).toBe(split);
    expect(await balanceOf("USDC", merchant)).toBe(expected.net - split);
    expect((await balanceOf("USDC", treasury)) - treasuryBefore).toBe(expected.fee);
    expect(await balanceOf("USDC", ws.eoaAddress)).toBe(0n);
    // Once only; and it lists as attached to its payment.
    const twice = await attach(ws, transfer.id as string, paymentId);
    expect(twice.statusCode, twice.body).toBe(409);
    expect((await unmatched(ws)).find((u) => u.id === transfer.id)).toMatchObject({
      status: "attached",
      paymentId,
    });
    // Its refund base is what it received: 99.50, not 100.00 (checked before anything is sent).
    const over = await refund(ws, paymentId, { amount: "99.51" });
    expect(over.statusCode, over.body).toBe(400);
    expect(over.json()).toMatchObject({ error: "Refund exceeds the refundable amount", refundable: "99.50" });
    // Its settlement reports what was settled: gross = fee + net = what the transfer carried.
    const settlements = await api(ws, "GET", `/api/v1/settlements?paymentId=${paymentId}`);
    expect(settlements.json()).toMatchObject({
      total: 1,
      settlements: [
        {
          grossAmount: "99.50",
          feeAmount: "1.4925",
          netAmount: "98.0075",
          merchantAmount: "73.505625",
          splits: [{ amount: "24.501875", destination: splitDestination.toLowerCase(), status: "sent" }],
        },
      ],
    });
  }, 180_000);

  it("a payment made after its payment expired, attached to it, is forwarded", async () => {
    const { ws } = await workspaceWithGas();
    const payer = await newPayer();
    const merchant = randomAddress();
    const created = await api(ws, "POST", "/api/v1/payments", {
      tokenSymbol: "USDC",
      amount: "12.34",
      merchantWallet: merchant,
      expiresInMinutes: 1,
    });
    expect(created.statusCode, created.body).toBe(201);
    const paymentId = created.json().payment.id as string;
    // The expiry job, run as at a second past the payment's expiry.
    const expiresAt = Date.parse(created.json().payment.expiresAt as string);
    expect(await expireDuePayments(t.app.ctx.db, new Date(expiresAt + 1_000))).toBeGreaterThanOrEqual(1);
    expect((await getPayment(ws, paymentId)).status).toBe("expired");

    // The exact amount, too late: unmatched, the payment stays expired.
    const gross = 12_340_000n;
    const txHash = await payer.pay("USDC", ws.eoaAddress, gross);
    const transfer = await waitForUnmatched(ws, txHash);
    // Attached or returned once the chain confirms it (D19, as a payment is confirmed).
    await untilConfirmed(chain, txHash);
    expect(transfer).toMatchObject({ status: "open", amount: "12.34", paymentId: null });
    expect((await getPayment(ws, paymentId)).status).toBe("expired");

    const treasury = devnet.accounts.treasury.address;
    const treasuryBefore = await balanceOf("USDC", treasury);
    const attached = await attach(ws, transfer.id as string, paymentId);
    expect(attached.statusCode, attached.body).toBe(200);
    expect(attached.json().payment).toMatchObject({ status: "detected", amountReceived: "12.34" });
    await waitForStatus(ws, paymentId, "forwarded");
    const expected = carve(gross);
    expect(await balanceOf("USDC", merchant)).toBe(expected.net);
    expect((await balanceOf("USDC", treasury)) - treasuryBefore).toBe(expected.fee);
    expect(await balanceOf("USDC", ws.eoaAddress)).toBe(0n);
  }, 180_000);
});

describe("the unmatched inbox: return", () => {
  it("a stray transfer returned goes back to its sender exactly once; the transfer shows returned", async () => {
    const { ws, secret } = await workspaceWithGas();
    const payer = await newPayer();
    const stray = 7_770_000n;
    const txHash = await payer.pay("USDC", ws.eoaAddress, stray);
    const transfer = await waitForUnmatched(ws, txHash);
    // Attached or returned once the chain confirms it (D19, as a payment is confirmed).
    await untilConfirmed(chain, txHash);
    expect(transfer).toMatchObject({ status: "open", amount: "7.77", token: "USDC", paymentId: null });
    expect(same(transfer.from, payer.address)).toBe(true);

    const payerBefore = await balanceOf("USDC", payer.address);
    const sentBefore = await sentCount(ws.eoaAddress);
    const res = await returnTransfer(ws, transfer.id as string, { reason: "not ours" }, "return-1");
    expect(res.statusCode, res.body).toBe(201);
    const r = res.json().refund as Json;
    expect(r).toMatchObject({
      id: expect.stringMatching(UUID),
      paymentId: null,
      amount: "7.77",
      tokenSymbol: "USDC",
      status: "completed",
      txHash: expect.stringMatching(TX_HASH),
      reason: "not ours",
    });
    expect(same(r.destinationAddress, payer.address)).toBe(true);
    await expectEoaTransfer("USDC", r.txHash as string, ws.eoaAddress, payer.address, stray);
    expect((await balanceOf("USDC", payer.address)) - payerBefore).toBe(stray);
    expect(await balanceOf("USDC", ws.eoaAddress)).toBe(0n);
    expect(await sentCount(ws.eoaAddress)).toBe(sentBefore + 1);
    expect((await unmatched(ws)).find((u) => u.id === transfer.id)).toMatchObject({
      status: "returned",
      paymentId: null,
    });

    // The same key: the same return, nothing sent. Without it: already returned (409), nothing sent.
    const replay = await returnTransfer(ws, transfer.id as string, { reason: "not ours" }, "return-1");
    expect(replay.statusCode, replay.body).toBe(201);
    expect(replay.json().refund).toEqual(r);
    const again = await returnTransfer(ws, transfer.id as string, {});
    expect(again.statusCode, again.body).toBe(409);
    // Nor can a returned transfer be attached afterwards.
    const pending = await api(ws, "POST", "/api/v1/payments", {
      tokenSymbol: "USDC",
      amount: "7.77",
      merchantWallet: randomAddress(),
    });
    expect(pending.statusCode, pending.body).toBe(201);
    const late = await attach(ws, transfer.id as string, pending.json().payment.id as string);
    expect(late.statusCode, late.body).toBe(409);
    expect((await getPayment(ws, pending.json().payment.id as string)).status).toBe("pending");
    expect(await sentCount(ws.eoaAddress)).toBe(sentBefore + 1);
    expect((await balanceOf("USDC", payer.address)) - payerBefore).toBe(stray);

    const sent = (await chainTransactionsFrom(ws.eoaAddress)).filter((tx) => tx.purpose === "return");
    expect(sent.map((tx) => [tx.tx_hash, tx.status, tx.payout_id, tx.amount])).toEqual([
      [r.txHash, "mined", r.id, "7770000"],
    ]);
    const delivery = await deliveredCompletion(r.id as string, secret);
    expect(delivery.json).toEqual({ event: "refund.completed", data: r });
  }, 180_000);
});

describe("refund events in webhook registrations (D20)", () => {
  it("a webhook can subscribe to refund.completed and refund.failed by name", async () => {
    const ws = await createWorkspace(t);
    const res = await api(ws, "POST", "/api/v1/webhooks", {
      url: receiver.url,
      events: ["refund.completed", "refund.failed"],
    });
    expect(res.statusCode, res.body).toBe(201);
    expect([...(res.json().webhook.events as string[])].sort()).toEqual([
      "refund.completed",
      "refund.failed",
    ]);
  });
});
