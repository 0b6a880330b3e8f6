import type { InjectOptions } from "fastify";
import { encodeFunctionData, erc20Abi, type Hex, parseUnits } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Devnet, mine, revert, snapshot, startDevnet } from "../../src/devnet/chain.ts";
import { OWN_WALLET_REASON } from "../../src/modules/payments/incoming/chain-watcher.ts";
import { createWorkers, type Workers } from "../../src/workers.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { type DevnetClients, devnetClients } from "../support/devnet-clients.ts";
import { liveNetworkEnv } from "../support/devnet-env.ts";
import { until, watcherPassed } from "../support/poll.ts";

// The unmatched inbox against a real chain (issue 36, items 3 and 5):
// - a transfer from one of the workspace's own wallets never pays one of its payments: it is an
//   inbox item, and it cannot be attached to a payment either;
// - an attachment whose transfer a reorganisation deeper than the confirmations drops is undone:
//   the payment waits again without the amount it was attached, the transfer is dropped, and
//   once mined again it is open and attached again (not recorded twice);
// - an open transfer a reorganisation drops before its confirmations is dropped (issue 39): attach
//   and return refuse it, and once mined again it is open and returned;
// - an open transfer's money is held from payouts until the merchant keeps it (issue 39).
// The merchant acts through an app with the devnet's 2 confirmations; the watcher runs in one that
// asks for 50, so that an attached payment stays detected while the chain is rewound.

type Json = Record<string, unknown>;
const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;

let devnet: Devnet;
let t: TestApp;
let watching: TestApp;
let workers: Workers;
let clients: DevnetClients;

beforeAll(async () => {
  devnet = await startDevnet({});
  t = await startTestApp(liveNetworkEnv(devnet));
  watching = await startTestApp(liveNetworkEnv(devnet, { LIVE_CONFIRMATIONS: "50" }), {
    database: t.database,
  });
  clients = devnetClients(devnet);
  workers = createWorkers(watching.app, { dispatcher: { pollIntervalMs: 50 } });
  workers.start();
}, 120_000);

afterAll(async () => {
  await workers?.stop();
  await watching?.close(true);
  await t?.close();
  await devnet?.stop();
});

const api = (ws: CreatedWorkspace, method: InjectOptions["method"], url: string, payload?: Json) =>
  t.request({ method, url, headers: bearer(ws.liveKey), ...(payload ? { payload } : {}) });

async function pendingPayment(ws: CreatedWorkspace, amount: string): Promise<string> {
  const res = await api(ws, "POST", "/api/v1/payments", {
    tokenSymbol: "USDC",
    amount,
    merchantWallet: randomAddress(),
    expiresInMinutes: 600,
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().payment.id as string;
}

async function payment(ws: CreatedWorkspace, id: string): Promise<Json> {
  const res = await api(ws, "GET", `/api/v1/payments/${id}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json().payment as Json;
}

const inbox = async (ws: CreatedWorkspace, txHash: string): Promise<Json[]> => {
  const res = await api(ws, "GET", "/api/v1/transfers/unmatched?limit=100");
  expect(res.statusCode, res.body).toBe(200);
  return (res.json().transfers as Json[]).filter(
    (u) => String(u.txHash).toLowerCase() === txHash.toLowerCase(),
  );
};

const attach = (ws: CreatedWorkspace, transferId: unknown, paymentId: string) =>
  api(ws, "POST", `/api/v1/transfers/unmatched/${String(transferId)}/attach`, { paymentId });

/** The payer's USDC transfer to the workspace EOA, signed and not sent: the same transaction can be mined again. */
async function signedUsdcTransfer(ws: CreatedWorkspace, amount: string): Promise<Hex> {
  return clients.payer.signTransaction(
    await clients.payer.prepareTransactionRequest({
      to: devnet.tokens.USDC,
      data: encodeFunctionData({
        abi: erc20Abi,
        functionName: "transfer",
        args: [ws.eoaAddress as Hex, parseUnits(amount, 6)],
      }),
      gas: 100_000n,
    }),
  );
}

/** Sends the signed `raw` transfer and waits for its item in the inbox. */
async function intoInbox(ws: CreatedWorkspace, raw: Hex): Promise<{ txHash: Hex; item: Json | undefined }> {
  const txHash = await clients.chain.sendRawTransaction({ serializedTransaction: raw });
  await seen(txHash);
  const [item] = await until(
    "the transfer in the inbox",
    () => inbox(ws, txHash),
    (l) => l.length > 0,
  );
  return { txHash, item };
}

/** Until the watcher has scanned the block of `txHash`. */
async function seen(txHash: Hex) {
  const { blockNumber } = await clients.chain.waitForTransactionReceipt({ hash: txHash });
  await watcherPassed(t.database.db, blockNumber);
}

describe("a transfer from the workspace's own wallet", () => {
  it("pays none of its payments and cannot be attached to one", async () => {
    const ws = await createWorkspace(t);
    // Not the payment's amount: money of its own to pay out.
    await clients.credit(ws.eoaAddress, { USDC: "7", ETH: "1" });
    const paymentId = await pendingPayment(ws, "5.00");
    // The workspace pays out to its own receiving wallet exactly what the payment asks.
    const payout = await api(ws, "POST", "/api/v1/payouts", {
      tokenSymbol: "USDC",
      amount: "5.00",
      destinationAddress: ws.eoaAddress,
    });
    expect(payout.statusCode, payout.body).toBe(200);
    const txHash = payout.json().payout.txHash as Hex;
    await seen(txHash);
    expect((await payment(ws, paymentId)).status).toBe("pending");
    const [item] = await inbox(ws, txHash);
    expect(item).toMatchObject({ status: "open", amount: "5.00", reason: OWN_WALLET_REASON });
    await mine(devnet, 2);
    const refused = await attach(ws, item?.id, paymentId);
    expect(refused.statusCode, refused.body).toBe(400);
    expect(refused.json().error).toContain("sent from a wallet of this workspace");
    expect((await payment(ws, paymentId)).status).toBe("pending");
  }, 60_000);
});

describe("an attachment a reorganisation undoes", () => {
  it("resets the payment's amounts, reopens the transfer, and the transfer mined again is attached again", async () => {
    const ws = await createWorkspace(t);
    const paymentId = await pendingPayment(ws, "30.00");
    const asked = await payment(ws, paymentId);
    const before = await snapshot(devnet);
    // An underpayment, signed once so that the very same transaction can be mined again.
    const raw = await signedUsdcTransfer(ws, "29");
    const { txHash, item } = await intoInbox(ws, raw);
    await mine(devnet, 2);
    const attached = await attach(ws, item?.id, paymentId);
    expect(attached.statusCode, attached.body).toBe(200);
    expect(attached.json().payment).toMatchObject({ status: "detected", amountReceived: "29.00" });

    // The chain under the transfer is replaced, deeper than the confirmations the merchant saw.
    await revert(devnet, before);
    await mine(devnet, 3);
    const back = await until(
      "the payment waiting again",
      () => payment(ws, paymentId),
      (p) => p.status === "pending",
    );
    expect(back).toMatchObject({
      amountReceived: null,
      feeAmount: asked.feeAmount,
      netAmount: asked.netAmount,
      txHash: null,
    });
    expect((await inbox(ws, txHash)).map((u) => [u.status, u.paymentId ?? null])).toEqual([
      ["dropped", null],
    ]);

    // Mined again: the same transfer, still the one inbox item, open and attached again.
    await clients.chain.sendRawTransaction({ serializedTransaction: raw });
    await seen(txHash);
    await until(
      "the transfer open again",
      () => inbox(ws, txHash),
      (l) => l[0]?.status === "open",
    );
    await mine(devnet, 2);
    const items = await inbox(ws, txHash);
    expect(items.map((u) => u.id)).toEqual([item?.id]);
    const again = await attach(ws, item?.id, paymentId);
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json().payment).toMatchObject({ status: "detected", amountReceived: "29.00", txHash });
  }, 90_000);
});

describe("an open transfer a reorganisation drops", () => {
  it("is dropped (attach and return refused), and open again once its transaction is mined again", async () => {
    const ws = await createWorkspace(t);
    await clients.credit(ws.eoaAddress, { ETH: "1" }); // gas for the return
    const paymentId = await pendingPayment(ws, "4.00");
    const before = await snapshot(devnet);
    const raw = await signedUsdcTransfer(ws, "3");
    const { txHash, item } = await intoInbox(ws, raw);
    expect(item).toMatchObject({ status: "open", amount: "3.00" });

    // The chain under it is replaced before the watcher's 50 confirmations.
    await revert(devnet, before);
    await mine(devnet, 3);
    await until(
      "the transfer dropped",
      () => inbox(ws, txHash),
      (l) => l[0]?.status === "dropped",
    );
    const dropped = { status: "dropped" };
    const refusedAttach = await attach(ws, item?.id, paymentId);
    expect(refusedAttach.statusCode, refusedAttach.body).toBe(409);
    expect(refusedAttach.json().error).toContain("dropped by a reorganisation");
    const refusedReturn = await api(ws, "POST", `/api/v1/transfers/unmatched/${String(item?.id)}/return`, {});
    expect(refusedReturn.statusCode, refusedReturn.body).toBe(409);
    expect(refusedReturn.json()).toMatchObject(dropped);
    expect((await payment(ws, paymentId)).status).toBe("pending");

    // Mined again: the same inbox item is open, in the block it is in now, and goes back.
    await clients.chain.sendRawTransaction({ serializedTransaction: raw });
    const { blockNumber } = await clients.chain.waitForTransactionReceipt({ hash: txHash });
    const [again] = await until(
      "the transfer open again",
      () => inbox(ws, txHash),
      (l) => l[0]?.status === "open",
    );
    expect(again).toMatchObject({ id: item?.id, blockNumber: Number(blockNumber) });
    await mine(devnet, 2);
    const returned = await api(ws, "POST", `/api/v1/transfers/unmatched/${String(item?.id)}/return`, {});
    expect(returned.statusCode, returned.body).toBe(201);
    expect((await inbox(ws, txHash)).map((u) => u.status)).toEqual(["returned"]);
  }, 90_000);
});

describe("an open transfer's money on a live wallet (issue 39)", () => {
  it("is held from payouts and shown as held until the merchant keeps it", async () => {
    const ws = await createWorkspace(t);
    await clients.credit(ws.eoaAddress, { USDC: "2", ETH: "1" }); // the workspace's own
    const { item } = await intoInbox(ws, await signedUsdcTransfer(ws, "3"));
    expect(item).toMatchObject({ status: "open", amount: "3.00" });
    const balance = await api(ws, "GET", "/api/v1/wallet/balance");
    expect(balance.json().eoa).toMatchObject({ balances: { USDC: "5.00" }, held: { USDC: "3.00" } });

    const payout = (amount: string) =>
      api(ws, "POST", "/api/v1/payouts", {
        tokenSymbol: "USDC",
        amount,
        destinationAddress: randomAddress(),
      });
    const short = await payout("2.01");
    expect(short.statusCode, short.body).toBe(400);
    expect(short.json()).toMatchObject({ error: "Insufficient balance", available: "2.00" });
    const paid = await payout("2");
    expect(paid.statusCode, paid.body).toBe(200);

    await mine(devnet, 2);
    const kept = await api(ws, "POST", `/api/v1/transfers/unmatched/${String(item?.id)}/keep`);
    expect(kept.statusCode, kept.body).toBe(200);
    expect(kept.json().transfer).toMatchObject({ status: "kept" });
    expect((await api(ws, "GET", "/api/v1/wallet/balance")).json().eoa).not.toHaveProperty("held");
    const rest = await payout("3");
    expect(rest.statusCode, rest.body).toBe(200);
  }, 60_000);

  it("is released from the inbox's hold once attached: the payment's money from then on", async () => {
    const ws = await createWorkspace(t);
    const paymentId = await pendingPayment(ws, "4.00");
    const { item } = await intoInbox(ws, await signedUsdcTransfer(ws, "3.5"));
    const held = async () => (await api(ws, "GET", "/api/v1/wallet/balance")).json().eoa.held;
    expect(await held()).toEqual({ USDC: "3.50" });
    await mine(devnet, 2);
    const attached = await attach(ws, item?.id, paymentId);
    expect(attached.statusCode, attached.body).toBe(200);
    expect(await held()).toBeUndefined();
  }, 60_000);
});
