import { type Address, erc20Abi, type Hex, keccak256, type PublicClient, parseEther, toHex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Devnet, mine, rpc } from "../../src/devnet/chain.ts";
import { type CreatedWorkspace, createWorkspace, type TestApp } from "../support/app.ts";
import { TEST_CONFIRMATIONS } from "../support/confirmations.ts";
import type { DevnetClients } from "../support/devnet-clients.ts";
import { LIVE_DEFAULT } from "../support/devnet-env.ts";
import { type OnrampLive, onrampActors, startOnrampLive } from "../support/onramp-live.ts";

// Fiat on-ramp sessions (D17) for real on the devnet, the chain job running: sessions made at a
// local fake card provider (through the stripe SDK), moved by its signed events, delivered by a
// real transfer from the provider's own wallet to the workspace EOA. A session is credited what
// the chain shows reached the wallet, at the network's confirmations, once (`onramp.completed`);
// the transfer is not a payment, whether the event names it before or after the chain has it.
// Event handling without a chain (replays, order, signatures, refusals): events.test.ts.

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

let h: OnrampLive;
let fake: OnrampLive["fake"];
let devnet: Devnet;
let t: TestApp;
let clients: DevnetClients;
let chain: PublicClient;
/** The provider's hot wallet: what it delivers on-ramped crypto from. */
let hot: OnrampLive["hot"];

const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
const same = (a: unknown, b: string) => typeof a === "string" && a.toLowerCase() === b.toLowerCase();
const {
  api,
  deliver,
  moved,
  opened,
  getSession,
  until,
  watcherPassed,
  pendingPayment,
  getPayment,
  inInbox,
  delivery,
  onrampEvents,
  statusesOf,
} = onrampActors(() => h);

beforeAll(async () => {
  h = await startOnrampLive();
  ({ fake, devnet, t, clients, chain, hot } = h);
}, 180_000);

afterAll(async () => {
  await h?.stop();
});

// ---- helpers -------------------------------------------------------------------------------------

const credited = (ws: CreatedWorkspace, id: string) =>
  until(
    `session ${id} credited`,
    () => getSession(ws, id),
    (s) => s.creditedAmount !== null,
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
    await t.app.services.onramp.confirm(LIVE_DEFAULT);
  }
}

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
      await t.app.services.onramp.confirm(LIVE_DEFAULT);
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
