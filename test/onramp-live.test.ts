import type { InjectOptions, LightMyRequestResponse } from "fastify";
import {
  type Address,
  type Chain,
  createWalletClient,
  erc20Abi,
  type Hex,
  http,
  keccak256,
  type PublicClient,
  parseEther,
  type Transport,
  toHex,
  type WalletClient,
} from "viem";
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Devnet, mine, rpc, startDevnet } from "../src/devnet/chain.ts";
import { createWorkers, type Workers } from "../src/workers.ts";
import { bearer, type CreatedWorkspace, createWorkspace, startTestApp, type TestApp } from "./support/app.ts";
import { TEST_CONFIRMATIONS } from "./support/confirmations.ts";
import { type DevnetClients, devnetClients } from "./support/devnet-clients.ts";
import { liveNetworkEnv } from "./support/devnet-env.ts";
import {
  FakeCardProvider,
  type OnrampDelivery,
  type OnrampSessionObject,
} from "./support/fake-card-provider.ts";

// Fiat on-ramp sessions (D17) for real on the devnet, the chain job running: sessions made at a
// local fake card provider (through the stripe SDK), moved by its signed events, delivered by a
// real transfer from the provider's own wallet to the workspace EOA. A session is credited what
// the chain shows reached the wallet, at the network's confirmations, once (`onramp.completed`);
// the transfer is not a payment, whether the event names it before or after the chain has it.
// Event handling without a chain (replays, order, signatures, refusals): onramp-events.test.ts.

type Json = Record<string, unknown>;

const LIVE_SK = "sk_test_onrampLiveKey0123456789";
const LIVE_WHSEC = "whsec_onramp_live_secret_0123456789abcdef";
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const fake = new FakeCardProvider();
let devnet: Devnet;
let t: TestApp;
let workers: Workers;
let clients: DevnetClients;
let chain: PublicClient;
/** The provider's hot wallet: what it delivers on-ramped crypto from. */
let hot: WalletClient<Transport, Chain, PrivateKeyAccount>;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
const same = (a: unknown, b: string) => typeof a === "string" && a.toLowerCase() === b.toLowerCase();

beforeAll(async () => {
  await fake.start();
  devnet = await startDevnet({});
  // No periodic gas top-ups (threshold 0): the EOA's ETH changes only by what is delivered to it.
  t = await startTestApp({
    ...liveNetworkEnv(devnet, { LIVE_GAS_TOPUP_THRESHOLD_WEI: "0" }),
    CARD_SECRET_KEY_LIVE: LIVE_SK,
    CARD_WEBHOOK_SECRET_LIVE: LIVE_WHSEC,
    CARD_API_BASE: fake.url,
  });
  clients = devnetClients(devnet);
  chain = clients.chain;
  const account = privateKeyToAccount(generatePrivateKey());
  hot = createWalletClient({ account, chain: devnet.chain, transport: http(devnet.rpcUrl) });
  await clients.fund(account.address, { USDC: "10000", ETH: "100" });
  workers = createWorkers(t.app, { dispatcher: { pollIntervalMs: 50 } });
  workers.start();
}, 180_000);

afterAll(async () => {
  await workers?.stop();
  await t?.close();
  await devnet?.stop();
  await fake.stop();
});

// ---- helpers -------------------------------------------------------------------------------------

const api = (ws: CreatedWorkspace, method: InjectOptions["method"], url: string, payload?: Json) =>
  t.request({ method, url, headers: bearer(ws.liveKey), ...(payload ? { payload } : {}) });

function deliver(signed: { payload: string; header: string }): Promise<LightMyRequestResponse> {
  return t.request({
    method: "POST",
    url: "/api/webhooks/card",
    headers: { "content-type": "application/json", "stripe-signature": signed.header },
    payload: signed.payload,
  });
}

/** The provider moves the session, then sends its event (accepted, first seen). */
async function moved(
  providerId: string,
  status: OnrampSessionObject["status"],
  facts: Parameters<FakeCardProvider["setOnrampStatus"]>[2] = {},
) {
  fake.setOnrampStatus(providerId, status, facts);
  const res = await deliver(fake.sign(fake.onrampUpdated(providerId, { livemode: true }), LIVE_WHSEC));
  expect(res.statusCode, res.body).toBe(200);
  expect(res.json()).toEqual({ received: true });
}

/** A session (201) and the provider's session made for it. */
async function opened(ws: CreatedWorkspace, body: Json, headers: Record<string, string> = {}) {
  const res = await t.request({
    method: "POST",
    url: "/api/v1/onramp/session",
    headers: { ...bearer(ws.liveKey), ...headers },
    payload: body,
  });
  expect(res.statusCode, res.body).toBe(201);
  const session = res.json() as Json;
  const provider = [...fake.onrampSessions.values()].find((s) => s.metadata.onrampId === session.id);
  if (!provider) throw new Error("the provider made no session");
  return { session, provider };
}

async function getSession(ws: CreatedWorkspace, id: string): Promise<Json> {
  const res = await api(ws, "GET", `/api/v1/onramp/sessions/${id}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as Json;
}

/** Polls (bounded) until `read` gives what `done` accepts. */
async function until<T>(what: string, read: () => Promise<T>, done: (v: T) => boolean, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`${what}: still ${JSON.stringify(value)} after ${timeoutMs} ms`);
    await sleep(100);
  }
}

const credited = (ws: CreatedWorkspace, id: string) =>
  until(
    `session ${id} credited`,
    () => getSession(ws, id),
    (s) => s.creditedAmount !== null,
  );

/** Until the chain watcher has scanned block `block` (its cursor is there or beyond). */
const watcherPassed = (block: bigint) =>
  until(
    `the watcher at block ${block}`,
    async () => {
      const row = await t.database.db
        .selectFrom("chain_cursors")
        .select("block_number")
        .where("environment", "=", "live")
        .executeTakeFirst();
      return row ? BigInt(String(row.block_number)) : -1n;
    },
    (at) => at >= block,
  );

/** Waits `blocks` new blocks, running the confirmation (the chain job's step) after each. */
async function confirmationRounds(blocks: number) {
  for (let i = 0; i < blocks; i++) {
    const head = await chain.getBlockNumber();
    await until(
      "a new block",
      () => chain.getBlockNumber(),
      (n) => n > head,
      30_000,
    );
    await t.app.services.onramp.confirm("live");
  }
}

/** The workspace's onramp.* events: `type:status` (the completion by its type), and their data. */
async function onrampEvents(ws: CreatedWorkspace) {
  const rows = await t.database.db
    .selectFrom("outbox_events")
    .select(["event_type", "payload"])
    .where("workspace_id", "=", ws.id)
    .where("event_type", "like", "onramp.%")
    .orderBy("id")
    .execute();
  return rows.map((r) => {
    const data = r.payload as Json;
    const type =
      r.event_type === "onramp.completed" ? r.event_type : `${r.event_type}:${String(data.status)}`;
    return { type, data };
  });
}

const statusesOf = async (ws: CreatedWorkspace) => (await onrampEvents(ws)).map((e) => e.type);

/** A pending crypto payment of `amount` USDC, paid to the workspace EOA, for a merchant of its own. */
async function pendingPayment(ws: CreatedWorkspace, amount: string) {
  const merchant = randomAddress();
  const res = await api(ws, "POST", "/api/v1/payments", {
    tokenSymbol: "USDC",
    amount,
    merchantWallet: merchant,
  });
  expect(res.statusCode, res.body).toBe(201);
  expect(res.json().receivingAddress).toBe(ws.eoaAddress);
  return { id: res.json().payment.id as string, merchant };
}

async function getPayment(ws: CreatedWorkspace, id: string): Promise<Json> {
  const res = await api(ws, "GET", `/api/v1/payments/${id}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json().payment as Json;
}

const inInbox = async (ws: CreatedWorkspace, txHash: string) => {
  const res = await api(ws, "GET", "/api/v1/transfers/unmatched?limit=100");
  expect(res.statusCode, res.body).toBe(200);
  return (res.json().transfers as Json[]).filter((u) => same(u.txHash, txHash));
};

const delivery = (units: bigint, extra: Partial<OnrampDelivery> = {}): OnrampDelivery => ({
  wallet: hot,
  chain,
  usdc: devnet.tokens.USDC,
  units,
  livemode: true,
  secret: LIVE_WHSEC,
  ...extra,
});

// ---- tests ---------------------------------------------------------------------------------------

describe("a live on-ramp session, end to end on the devnet", () => {
  it("goes initialized → requires_payment → fulfillment_processing → fulfillment_complete and is credited what the chain moved, once", async () => {
    const ws = await createWorkspace(t);
    // A payment of the same amount on the same wallet, waiting for a payer.
    const { id: paymentId } = await pendingPayment(ws, "25.00");
    const { session, provider } = await opened(
      ws,
      { destinationCurrency: "USDC", destinationAmount: "25.00" },
      { "x-forwarded-for": "203.0.113.9" },
    );
    const id = session.id as string;
    expect(fake.onrampCalls("create").at(-1)?.form).toMatchObject({
      "wallet_addresses[ethereum]": ws.eoaAddress,
      lock_wallet_address: "true",
      // The request's own address (inject's 127.0.0.1), not the header the client sent.
      customer_ip_address: "127.0.0.1",
      destination_currency: "usdc",
      destination_network: "ethereum",
      destination_amount: "25.00",
    });
    expect(session).toMatchObject({ status: "initialized", walletAddress: ws.eoaAddress, walletType: "eoa" });

    await moved(provider.id, "requires_payment");
    await moved(provider.id, "fulfillment_processing");
    expect((await getSession(ws, id)).status).toBe("fulfillment_processing");

    const before = await clients.usdcBalance(ws.eoaAddress);
    // The event names the transaction before the chain has it: the watcher knows it for an on-ramp's.
    const units = 25_000_000n;
    const fulfilment = await fake.fulfilAnnouncedFirst(
      provider.id,
      delivery(units, { destinationAmount: "25.00" }),
    );
    expect((await deliver(fulfilment.delivery)).json()).toEqual({ received: true });
    expect(await getSession(ws, id)).toMatchObject({
      status: "fulfillment_complete",
      transactionId: fulfilment.txHash,
      creditedAmount: null,
      completedAt: null,
    });
    // Blocks only when asked (and for transactions), so that the transfer's depth is the test's.
    await rpc(devnet.rpcUrl, "evm_setIntervalMining", [0]);
    let block: bigint;
    try {
      block = await fulfilment.broadcast();
      // One confirmation of the two the network asks for: not yet.
      await t.app.services.onramp.confirm("live");
      expect(await chain.getBlockNumber()).toBe(block);
      expect((await getSession(ws, id)).creditedAmount).toBeNull();
      await mine(devnet, Number(TEST_CONFIRMATIONS) - 1);
    } finally {
      await rpc(devnet.rpcUrl, "evm_setIntervalMining", [1000]);
    }
    const done = await credited(ws, id);
    expect(done).toMatchObject({
      status: "fulfillment_complete",
      transactionId: fulfilment.txHash,
      destinationAmount: "25.00",
      creditedAmount: "25.00",
      completedAt: expect.stringMatching(ISO),
    });
    expect((await clients.usdcBalance(ws.eoaAddress)) - before).toBe(units);

    await watcherPassed(block);
    await confirmationRounds(2);
    expect(await statusesOf(ws)).toEqual([
      "onramp.session.updated:requires_payment",
      "onramp.session.updated:fulfillment_processing",
      "onramp.session.updated:fulfillment_complete",
      "onramp.completed",
    ]);
    const { clientSecret: _secret, ...publicView } = await getSession(ws, id);
    expect((await onrampEvents(ws)).at(-1)?.data).toEqual(publicView);
    // Not a payment: the payment of the same amount waits on, and the inbox does not have it.
    expect((await getPayment(ws, paymentId)).status).toBe("pending");
    expect(await inInbox(ws, fulfilment.txHash)).toEqual([]);
    expect((await clients.usdcBalance(ws.eoaAddress)) - before).toBe(units);
  }, 180_000);

  it("in the provider's usual order (chain first): a delivery the watcher put in the inbox becomes the session's, not actionable", async () => {
    const ws = await createWorkspace(t);
    const { session, provider } = await opened(ws, {
      destinationCurrency: "USDC",
      destinationAmount: "7.77",
    });
    await moved(provider.id, "fulfillment_processing");
    const fulfilment = await fake.fulfil(provider.id, delivery(7_770_000n, { destinationAmount: "7.77" }));
    // The watcher scans the block before the provider's event arrives: an unexplained transfer.
    await watcherPassed(fulfilment.blockNumber);
    const [seen] = await until(
      "the inbox",
      () => inInbox(ws, fulfilment.txHash),
      (l) => l.length > 0,
      30_000,
    );
    expect(seen).toMatchObject({ status: "open", amount: "7.77", token: "USDC" });
    expect((await deliver(fulfilment.delivery)).json()).toEqual({ received: true });
    // Named by the provider, it is the session's: no longer the merchant's to attach or return.
    expect((await inInbox(ws, fulfilment.txHash)).map((u) => u.status)).toEqual(["onramp"]);
    const back = await api(ws, "POST", `/api/v1/transfers/unmatched/${String(seen?.id)}/return`, {});
    expect(back.statusCode, back.body).toBe(409);
    expect(await credited(ws, session.id as string)).toMatchObject({ creditedAmount: "7.77" });
    await confirmationRounds(1);
    expect(await statusesOf(ws)).toEqual([
      "onramp.session.updated:fulfillment_processing",
      "onramp.session.updated:fulfillment_complete",
      "onramp.completed",
    ]);
  }, 180_000);

  it("in the provider's usual order (chain first): a pending payment of the same amount on the wallet stays pending", async () => {
    const ws = await createWorkspace(t);
    const { id: paymentId, merchant } = await pendingPayment(ws, "30.00");
    const { session, provider } = await opened(ws, {
      destinationCurrency: "USDC",
      destinationAmount: "30.00",
    });
    await moved(provider.id, "fulfillment_processing");
    const fulfilment = await fake.fulfil(provider.id, delivery(30_000_000n, { destinationAmount: "30.00" }));
    await watcherPassed(fulfilment.blockNumber);
    expect((await deliver(fulfilment.delivery)).json()).toEqual({ received: true });
    const done = await credited(ws, session.id as string);
    await confirmationRounds(Number(TEST_CONFIRMATIONS) + 1);
    // What became of the 30 USDC: the session's credit, on the workspace EOA — and (it must not be) a
    // payment's, forwarded to the merchant.
    const payment = await getPayment(ws, paymentId);
    const observed = {
      sessionCredited: done.creditedAmount,
      payment: payment.status,
      paymentPaidByTheOnrampTransaction: same(payment.txHash, fulfilment.txHash),
      workspaceUsdc: await clients.usdcBalance(ws.eoaAddress),
      merchantUsdc: await clients.usdcBalance(merchant),
    };
    expect(observed).toEqual({
      sessionCredited: "30.00",
      payment: "pending",
      paymentPaidByTheOnrampTransaction: false,
      workspaceUsdc: 30_000_000n,
      merchantUsdc: 0n,
    });
  }, 180_000);

  it("credits an ETH session what reached the wallet, not what the provider says it delivered", async () => {
    const ws = await createWorkspace(t);
    const { session, provider } = await opened(ws, { destinationCurrency: "ETH", sourceAmount: "60.00" });
    expect(fake.onrampCalls("create").at(-1)?.form).toMatchObject({
      destination_currency: "eth",
      source_amount: "60.00",
    });
    const before = await chain.getBalance({ address: ws.eoaAddress as Address });
    const units = parseEther("0.015");
    const fulfilment = await fake.fulfilAnnouncedFirst(
      provider.id,
      delivery(units, { destinationAmount: "0.02" }),
    );
    expect((await deliver(fulfilment.delivery)).json()).toEqual({ received: true });
    await fulfilment.broadcast();
    const done = await credited(ws, session.id as string);
    expect(done).toMatchObject({ destinationAmount: "0.02", creditedAmount: "0.015", sourceAmount: "60.00" });
    expect((await chain.getBalance({ address: ws.eoaAddress as Address })) - before).toBe(units);
    expect(await statusesOf(ws)).toEqual(["onramp.session.updated:fulfillment_complete", "onramp.completed"]);
  }, 120_000);
});

describe("sessions that are never credited", () => {
  it("a rejected session: one event; a delivery and fulfillment_complete after it change nothing", async () => {
    const ws = await createWorkspace(t);
    const { session, provider } = await opened(ws, { destinationCurrency: "USDC", sourceAmount: "15.00" });
    const id = session.id as string;
    await moved(provider.id, "rejected");
    const rejected = await getSession(ws, id);
    expect(rejected).toMatchObject({ status: "rejected", transactionId: null, creditedAmount: null });
    // The provider sends crypto anyway and says the session is fulfilled: too late.
    const fulfilment = await fake.fulfil(provider.id, delivery(15_000_000n));
    expect((await deliver(fulfilment.delivery)).json()).toEqual({ received: true });
    await confirmationRounds(Number(TEST_CONFIRMATIONS) + 1);
    expect(await getSession(ws, id)).toEqual(rejected);
    // Not the session's: a transfer nobody expected, the merchant's to return.
    await watcherPassed(fulfilment.blockNumber);
    expect((await inInbox(ws, fulfilment.txHash)).map((u) => u.status)).toEqual(["open"]);
    expect(await statusesOf(ws)).toEqual(["onramp.session.updated:rejected"]);
  }, 120_000);

  it("a transaction the chain does not have, or one that paid another wallet: fulfillment_complete recorded, never credited", async () => {
    const ws = await createWorkspace(t);
    const missing = await opened(ws, { destinationCurrency: "USDC", sourceAmount: "20.00" });
    const misdirected = await opened(ws, { destinationCurrency: "USDC", sourceAmount: "11.00" });
    const nowhere = keccak256(toHex(`no such transaction ${String(missing.session.id)}`));
    const elsewhere: Hex = await hot.writeContract({
      address: devnet.tokens.USDC,
      abi: erc20Abi,
      functionName: "transfer",
      args: [randomAddress(), 11_000_000n],
    });
    expect((await chain.waitForTransactionReceipt({ hash: elsewhere })).status).toBe("success");
    await moved(missing.provider.id, "fulfillment_complete", {
      transactionId: nowhere,
      destinationAmount: "20",
    });
    await moved(misdirected.provider.id, "fulfillment_complete", { transactionId: elsewhere });
    await confirmationRounds(Number(TEST_CONFIRMATIONS) + 2);
    for (const [{ session }, txHash] of [
      [missing, nowhere],
      [misdirected, elsewhere],
    ] as const) {
      expect(await getSession(ws, session.id as string)).toMatchObject({
        status: "fulfillment_complete",
        transactionId: txHash,
        creditedAmount: null,
        completedAt: null,
      });
    }
    expect(await statusesOf(ws)).toEqual([
      "onramp.session.updated:fulfillment_complete",
      "onramp.session.updated:fulfillment_complete",
    ]);
  }, 120_000);
});
