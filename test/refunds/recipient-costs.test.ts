import { type Address, formatEther, type Hex, type PublicClient, parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Devnet, rpc as devnetRpc, mintToken, startDevnet } from "../../src/devnet/chain.ts";
import { type Artifact, costlyReceiverArtifact } from "../../src/devnet/compile.ts";
import { ChainWatcher } from "../../src/modules/payments/incoming/chain-watcher.ts";
import { createWorkers } from "../../src/workers.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { type DevnetClients, devnetClients } from "../support/devnet-clients.ts";
import { liveNetworkEnv } from "../support/devnet-env.ts";
import { setMining } from "../support/mining.ts";

// A payer cannot cost the merchant (issue 36), on the devnet: refunds, returns and payouts of ETH
// to a contract whose receiving code burns gas or refuses the ETH (src/devnet/contracts/
// CostlyReceiver.sol). Their gas limit is capped at 150,000 (read from the chain); a recipient that
// needs more, or whose code reverts in the node's estimate, fails the transfer before anything is
// sent; the balance check reserves the limit each transaction is signed with, so ETH held for a
// payment not settled yet is never spent on gas; a refund's or a return's recipient refusing it
// is not counted by the circuit breaker (a payout's is: its recipient is the merchant's choice).
// The zero address is refused as a destination (400).

const TX_HASH = /^0x[0-9a-f]{64}$/;
const ZERO = `0x${"0".repeat(40)}`;
const CAP = 150_000n;
/** A payment whose ETH is on the wallet, not forwarded yet. */
const UNSETTLED = ["detected", "confirmed"];
/** The largest uint256: the receiver burns all the gas it is given. */
const ALL_GAS = 2n ** 256n - 1n;

const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
const same = (a: unknown, b: string) => typeof a === "string" && a.toLowerCase() === b.toLowerCase();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let devnet: Devnet;
let t: TestApp;
let clients: DevnetClients;
let chain: PublicClient;
let receiverArtifact: Artifact;
let watcher: ChainWatcher;

const rpc = (method: string, params: unknown[]) => devnetRpc(devnet.rpcUrl, method, params);

/** The devnet's defaults: a block on every transaction and one every second. */
const restoreMining = () => setMining(devnet.rpcUrl, true);

beforeAll(async () => {
  devnet = await startDevnet();
  // No periodic gas top-ups: a workspace EOA's ETH changes only by what the test sends it, what
  // it pays, and what a settlement's on-demand top-up brings.
  t = await startTestApp(liveNetworkEnv(devnet, { LIVE_GAS_TOPUP_THRESHOLD_WEI: "0" }));
  clients = devnetClients(devnet);
  chain = clients.chain;
  receiverArtifact = await costlyReceiverArtifact();
  const live = t.app.ctx.chains.defaultOf("live")?.network;
  if (!live) throw new Error("no live network");
  watcher = new ChainWatcher(t.database.db, live, t.app.ctx.log, () => new Date(), {
    ignoredSenders: [devnet.accounts.gasFunder.address],
  });
  // Its first tick sets its cursor at the head: one made only after a test's transfer was mined
  // would start past it when the devnet (a block a second) mined two blocks in between.
  await watcher.tick();
}, 180_000);

afterAll(async () => {
  if (devnet) await restoreMining().catch(() => undefined);
  await t?.close();
  await devnet?.stop();
});

// ---------------------------------------------------------------------------------------------
// Chain

const ethBalance = (address: string) => chain.getBalance({ address: address as Address });
const sentCount = (address: string) => chain.getTransactionCount({ address: address as Address });

/** A CostlyReceiver: its receiving code burns `burnGas` gas (ALL_GAS: all it gets), or refuses ETH. */
async function deployReceiver(burnGas: bigint, refusing = false): Promise<Address> {
  const hash = await clients.payer.deployContract({
    abi: receiverArtifact.abi,
    bytecode: receiverArtifact.bytecode,
    args: [burnGas, refusing],
  });
  const receipt = await chain.waitForTransactionReceipt({ hash });
  if (!receipt.contractAddress) throw new Error("CostlyReceiver not deployed");
  return receipt.contractAddress;
}

/** Sets what `receiver` does next, sent with `tip` wei of priority fee; its hash. */
function setReceiver(receiver: Address, burnGas: bigint, refusing: boolean, tip?: bigint): Promise<Hex> {
  return clients.payer.writeContract({
    address: receiver,
    abi: receiverArtifact.abi,
    functionName: "set",
    args: [burnGas, refusing],
    ...(tip ? { maxPriorityFeePerGas: tip, maxFeePerGas: tip * 2n } : {}),
  });
}

/** What the service's fee estimate charges per unit of gas at most (viem's, as the service's). */
async function maxFeePerGas(): Promise<bigint> {
  return (await chain.estimateFeesPerGas()).maxFeePerGas;
}

// ---------------------------------------------------------------------------------------------
// Service

type Json = Record<string, unknown>;

const api = (ws: CreatedWorkspace, method: "GET" | "POST", url: string, payload?: Json) =>
  t.request({ method, url, headers: bearer(ws.liveKey), ...(payload ? { payload } : {}) });

const refund = (ws: CreatedWorkspace, paymentId: string, body: Json) =>
  api(ws, "POST", `/api/v1/payments/${paymentId}/refunds`, body);
const payout = (ws: CreatedWorkspace, body: Json) => api(ws, "POST", "/api/v1/payouts", body);

async function breaker(ws: CreatedWorkspace): Promise<Json> {
  return (await api(ws, "GET", `/api/v1/workspaces/${ws.id}/payout-state`)).json();
}

async function paymentOf(ws: CreatedWorkspace, id: string): Promise<Json> {
  const res = await api(ws, "GET", `/api/v1/payments/${id}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json().payment as Json;
}

const outbox = (ws: CreatedWorkspace, type: string) =>
  t.database.db
    .selectFrom("outbox_events")
    .select(["payload"])
    .where("workspace_id", "=", ws.id)
    .where("event_type", "=", type)
    .orderBy("id")
    .execute();

/** Ticks the watcher until `done` holds (bounded). */
async function watchUntil(done: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`the watcher never saw ${what}`);
    await watcher.tick();
    await sleep(100);
  }
}

/**
 * A live ETH payment of `amount`, created and paid by the devnet payer, not settled yet: detected,
 * or already confirmed when the devnet (a block a second) mined its confirmations before the
 * watcher's tick. Either holds its ETH on the wallet until it is forwarded.
 */
async function unsettledEthPayment(ws: CreatedWorkspace, amount: string): Promise<string> {
  const created = await api(ws, "POST", "/api/v1/payments", {
    tokenSymbol: "ETH",
    amount,
    merchantWallet: randomAddress(),
  });
  expect(created.statusCode, created.body).toBe(201);
  const id = created.json().payment.id as string;
  const hash = await clients.payer.sendTransaction({
    to: created.json().receivingAddress as Address,
    value: parseEther(amount),
  });
  await chain.waitForTransactionReceipt({ hash });
  await watchUntil(async () => (await paymentOf(ws, id)).status !== "pending", `payment ${id}`);
  expect(UNSETTLED).toContain((await paymentOf(ws, id)).status);
  return id;
}

/** A live ETH payment of `amount`, paid and forwarded (the workers run until it is). */
async function forwardedEthPayment(ws: CreatedWorkspace, amount: string): Promise<string> {
  const id = await unsettledEthPayment(ws, amount);
  const workers = createWorkers(t.app);
  workers.start();
  try {
    const deadline = Date.now() + 60_000;
    while ((await paymentOf(ws, id)).status !== "forwarded") {
      if (Date.now() > deadline) throw new Error(`payment ${id} was never forwarded`);
      await sleep(100);
    }
  } finally {
    await workers.stop();
  }
  return id;
}

/** An open, confirmed unmatched transfer to the workspace EOA: `send` makes it; its inbox id. */
async function unmatchedTransfer(ws: CreatedWorkspace, send: () => Promise<Hex>): Promise<string> {
  const txHash = await send();
  await chain.waitForTransactionReceipt({ hash: txHash });
  let id: string | undefined;
  await watchUntil(async () => {
    const listed = (await api(ws, "GET", "/api/v1/transfers/unmatched?limit=100")).json();
    id = (listed.transfers as Json[]).find((x) => same(x.txHash, txHash))?.id as string | undefined;
    return id !== undefined;
  }, `transfer ${txHash}`);
  // Its confirmations (2 blocks, a block a second).
  const mined = await chain.getTransactionReceipt({ hash: txHash });
  while ((await chain.getBlockNumber()) < mined.blockNumber + 2n) await sleep(200);
  if (!id) throw new Error("unreachable");
  return id;
}

/** Waits (bounded) until the node holds a transaction of `from` not mined yet (automine off). */
async function untilPending(from: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  const address = from as Address;
  while (
    (await chain.getTransactionCount({ address, blockTag: "pending" })) <=
    (await chain.getTransactionCount({ address, blockTag: "latest" }))
  ) {
    if (Date.now() > deadline) throw new Error(`no transaction of ${from} reached the node`);
    await sleep(50);
  }
}

// ---------------------------------------------------------------------------------------------

describe("the gas of plain ETH to a contract", () => {
  it("is the node's estimate plus half, capped at 150,000 (read from the chain)", async () => {
    const ws = await createWorkspace(t);
    await clients.credit(ws.eoaAddress, { ETH: "1" });
    const receiver = await deployReceiver(85_000n);
    const value = parseEther("0.01");
    // Its code needs more than 100,000: the estimate plus half would be above the cap.
    const estimate = await chain.estimateGas({ account: ws.eoaAddress as Address, to: receiver, value });
    expect(estimate).toBeGreaterThan(100_000n);
    expect(estimate).toBeLessThanOrEqual(CAP);

    const res = await payout(ws, { tokenSymbol: "ETH", amount: "0.01", destinationAddress: receiver });
    expect(res.statusCode, res.body).toBe(200);
    const txHash = res.json().payout.txHash as Hex;
    const [tx, receipt] = await Promise.all([
      chain.getTransaction({ hash: txHash }),
      chain.getTransactionReceipt({ hash: txHash }),
    ]);
    expect(tx.gas).toBe(CAP);
    expect(receipt.status).toBe("success");
    expect(receipt.gasUsed).toBeGreaterThan(100_000n);
    expect(await ethBalance(receiver)).toBe(value);
    // The limit is recorded with the transaction, for the balance checks of what follows it.
    const recorded = await t.database.db
      .selectFrom("chain_transactions")
      .select("gas_limit")
      .where("tx_hash", "=", txHash)
      .executeTakeFirstOrThrow();
    expect(String(recorded.gas_limit)).toBe(String(CAP));
  }, 60_000);

  it("a recipient needing more than the cap fails the refund before anything is sent, uncounted", async () => {
    const ws = await createWorkspace(t);
    const paymentId = await forwardedEthPayment(ws, "0.2");
    await clients.credit(ws.eoaAddress, { ETH: "0.5" });
    const receiver = await deployReceiver(1_000_000n);
    const [sent, eth] = await Promise.all([sentCount(ws.eoaAddress), ethBalance(ws.eoaAddress)]);

    const res = await refund(ws, paymentId, { amount: "0.05", destinationAddress: receiver });
    expect(res.statusCode, res.body).toBe(201);
    const failed = res.json().refund as Json;
    expect(failed).toMatchObject({ status: "failed", amount: "0.05", txHash: null });
    expect(failed.error).toMatch(
      /^the recipient's code needs \d+ gas to take ETH, more than the 150000 allowed/,
    );
    // Nothing signed or sent: no nonce, no gas; the amount is refundable again.
    expect(await sentCount(ws.eoaAddress)).toBe(sent);
    expect(await ethBalance(ws.eoaAddress)).toBe(eth);
    expect(await ethBalance(receiver)).toBe(0n);
    expect((await paymentOf(ws, paymentId)).refundedAmount).toBe("0.00");
    // Loud: refund.failed with why; not the workspace's sending: not counted.
    const events = await outbox(ws, "refund.failed");
    expect(events.map((e) => e.payload)).toEqual([{ ...failed }]);
    expect(await breaker(ws)).toMatchObject({ status: "active", failStreak: 0 });

    // One that burns all it is given cannot be measured at all: refused the same way.
    await setReceiver(receiver, ALL_GAS, false).then((hash) => chain.waitForTransactionReceipt({ hash }));
    const again = await refund(ws, paymentId, { amount: "0.05", destinationAddress: receiver });
    expect(again.json().refund).toMatchObject({ status: "failed", txHash: null });
    expect(again.json().refund.error).toMatch(/^the recipient's code refuses ETH/);
    expect(await sentCount(ws.eoaAddress)).toBe(sent);
    expect(await breaker(ws)).toMatchObject({ status: "active", failStreak: 0 });
  }, 120_000);
});

describe("a recipient that refuses a refund or a return does not pause payouts", () => {
  it("three refunds and a return to a contract that refuses ETH: failed, loud, uncounted; payouts go on", async () => {
    const ws = await createWorkspace(t);
    const paymentId = await forwardedEthPayment(ws, "0.3");
    await clients.credit(ws.eoaAddress, { ETH: "0.5" });
    const receiver = await deployReceiver(0n, true);
    const sent = await sentCount(ws.eoaAddress);
    for (let i = 1; i <= 3; i++) {
      const res = await refund(ws, paymentId, { amount: "0.01", destinationAddress: receiver });
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json().refund).toMatchObject({ status: "failed", txHash: null });
      expect(res.json().refund.error).toMatch(/^the recipient's code refuses ETH .*refused/);
      expect(await breaker(ws)).toMatchObject({ status: "active", failStreak: 0 });
    }
    const returned = await unmatchedTransfer(ws, () =>
      clients.payer.sendTransaction({ to: ws.eoaAddress as Address, value: parseEther("0.0123") }),
    );
    const ret = await api(ws, "POST", `/api/v1/transfers/unmatched/${returned}/return`, {
      destinationAddress: receiver,
    });
    expect(ret.statusCode, ret.body).toBe(201);
    expect(ret.json().refund).toMatchObject({
      status: "failed",
      unmatchedTransferId: returned,
      txHash: null,
    });
    const inbox = (await api(ws, "GET", "/api/v1/transfers/unmatched?limit=100")).json();
    expect((inbox.transfers as Json[]).find((x) => x.id === returned)?.status).toBe("open");

    expect(await sentCount(ws.eoaAddress)).toBe(sent);
    expect(await outbox(ws, "refund.failed")).toHaveLength(4);
    expect((await paymentOf(ws, paymentId)).refundedAmount).toBe("0.00");
    expect(await breaker(ws)).toMatchObject({ status: "active", failStreak: 0 });
    // Payouts and refunds go on.
    const paid = await payout(ws, {
      tokenSymbol: "ETH",
      amount: "0.01",
      destinationAddress: randomAddress(),
    });
    expect(paid.statusCode, paid.body).toBe(200);
    const ok = await refund(ws, paymentId, { amount: "0.01", destinationAddress: randomAddress() });
    expect(ok.json().refund).toMatchObject({ status: "completed", txHash: expect.stringMatching(TX_HASH) });
  }, 120_000);

  it("a refund reverted on chain by its recipient is not counted; a payout's revert is", async () => {
    const ws = await createWorkspace(t);
    const paymentId = await forwardedEthPayment(ws, "0.2");
    await clients.credit(ws.eoaAddress, { ETH: "0.5" });
    const receiver = await deployReceiver(0n, false);
    // The node's estimate sees a receiver that takes ETH; it refuses it by the time the transfer
    // is mined (set with a higher tip, in the same block, first).
    const revertedOnChain = async (send: () => Promise<{ statusCode: number; body: string }>) => {
      await rpc("evm_setIntervalMining", [0]);
      await rpc("evm_setAutomine", [false]);
      try {
        const answer = send();
        await untilPending(ws.eoaAddress);
        await setReceiver(receiver, 0n, true, 50_000_000_000n);
        await rpc("evm_mine", []);
        return await answer;
      } finally {
        await restoreMining();
        await setReceiver(receiver, 0n, false).then((hash) => chain.waitForTransactionReceipt({ hash }));
      }
    };
    const res = await revertedOnChain(() =>
      refund(ws, paymentId, { amount: "0.02", destinationAddress: receiver }),
    );
    expect(res.statusCode, res.body).toBe(201);
    const failed = JSON.parse(res.body).refund as Json;
    expect(failed).toMatchObject({ status: "failed", txHash: expect.stringMatching(TX_HASH) });
    expect(failed.error).toBe("transaction reverted: the recipient's code refused the ETH or ran out of gas");
    const receipt = await chain.getTransactionReceipt({ hash: failed.txHash as Hex });
    expect(receipt.status).toBe("reverted");
    expect((await paymentOf(ws, paymentId)).refundedAmount).toBe("0.00");
    expect(await breaker(ws)).toMatchObject({ status: "active", failStreak: 0 });

    // A payout's recipient is the merchant's own choice: its revert counts (D13).
    const paid = await revertedOnChain(() =>
      payout(ws, { tokenSymbol: "ETH", amount: "0.02", destinationAddress: receiver }),
    );
    expect(paid.statusCode, paid.body).toBe(500);
    expect(JSON.parse(paid.body)).toMatchObject({ code: "PAYOUT_FAILED", failStreak: 1 });
    expect(await breaker(ws)).toMatchObject({ status: "active", failStreak: 1 });
  }, 120_000);
});

describe("the balance check reserves the gas a transfer will be signed with", () => {
  it("a refund to a gas-burning contract does not spend the ETH of a payment not settled yet", async () => {
    const ws = await createWorkspace(t);
    const paymentId = await forwardedEthPayment(ws, "0.3");
    await clients.credit(ws.eoaAddress, { ETH: "0.02" });
    const receiver = await deployReceiver(85_000n);
    // Another payment's 0.1 ETH lands on the wallet and waits for its settlement.
    const unsettled = await unsettledEthPayment(ws, "0.1");
    const held = parseEther("0.1");
    // The wallet's own ETH besides it: the refund, gas for a 21,000 transfer and for the other
    // payment's settlement (two transfers), with room to spare, yet less than the 150,000 the
    // refund is signed with: the old check passed it, and the refund burnt the payment's ETH.
    const fee = await maxFeePerGas();
    const own = (await ethBalance(ws.eoaAddress)) - held;
    const amount = own - 90_000n * fee;
    expect(amount).toBeGreaterThan(0n);
    const text = formatEther(amount);
    const before = await ethBalance(ws.eoaAddress);
    const res = await refund(ws, paymentId, { amount: text, destinationAddress: receiver });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toMatchObject({ code: "INSUFFICIENT_GAS" });
    expect(await ethBalance(ws.eoaAddress)).toBe(before);
    expect((await paymentOf(ws, paymentId)).refundedAmount).toBe("0.00");

    // With gas enough of its own, it goes, and the other payment's ETH is still there.
    await clients.credit(ws.eoaAddress, { ETH: "0.001" });
    const ok = await refund(ws, paymentId, { amount: text, destinationAddress: receiver });
    expect(ok.statusCode, ok.body).toBe(201);
    expect(ok.json().refund).toMatchObject({ status: "completed" });
    expect(await ethBalance(ws.eoaAddress)).toBeGreaterThanOrEqual(held);
    expect(UNSETTLED).toContain((await paymentOf(ws, unsettled)).status);
  }, 120_000);

  it("an ETH transfer in flight to a contract is reserved at its limit, not at 21,000", async () => {
    const ws = await createWorkspace(t);
    const receiver = await deployReceiver(85_000n);
    await clients.credit(ws.eoaAddress, { ETH: "0.05" });
    const unsettled = await unsettledEthPayment(ws, "0.1");
    const held = parseEther("0.1");
    const fee = await maxFeePerGas();
    // Two payouts: 0.01 to the receiver (signed with 150,000), then 0.001 to an account without
    // code. The wallet's own ETH covers both with 100,000 units of gas between them: enough at
    // 21,000 each (and 42,000 for the other payment's settlement), not with the 150,000.
    const first = parseEther("0.01");
    const second = parseEther("0.001");
    const own = (await ethBalance(ws.eoaAddress)) - held;
    const surplus = own - (first + second + 100_000n * fee);
    expect(surplus).toBeGreaterThan(0n);
    // What is over goes out first (a plain payout, mined).
    const drained = await payout(ws, {
      tokenSymbol: "ETH",
      amount: formatEther(surplus - 21_000n * fee),
      destinationAddress: randomAddress(),
    });
    expect(drained.statusCode, drained.body).toBe(200);

    await rpc("evm_setIntervalMining", [0]);
    await rpc("evm_setAutomine", [false]);
    try {
      const inFlight = payout(ws, { tokenSymbol: "ETH", amount: "0.01", destinationAddress: receiver });
      await untilPending(ws.eoaAddress);
      // The gas of the one in flight comes off the balance first: short of the amount itself.
      const next = await payout(ws, {
        tokenSymbol: "ETH",
        amount: "0.001",
        destinationAddress: randomAddress(),
      });
      expect(next.statusCode, next.body).toBe(400);
      expect(next.json()).toMatchObject({ error: "Insufficient balance", requested: "0.001" });
      await rpc("evm_mine", []);
      expect((await inFlight).statusCode).toBe(200);
    } finally {
      await restoreMining();
    }
    expect(await ethBalance(ws.eoaAddress)).toBeGreaterThanOrEqual(held);
    expect(UNSETTLED).toContain((await paymentOf(ws, unsettled)).status);
  }, 120_000);
});

describe("the zero address as a destination (live)", () => {
  it("a payout, a refund and a return to it → 400; a minted transfer is not returned to its sender", async () => {
    const ws = await createWorkspace(t);
    await clients.credit(ws.eoaAddress, { ETH: "0.1" });
    const refused = { error: "destinationAddress must not be the zero address" };
    const paid = await payout(ws, { tokenSymbol: "ETH", amount: "0.01", destinationAddress: ZERO });
    expect(paid.statusCode, paid.body).toBe(400);
    expect(paid.json()).toEqual(refused);

    const paymentId = await forwardedEthPayment(ws, "0.05");
    const sent = await sentCount(ws.eoaAddress);
    const back = await refund(ws, paymentId, { amount: "0.01", destinationAddress: ZERO });
    expect(back.statusCode, back.body).toBe(400);
    expect(back.json()).toEqual(refused);
    expect((await paymentOf(ws, paymentId)).refundedAmount).toBe("0.00");

    // Tokens minted to the wallet come from the zero address.
    const minted = await unmatchedTransfer(ws, () =>
      mintToken(devnet, "USDC", ws.eoaAddress as Address, "4.56"),
    );
    const named = await api(ws, "POST", `/api/v1/transfers/unmatched/${minted}/return`, {
      destinationAddress: ZERO,
    });
    expect(named.statusCode, named.body).toBe(400);
    expect(named.json()).toEqual(refused);
    const byDefault = await api(ws, "POST", `/api/v1/transfers/unmatched/${minted}/return`, {});
    expect(byDefault.statusCode, byDefault.body).toBe(400);
    expect(byDefault.json().error).toMatch(/^destinationAddress must not be the zero address: /);
    const inbox = (await api(ws, "GET", "/api/v1/transfers/unmatched?limit=100")).json();
    expect((inbox.transfers as Json[]).find((x) => x.id === minted)?.status).toBe("open");
    expect(await sentCount(ws.eoaAddress)).toBe(sent);
    expect(await breaker(ws)).toMatchObject({ status: "active", failStreak: 0 });
  }, 120_000);
});
