import { createHmac } from "node:crypto";
import { sql } from "kysely";
import {
  type Address,
  decodeEventLog,
  erc20Abi,
  formatUnits,
  type Hex,
  http,
  type PublicClient,
  parseEther,
  parseUnits,
} from "viem";
import { type BundlerClient, createBundlerClient, entryPoint08Abi } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Devnet, rpc, startDevnet } from "../../src/devnet/chain.ts";
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
import { type ReceivedRequest, WebhookReceiver } from "../support/receiver.ts";

// Splits (D15) settled for real on the devnet: a live crypto payment received on the workspace
// EOA (one transaction per leg) or on its smart wallet (ONE sponsored user operation carrying
// every leg) pays the merchant's part of the net, the fee to the treasury and each split of the
// payment's snapshot, floor(net × percentBps / 10000) each, the merchant the rest. Every expected
// amount is computed here by hand (bigint) from D15's rule, never by the service's code, and
// checked against the chain (exact balances, each leg's transfer), the settlements API and the
// settlement.recorded / split.recorded webhook bodies a local receiver gets.

const TX_HASH = /^0x[0-9a-f]{64}$/;
const FEE_BPS = 150n;
const WHOLE = 10_000n;
const DECIMALS = { USDC: 6, ETH: 18 } as const;
type Token = keyof typeof DECIMALS;

type Json = Record<string, unknown>;

const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
const same = (a: string | null | undefined, b: string) => a?.toLowerCase() === b.toLowerCase();

/** D4's formatting, written again: at least two decimals, more only when needed. */
function fmt(units: bigint, token: Token): string {
  const text = formatUnits(units, DECIMALS[token]);
  const [whole, fraction = ""] = text.split(".");
  return `${whole}.${fraction.padEnd(2, "0")}`;
}

/** D15 by hand: fee half up at 150 bps, net = gross − fee, each split floored, the merchant the rest. */
function carveByHand(gross: bigint, bps: readonly number[]) {
  const fee = (gross * FEE_BPS + WHOLE / 2n) / WHOLE;
  const net = gross - fee;
  const splits = bps.map((b) => (net * BigInt(b)) / WHOLE);
  const merchant = splits.reduce((rest, part) => rest - part, net);
  return { gross, fee, net, splits, merchant };
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
  // Plain http to 127.0.0.1 is refused in live unless the address rules are lifted (a devnet).
  t = await startTestApp(liveSmartWalletEnv(devnet, aa, { WEBHOOK_ALLOW_PRIVATE: "true" }));
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

/** Sends `units` of `token` from the devnet payer to `to`, waiting for a successful receipt. */
async function pay(token: Token, to: string, units: bigint): Promise<Hex> {
  const hash =
    token === "USDC"
      ? await clients.sendUsdc(to, units)
      : await clients.payer.sendTransaction({ to: to as Address, value: units });
  const receipt = await chain.waitForTransactionReceipt({ hash });
  expect(receipt.status).toBe("success");
  return hash;
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

/** A leg sent as its own transaction: mined with success, from `from`, paying `amount` to `to` and nothing else. */
async function expectLegTransaction(token: Token, txHash: string, from: string, to: string, amount: bigint) {
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
}

// ---------------------------------------------------------------------------------------------
// Service

const api = (
  ws: CreatedWorkspace,
  method: "GET" | "POST" | "PUT",
  url: string,
  payload?: Json,
  app: TestApp = t,
) => app.request({ method, url, headers: bearer(ws.liveKey), ...(payload ? { payload } : {}) });

interface Configured {
  id: string;
  label: string;
  percentBps: number;
  destination: string;
  enabled: boolean;
}

async function putSplits(
  ws: CreatedWorkspace,
  enabled: boolean,
  splits: Json[],
  app: TestApp = t,
): Promise<Configured[]> {
  const res = await api(ws, "PUT", "/api/v1/splits", { enabled, splits }, app);
  expect(res.statusCode, res.body).toBe(200);
  const body = res.json() as { enabled: boolean; splits: Configured[] };
  expect(body.enabled).toBe(enabled);
  return body.splits;
}

/** Three splits of 5000, 2500 and 1 bps to three fresh addresses. */
async function threeSplits(ws: CreatedWorkspace, app: TestApp = t) {
  const destinations = [randomAddress(), randomAddress(), randomAddress()];
  const configured = await putSplits(
    ws,
    true,
    [
      { label: "seller", percentBps: 5000, destination: destinations[0] },
      { label: "affiliate", percentBps: 2500, destination: destinations[1] },
      { label: "tax", percentBps: 1, destination: destinations[2] },
    ],
    app,
  );
  expect(configured.map((s) => [s.label, s.percentBps, s.destination, s.enabled])).toEqual([
    ["seller", 5000, destinations[0]?.toLowerCase(), true],
    ["affiliate", 2500, destinations[1]?.toLowerCase(), true],
    ["tax", 1, destinations[2]?.toLowerCase(), true],
  ]);
  return configured;
}

async function registerWebhook(ws: CreatedWorkspace): Promise<string> {
  const res = await api(ws, "POST", "/api/v1/webhooks", { url: receiver.url, events: ["*"] });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().webhook.signingSecret as string;
}

async function createPayment(ws: CreatedWorkspace, body: Json, app: TestApp = t) {
  const res = await api(ws, "POST", "/api/v1/payments", body, app);
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as { payment: { id: string; merchantWallet: string }; receivingAddress: string };
}

async function waitForStatus(
  ws: CreatedWorkspace,
  id: string,
  status: string,
  timeoutMs = 90_000,
  app: TestApp = t,
) {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  for (;;) {
    const res = await api(ws, "GET", `/api/v1/payments/${id}`, undefined, app);
    const payment = res.json().payment as Json | undefined;
    if (!payment) throw new Error(`GET payment answered ${res.statusCode} ${res.body}`);
    last = String(payment.status);
    if (last === status) return payment;
    if (last === "failed" && status !== "failed")
      throw new Error(`payment ${id} failed: ${JSON.stringify(payment.failureReason)}`);
    if (Date.now() > deadline) throw new Error(`payment ${id} stayed ${last}, expected ${status}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface SettlementAnswer {
  settlementId: string;
  paymentIds: string[];
  tokenSymbol: string;
  grossAmount: string;
  feeAmount: string;
  netAmount: string;
  merchantAmount: string;
  merchantWallet: string | null;
  txRef: string | null;
  splits: Array<{
    splitId: string;
    label: string;
    amount: string;
    percent_bps: number;
    destination: string;
    status: string;
    txRef: string | null;
  }>;
  createdAt: string;
}

/** The payment's one settlement, read by paymentId and by id (both must agree). */
async function settlementOf(ws: CreatedWorkspace, paymentId: string): Promise<SettlementAnswer> {
  const listed = await api(ws, "GET", `/api/v1/settlements?paymentId=${paymentId}`);
  expect(listed.statusCode, listed.body).toBe(200);
  expect(listed.json().total).toBe(1);
  const [fromList] = listed.json().settlements as SettlementAnswer[];
  if (!fromList) throw new Error("no settlement listed");
  const one = await api(ws, "GET", `/api/v1/settlements/${fromList.settlementId}`);
  expect(one.statusCode, one.body).toBe(200);
  expect(one.json().settlement).toEqual(fromList);
  return fromList;
}

async function chainLegs(paymentId: string, app: TestApp = t) {
  return app.database.db
    .selectFrom("chain_transactions")
    .select(["purpose", "tx_hash", "status", "nonce", "to_address", "amount", "from_address"])
    .where("payment_id", "=", paymentId)
    .orderBy("nonce")
    .execute();
}

const outboxOf = (ws: CreatedWorkspace) =>
  t.database.db
    .selectFrom("outbox_events")
    .select(["id", "event_type", "payload"])
    .where("workspace_id", "=", ws.id)
    .where("environment", "=", "live")
    .orderBy("id")
    .execute();

/** The webhook deliveries (by the receiver) of one settlement's events, signature checked. */
async function deliveriesOf(settlementId: string, splits: number, secret: string) {
  const ofIt = (r: ReceivedRequest) => (r.json.data as Json | undefined)?.settlementId === settlementId;
  const all = await receiver.waitFor(1 + splits, ofIt, 30_000);
  for (const r of all) {
    expect(r.headers["x-service-signature"]).toBe(
      createHmac("sha256", secret).update(r.rawBody).digest("hex"),
    );
    expect(r.headers["x-service-event"]).toBe(r.json.event);
  }
  return {
    settlement: all.filter((r) => r.json.event === "settlement.recorded"),
    splits: all.filter((r) => r.json.event === "split.recorded"),
  };
}

// ---------------------------------------------------------------------------------------------
// The expected settlement, from the hand-carved amounts

interface Expected {
  token: Token;
  paymentId: string;
  merchantWallet: string;
  carved: ReturnType<typeof carveByHand>;
  configured: Configured[];
}

/** The settlement view D15 describes, with each leg's transaction as given. */
function expectedView(e: Expected, txRefs: { merchant: string | null; splits: Array<string | null> }) {
  return {
    paymentIds: [e.paymentId],
    tokenSymbol: e.token,
    grossAmount: fmt(e.carved.gross, e.token),
    feeAmount: fmt(e.carved.fee, e.token),
    netAmount: fmt(e.carved.net, e.token),
    merchantAmount: fmt(e.carved.merchant, e.token),
    merchantWallet: e.merchantWallet,
    txRef: txRefs.merchant,
    splits: e.configured.map((split, i) => ({
      splitId: split.id,
      label: split.label,
      amount: fmt(e.carved.splits[i] ?? -1n, e.token),
      percent_bps: split.percentBps,
      destination: split.destination,
      status: "sent",
      txRef: txRefs.splits[i] ?? null,
    })),
  };
}

/**
 * The settlement as the API shows it and as settlement.recorded / split.recorded carried it,
 * field by field; exactly one of each event per split in the outbox, after payment.forwarded.
 */
async function expectRecorded(
  ws: CreatedWorkspace,
  e: Expected,
  txRefs: { merchant: string | null; splits: Array<string | null> },
  secret: string,
) {
  const settlement = await settlementOf(ws, e.paymentId);
  const view = expectedView(e, txRefs);
  expect(settlement).toEqual({
    settlementId: expect.stringMatching(/^[0-9a-f-]{36}$/),
    ...view,
    createdAt: expect.any(String),
  });
  expect(Date.parse(settlement.createdAt)).toBeGreaterThan(0);

  const delivered = await deliveriesOf(settlement.settlementId, e.configured.length, secret);
  expect(delivered.settlement.map((r) => r.json)).toEqual([
    { event: "settlement.recorded", data: { settlementId: settlement.settlementId, ...view } },
  ]);
  const bySplit = new Map(delivered.splits.map((r) => [(r.json.data as Json).splitId, r.json]));
  expect(delivered.splits).toHaveLength(e.configured.length);
  for (const split of view.splits) {
    expect(bySplit.get(split.splitId)).toEqual({
      event: "split.recorded",
      data: {
        settlementId: settlement.settlementId,
        splitId: split.splitId,
        label: split.label,
        amount: split.amount,
        percent_bps: split.percent_bps,
        destination: split.destination,
        status: split.status,
        txRef: split.txRef,
        paymentIds: [e.paymentId],
      },
    });
  }

  // The outbox: once each, right after the payment's forwarded event (one transaction).
  const events = (await outboxOf(ws)).filter((ev) => {
    const data = ev.payload as Json;
    return data.settlementId === settlement.settlementId || data.id === e.paymentId;
  });
  const kinds = events.map((ev) => ev.event_type);
  const forwardedAt = kinds.indexOf("payment.forwarded");
  expect(forwardedAt).toBeGreaterThanOrEqual(0);
  expect(kinds.slice(forwardedAt)).toEqual([
    "payment.forwarded",
    "settlement.recorded",
    ...e.configured.map(() => "split.recorded"),
  ]);
  expect(kinds.filter((k) => k === "settlement.recorded")).toHaveLength(1);
  return settlement;
}

// ---------------------------------------------------------------------------------------------

/** A USDC and an ETH payment to a workspace wallet with three splits, paid by the devnet payer. */
async function payBoth(ws: CreatedWorkspace, walletType: "eoa" | "smart_wallet", configured: Configured[]) {
  const amounts = { USDC: "123.456789", ETH: "0.123456789012345678" } as const;
  const bps = configured.map((s) => s.percentBps);
  const treasury = devnet.accounts.treasury.address;
  const treasuryBefore = { USDC: await balanceOf("USDC", treasury), ETH: await balanceOf("ETH", treasury) };
  const payments: Expected[] = [];
  const receiving: string[] = [];
  for (const token of ["USDC", "ETH"] as const) {
    const merchant = randomAddress();
    const created = await createPayment(ws, {
      tokenSymbol: token,
      amount: amounts[token],
      merchantWallet: merchant,
      ...(walletType === "smart_wallet" ? { walletType } : {}),
    });
    expect(same(created.payment.merchantWallet, merchant)).toBe(true);
    receiving.push(created.receivingAddress);
    payments.push({
      token,
      paymentId: created.payment.id,
      merchantWallet: created.payment.merchantWallet,
      carved: carveByHand(parseUnits(amounts[token], DECIMALS[token]), bps),
      configured,
    });
  }
  const started = performance.now();
  // One after the other: an ETH payment received on an EOA while another payment of that EOA
  // settles is the subject of its own test below.
  const forwarded: Json[] = [];
  for (const [i, e] of payments.entries()) {
    await pay(e.token, receiving[i] as string, e.carved.gross);
    forwarded.push(await waitForStatus(ws, e.paymentId, "forwarded"));
  }
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  console.info(`[splits-live] ${walletType}: USDC and ETH payments paid to forwarded in ${seconds} s`);
  return { payments, forwarded, receiving, treasury, treasuryBefore };
}

describe("a live payment with three splits, settled from the workspace EOA", () => {
  it("pays each leg as its own transaction: exact balances, the settlement and its webhooks field by field", async () => {
    const ws = await createWorkspace(t);
    const secret = await registerWebhook(ws);
    const configured = await threeSplits(ws);
    const { payments, forwarded, receiving, treasury, treasuryBefore } = await payBoth(ws, "eoa", configured);
    expect(receiving).toEqual([ws.eoaAddress, ws.eoaAddress]);

    // By hand, for the USDC payment: 123.456789 USDC = 123,456,789 units.
    const usdc = payments[0] as Expected;
    expect(usdc.carved).toEqual({
      gross: 123_456_789n,
      fee: 1_851_852n, // 1,851,851.835 half up
      net: 121_604_937n,
      splits: [60_802_468n, 30_401_234n, 12_160n], // floors of …68.5, …34.25, 12,160.4937
      merchant: 30_389_075n,
    });

    for (const e of payments) {
      const { token, carved } = e;
      // Exact balances: the merchant, each destination (fresh addresses), the treasury's delta.
      expect(await balanceOf(token, e.merchantWallet)).toBe(carved.merchant);
      for (const [i, split] of configured.entries())
        expect(await balanceOf(token, split.destination)).toBe(carved.splits[i]);
      expect((await balanceOf(token, treasury)) - treasuryBefore[token]).toBe(carved.fee);
    }
    // The wallet kept none of the USDC it received.
    expect(await balanceOf("USDC", ws.eoaAddress)).toBe(0n);

    for (const [p, e] of payments.entries()) {
      // One transaction per leg, recorded before broadcast, each mined: five distinct ones in nonce order.
      const legs = await chainLegs(e.paymentId);
      const byPurpose = new Map(legs.map((leg) => [leg.purpose, leg]));
      expect(legs.map((leg) => leg.purpose)).toEqual([
        "settlement_net",
        "settlement_fee",
        ...configured.map((split) => `split:${split.id}`),
      ]);
      expect(legs.every((leg) => leg.status === "mined")).toBe(true);
      expect(new Set(legs.map((leg) => leg.tx_hash)).size).toBe(5);
      const nonces = legs.map((leg) => Number(leg.nonce));
      expect(nonces).toEqual(nonces.map((_, i) => (nonces[0] ?? 0) + i));

      const net = byPurpose.get("settlement_net")?.tx_hash as string;
      const fee = byPurpose.get("settlement_fee")?.tx_hash as string;
      const splitTx = configured.map((split) => byPurpose.get(`split:${split.id}`)?.tx_hash ?? null);
      expect(forwarded[p]?.settlementTxHashes).toEqual({ net, fee });
      // Each leg on chain: from the EOA, to its recipient, its exact amount, nothing else.
      await expectLegTransaction(e.token, net, ws.eoaAddress, e.merchantWallet, e.carved.merchant);
      await expectLegTransaction(e.token, fee, ws.eoaAddress, treasury, e.carved.fee);
      for (const [i, split] of configured.entries())
        await expectLegTransaction(
          e.token,
          splitTx[i] as string,
          ws.eoaAddress,
          split.destination,
          e.carved.splits[i] as bigint,
        );

      const settlement = await expectRecorded(ws, e, { merchant: net, splits: splitTx }, secret);
      expect(new Set([settlement.txRef, ...settlement.splits.map((s) => s.txRef)]).size).toBe(4);
    }
    const all = await api(ws, "GET", "/api/v1/settlements");
    expect(all.json().total).toBe(2);
  }, 240_000);

  it("a split of 0 (1 bps of a tiny net) is reported sent with no transaction, and nothing is sent for it", async () => {
    const ws = await createWorkspace(t);
    const secret = await registerWebhook(ws);
    const configured = await threeSplits(ws);
    const merchant = randomAddress();
    const created = await createPayment(ws, {
      tokenSymbol: "USDC",
      amount: "0.01",
      merchantWallet: merchant,
    });
    const carved = carveByHand(10_000n, [5000, 2500, 1]);
    // fee (1,500,000 + 5,000) / 10,000 = 150; net 9,850; 4,925 + 2,462 + 0; merchant 2,463.
    expect(carved).toEqual({
      gross: 10_000n,
      fee: 150n,
      net: 9_850n,
      splits: [4_925n, 2_462n, 0n],
      merchant: 2_463n,
    });
    const treasuryBefore = await balanceOf("USDC", devnet.accounts.treasury.address);
    await pay("USDC", created.receivingAddress, carved.gross);
    await waitForStatus(ws, created.payment.id, "forwarded");

    expect(await balanceOf("USDC", merchant)).toBe(2_463n);
    expect(await balanceOf("USDC", configured[0]?.destination as string)).toBe(4_925n);
    expect(await balanceOf("USDC", configured[1]?.destination as string)).toBe(2_462n);
    expect(await balanceOf("USDC", configured[2]?.destination as string)).toBe(0n);
    expect((await balanceOf("USDC", devnet.accounts.treasury.address)) - treasuryBefore).toBe(150n);
    const legs = await chainLegs(created.payment.id);
    expect(legs.map((leg) => leg.purpose)).toEqual([
      "settlement_net",
      "settlement_fee",
      `split:${configured[0]?.id}`,
      `split:${configured[1]?.id}`,
    ]);
    const tx = new Map(legs.map((leg) => [leg.purpose, leg.tx_hash]));
    const settlement = await expectRecorded(
      ws,
      {
        token: "USDC",
        paymentId: created.payment.id,
        merchantWallet: created.payment.merchantWallet,
        carved,
        configured,
      },
      {
        merchant: tx.get("settlement_net") ?? null,
        splits: [
          tx.get(`split:${configured[0]?.id}`) ?? null,
          tx.get(`split:${configured[1]?.id}`) ?? null,
          null,
        ],
      },
      secret,
    );
    expect(settlement.splits[2]).toMatchObject({ amount: "0.00", status: "sent", txRef: null });
  }, 120_000);
});

describe("an ETH payment received on the EOA while another payment of that EOA settles", () => {
  it("is settled in full: the other settlement's gas is not taken from it", async () => {
    // An app of its own (its own database and chain job) whose gas top-up job leaves wallets
    // alone (threshold 0): the EOA holds no ETH of its own, and gets gas on demand only, when a
    // settlement finds it short (as a wallet whose own ETH ran below a settlement's gas does).
    const own = await startTestApp(liveSmartWalletEnv(devnet, aa, { LIVE_GAS_TOPUP_THRESHOLD_WEI: "0" }));
    const ownWorkers = createWorkers(own.app, { dispatcher: { pollIntervalMs: 50 } });
    ownWorkers.start();
    try {
      const ws = await createWorkspace(own);
      const configured = await threeSplits(ws, own);
      const [usdcMerchant, ethMerchant] = [randomAddress(), randomAddress()];
      const usdcPayment = await createPayment(
        ws,
        { tokenSymbol: "USDC", amount: "40", merchantWallet: usdcMerchant },
        own,
      );
      const ethPayment = await createPayment(
        ws,
        { tokenSymbol: "ETH", amount: "0.5", merchantWallet: ethMerchant },
        own,
      );
      const treasury = devnet.accounts.treasury.address;
      const treasuryBefore = await balanceOf("ETH", treasury);
      expect(await balanceOf("ETH", ws.eoaAddress)).toBe(0n);
      // USDC paid in block N, ETH in N+1: at N+1 the USDC payment has its 2 confirmations and
      // settles (5 legs, gas paid by the EOA) while the ETH payment (1 confirmation) waits in the
      // same wallet. No more blocks until the USDC settlement acted: it either records its legs
      // (paying their gas from the ETH payment's money: the bug this guards against) or, since
      // that ETH is not its to spend, asks for a gas top-up first. The same order on every run.
      await rpc(devnet.rpcUrl, "evm_setAutomine", [false]);
      await rpc(devnet.rpcUrl, "evm_setIntervalMining", [0]);
      try {
        await clients.sendUsdc(ws.eoaAddress, parseUnits("40", 6));
        await rpc(devnet.rpcUrl, "evm_mine", []);
        await clients.payer.sendTransaction({ to: ws.eoaAddress as Address, value: parseEther("0.5") });
        await rpc(devnet.rpcUrl, "evm_mine", []);
        const deadline = Date.now() + 60_000;
        const topUpRecorded = async () =>
          (
            await own.database.db
              .selectFrom("chain_transactions")
              .select("tx_hash")
              .where("purpose", "=", "gas_topup")
              .where(sql<string>`lower(to_address)`, "=", ws.eoaAddress.toLowerCase())
              .execute()
          ).length > 0;
        while ((await chainLegs(usdcPayment.payment.id, own)).length < 5 && !(await topUpRecorded())) {
          if (Date.now() > deadline)
            throw new Error("the USDC settlement neither recorded its legs nor a top-up");
          await new Promise((r) => setTimeout(r, 50));
        }
      } finally {
        await rpc(devnet.rpcUrl, "evm_setAutomine", [true]);
        await rpc(devnet.rpcUrl, "evm_setIntervalMining", [1000]);
      }
      await waitForStatus(ws, usdcPayment.payment.id, "forwarded", 90_000, own);
      const deadline = Date.now() + 90_000;
      let eth: Json;
      for (;;) {
        const res = await api(ws, "GET", `/api/v1/payments/${ethPayment.payment.id}`, undefined, own);
        eth = res.json().payment as Json;
        if (eth.status === "forwarded" || eth.status === "failed") break;
        if (Date.now() > deadline) throw new Error(`the ETH payment stayed ${String(eth.status)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const topUps = await own.database.db
        .selectFrom("chain_transactions")
        .select(["amount", "status"])
        .where("purpose", "=", "gas_topup")
        .where("to_address", "=", ws.eoaAddress)
        .execute();
      expect(
        { status: eth.status, failureReason: eth.failureReason },
        `EOA ETH now ${await balanceOf("ETH", ws.eoaAddress)} wei; gas top-ups ${JSON.stringify(topUps)}`,
      ).toEqual({ status: "forwarded", failureReason: null });
      const carved = carveByHand(parseEther("0.5"), [5000, 2500, 1]);
      expect(await balanceOf("ETH", ethMerchant)).toBe(carved.merchant);
      for (const [i, split] of configured.entries())
        expect(await balanceOf("ETH", split.destination)).toBe(carved.splits[i]);
      expect((await balanceOf("ETH", treasury)) - treasuryBefore).toBe(carved.fee);
    } finally {
      await ownWorkers.stop();
      await own.close();
    }
  }, 180_000);
});

describe("a live payment with three splits, settled from the smart wallet", () => {
  it("pays every leg in ONE sponsored user operation: exact balances, one transaction, the settlement and its webhooks", async () => {
    const ws = await createWorkspace(t);
    const secret = await registerWebhook(ws);
    const wallet = await api(ws, "POST", `/api/v1/workspaces/${ws.id}/smart-wallet`);
    expect([200, 201], wallet.body).toContain(wallet.statusCode);
    const smart = wallet.json().smartWallet.address as Address;
    const configured = await threeSplits(ws);
    const { payments, forwarded, receiving, treasury, treasuryBefore } = await payBoth(
      ws,
      "smart_wallet",
      configured,
    );
    expect(receiving).toEqual([smart, smart]);

    for (const e of payments) {
      const { token, carved } = e;
      expect(await balanceOf(token, e.merchantWallet)).toBe(carved.merchant);
      for (const [i, split] of configured.entries())
        expect(await balanceOf(token, split.destination)).toBe(carved.splits[i]);
      expect((await balanceOf(token, treasury)) - treasuryBefore[token]).toBe(carved.fee);
      // Sponsored: the smart wallet keeps nothing of either payment, ETH included (no gas paid).
      expect(await balanceOf(token, smart)).toBe(0n);
    }
    // Nothing left the EOA: no transaction of its own, nothing recorded for these payments.
    expect(await chain.getTransactionCount({ address: ws.eoaAddress as Address })).toBe(0);

    const bundles = new Set<string>();
    for (const [p, e] of payments.entries()) {
      expect(await chainLegs(e.paymentId)).toEqual([]);
      const row = await t.database.db
        .selectFrom("payments")
        .select(["settlement_user_op_hash"])
        .where("id", "=", e.paymentId)
        .executeTakeFirstOrThrow();
      const userOpHash = row.settlement_user_op_hash as Hex;
      expect(userOpHash).toMatch(TX_HASH);
      const op = await bundler.getUserOperationReceipt({ hash: userOpHash });
      expect(op.success).toBe(true);
      expect(same(op.sender, smart)).toBe(true);
      expect(same(op.paymaster, aa.paymaster)).toBe(true);
      const txHash = op.receipt.transactionHash;

      // Every leg's txRef is that one transaction, which carried exactly one operation (this one).
      expect(forwarded[p]?.settlementTxHashes).toEqual({ net: txHash, fee: txHash });
      const receipt = await chain.getTransactionReceipt({ hash: txHash });
      expect(receipt.status).toBe("success");
      expect(same(receipt.to, aa.entryPoint)).toBe(true);
      const operations = receipt.logs
        .filter((log) => same(log.address, aa.entryPoint))
        .map((log) => {
          try {
            return decodeEventLog({ abi: entryPoint08Abi, data: log.data, topics: log.topics });
          } catch {
            return undefined;
          }
        })
        .filter((event) => event?.eventName === "UserOperationEvent");
      expect(operations).toHaveLength(1);
      expect(operations[0]?.args).toMatchObject({ userOpHash, success: true });
      bundles.add(txHash);

      if (e.token === "USDC") {
        // The five transfers, all in that transaction, from the smart wallet.
        const expected: Array<[string, string, bigint]> = [
          [smart.toLowerCase(), e.merchantWallet.toLowerCase(), e.carved.merchant],
          [smart.toLowerCase(), treasury.toLowerCase(), e.carved.fee],
          ...configured.map((split, i): [string, string, bigint] => [
            smart.toLowerCase(),
            split.destination,
            e.carved.splits[i] as bigint,
          ]),
        ];
        const byRecipient = (a: [string, string, bigint], b: [string, string, bigint]) =>
          a[1].localeCompare(b[1]);
        expect(usdcTransfers(receipt.logs).sort(byRecipient)).toEqual(expected.sort(byRecipient));
      }

      const settlement = await expectRecorded(
        ws,
        e,
        { merchant: txHash, splits: configured.map(() => txHash) },
        secret,
      );
      expect(new Set([settlement.txRef, ...settlement.splits.map((s) => s.txRef)])).toEqual(
        new Set([txHash]),
      );
    }
    // One operation per payment: two payments, two bundles.
    expect(bundles.size).toBe(2);
  }, 300_000);

  it("splits taking the whole net leave the merchant 0.00 with no leg (txRef null); the others in one operation", async () => {
    const ws = await createWorkspace(t);
    const secret = await registerWebhook(ws);
    const wallet = await api(ws, "POST", `/api/v1/workspaces/${ws.id}/smart-wallet`);
    expect([200, 201], wallet.body).toContain(wallet.statusCode);
    const smart = wallet.json().smartWallet.address as Address;
    const configured = await putSplits(ws, true, [
      { label: "seller", percentBps: 6000, destination: randomAddress() },
      { label: "platform", percentBps: 4000, destination: randomAddress() },
    ]);
    const merchant = randomAddress();
    const created = await createPayment(ws, {
      tokenSymbol: "USDC",
      amount: "10",
      merchantWallet: merchant,
      walletType: "smart_wallet",
    });
    const carved = carveByHand(10_000_000n, [6000, 4000]);
    expect(carved).toEqual({
      gross: 10_000_000n,
      fee: 150_000n,
      net: 9_850_000n,
      splits: [5_910_000n, 3_940_000n],
      merchant: 0n,
    });
    const treasury = devnet.accounts.treasury.address;
    const treasuryBefore = await balanceOf("USDC", treasury);
    await pay("USDC", smart, carved.gross);
    const forwarded = await waitForStatus(ws, created.payment.id, "forwarded");

    const row = await t.database.db
      .selectFrom("payments")
      .select("settlement_user_op_hash")
      .where("id", "=", created.payment.id)
      .executeTakeFirstOrThrow();
    const op = await bundler.getUserOperationReceipt({ hash: row.settlement_user_op_hash as Hex });
    expect(op.success).toBe(true);
    const txHash = op.receipt.transactionHash;
    expect(forwarded.settlementTxHashes).toEqual({ net: null, fee: txHash });
    expect(await balanceOf("USDC", merchant)).toBe(0n);
    expect(await balanceOf("USDC", configured[0]?.destination as string)).toBe(5_910_000n);
    expect(await balanceOf("USDC", configured[1]?.destination as string)).toBe(3_940_000n);
    expect((await balanceOf("USDC", treasury)) - treasuryBefore).toBe(150_000n);
    expect(await balanceOf("USDC", smart)).toBe(0n);
    const receipt = await chain.getTransactionReceipt({ hash: txHash });
    expect(usdcTransfers(receipt.logs).map(([, to, value]) => [to, value])).toEqual(
      expect.arrayContaining([
        [treasury.toLowerCase(), 150_000n],
        [configured[0]?.destination, 5_910_000n],
        [configured[1]?.destination, 3_940_000n],
      ]),
    );
    expect(usdcTransfers(receipt.logs)).toHaveLength(3);
    const settlement = await expectRecorded(
      ws,
      {
        token: "USDC",
        paymentId: created.payment.id,
        merchantWallet: created.payment.merchantWallet,
        carved,
        configured,
      },
      { merchant: null, splits: [txHash, txHash] },
      secret,
    );
    expect(settlement).toMatchObject({ merchantAmount: "0.00", txRef: null });
  }, 180_000);
});

describe("the snapshot taken at creation", () => {
  it("a payment created before a PUT settles with its own splits; one created after with the new ones; splits off: none", async () => {
    const ws = await createWorkspace(t);
    const secret = await registerWebhook(ws);
    const before = await threeSplits(ws);
    const merchants = [randomAddress(), randomAddress(), randomAddress()];
    const first = await createPayment(ws, {
      tokenSymbol: "USDC",
      amount: "10",
      merchantWallet: merchants[0],
    });

    // Changed: "seller" kept (same id) with another share and destination, "affiliate" dropped,
    // "tax" disabled, "partner" new.
    const [newSeller, partner] = [randomAddress(), randomAddress()];
    const after = await putSplits(ws, true, [
      { label: "seller", percentBps: 1000, destination: newSeller },
      { label: "tax", percentBps: 1, destination: before[2]?.destination, enabled: false },
      { label: "partner", percentBps: 3333, destination: partner },
    ]);
    expect(after[0]?.id).toBe(before[0]?.id);
    expect(after[1]?.id).toBe(before[2]?.id);
    expect(after[2]?.id).not.toBe(before[1]?.id);
    const second = await createPayment(ws, {
      tokenSymbol: "USDC",
      amount: "20",
      merchantWallet: merchants[1],
    });

    // Splits switched off: a third payment keeps no splits.
    await putSplits(ws, false, [{ label: "seller", percentBps: 1000, destination: newSeller }]);
    const third = await createPayment(ws, {
      tokenSymbol: "USDC",
      amount: "30",
      merchantWallet: merchants[2],
    });
    // Splits on, every split disabled: a fourth payment keeps an empty snapshot (events, no split).
    await putSplits(ws, true, [
      { label: "seller", percentBps: 1000, destination: newSeller, enabled: false },
    ]);
    const fourthMerchant = randomAddress();
    const fourth = await createPayment(ws, {
      tokenSymbol: "USDC",
      amount: "40",
      merchantWallet: fourthMerchant,
    });

    const snapshots = await t.database.db
      .selectFrom("payments")
      .select(["id", "split_snapshot"])
      .where("workspace_id", "=", ws.id)
      .execute();
    const snapshotOf = new Map(snapshots.map((row) => [row.id, row.split_snapshot]));
    expect(snapshotOf.get(first.payment.id)?.map((s) => s.splitId)).toEqual(before.map((s) => s.id));
    expect(snapshotOf.get(second.payment.id)?.map((s) => s.splitId)).toEqual([after[0]?.id, after[2]?.id]);
    expect(snapshotOf.get(third.payment.id)).toBeNull();
    expect(snapshotOf.get(fourth.payment.id)).toEqual([]);

    const treasuryBefore = await balanceOf("USDC", devnet.accounts.treasury.address);
    for (const [created, amount] of [
      [first, "10"],
      [second, "20"],
      [third, "30"],
      [fourth, "40"],
    ] as const)
      await pay("USDC", created.receivingAddress, parseUnits(amount, 6));
    for (const created of [first, second, third, fourth])
      await waitForStatus(ws, created.payment.id, "forwarded");

    const c1 = carveByHand(parseUnits("10", 6), [5000, 2500, 1]);
    const c2 = carveByHand(parseUnits("20", 6), [1000, 3333]);
    const c3 = carveByHand(parseUnits("30", 6), []);
    const c4 = carveByHand(parseUnits("40", 6), []);
    expect(c2).toEqual({
      gross: 20_000_000n,
      fee: 300_000n,
      net: 19_700_000n,
      splits: [1_970_000n, 6_566_010n], // 19,700,000 × 3333 / 10,000 = 6,566,010 exactly
      merchant: 11_163_990n,
    });
    expect(await balanceOf("USDC", merchants[0] as string)).toBe(c1.merchant);
    expect(await balanceOf("USDC", merchants[1] as string)).toBe(c2.merchant);
    expect(await balanceOf("USDC", merchants[2] as string)).toBe(c3.net);
    expect(await balanceOf("USDC", fourthMerchant)).toBe(c4.net);
    // The first payment's splits went to the old destinations, at the old shares; the disabled
    // "tax" got only the first payment's part; the new ones only the second's.
    expect(await balanceOf("USDC", before[0]?.destination as string)).toBe(c1.splits[0]);
    expect(await balanceOf("USDC", before[1]?.destination as string)).toBe(c1.splits[1]);
    expect(await balanceOf("USDC", before[2]?.destination as string)).toBe(c1.splits[2]);
    expect(await balanceOf("USDC", newSeller)).toBe(c2.splits[0]);
    expect(await balanceOf("USDC", partner)).toBe(c2.splits[1]);
    expect((await balanceOf("USDC", devnet.accounts.treasury.address)) - treasuryBefore).toBe(
      c1.fee + c2.fee + c3.fee + c4.fee,
    );

    const txOf = async (paymentId: string) =>
      new Map((await chainLegs(paymentId)).map((leg) => [leg.purpose, leg.tx_hash]));
    const tx1 = await txOf(first.payment.id);
    await expectRecorded(
      ws,
      {
        token: "USDC",
        paymentId: first.payment.id,
        merchantWallet: first.payment.merchantWallet,
        carved: c1,
        configured: before,
      },
      {
        merchant: tx1.get("settlement_net") ?? null,
        splits: before.map((s) => tx1.get(`split:${s.id}`) ?? null),
      },
      secret,
    );
    const tx2 = await txOf(second.payment.id);
    const secondSplits = [after[0], after[2]] as Configured[];
    await expectRecorded(
      ws,
      {
        token: "USDC",
        paymentId: second.payment.id,
        merchantWallet: second.payment.merchantWallet,
        carved: c2,
        configured: secondSplits,
      },
      {
        merchant: tx2.get("settlement_net") ?? null,
        splits: secondSplits.map((s) => tx2.get(`split:${s.id}`) ?? null),
      },
      secret,
    );
    expect([...tx2.keys()].sort()).toEqual(
      ["settlement_fee", "settlement_net", ...secondSplits.map((s) => `split:${s.id}`)].sort(),
    );

    // Splits off: the settlement is recorded (no split), with no settlement.recorded event.
    const tx3 = await txOf(third.payment.id);
    expect([...tx3.keys()].sort()).toEqual(["settlement_fee", "settlement_net"]);
    const plain = await settlementOf(ws, third.payment.id);
    expect(plain).toMatchObject({
      paymentIds: [third.payment.id],
      grossAmount: "30.00",
      feeAmount: "0.45",
      netAmount: "29.55",
      merchantAmount: "29.55",
      txRef: tx3.get("settlement_net"),
      splits: [],
    });
    const events = await outboxOf(ws);
    expect(events.filter((ev) => (ev.payload as Json).settlementId === plain.settlementId)).toEqual([]);

    // Splits on with none enabled: settlement.recorded with no split, no split.recorded.
    const tx4 = await txOf(fourth.payment.id);
    expect([...tx4.keys()].sort()).toEqual(["settlement_fee", "settlement_net"]);
    await expectRecorded(
      ws,
      {
        token: "USDC",
        paymentId: fourth.payment.id,
        merchantWallet: fourth.payment.merchantWallet,
        carved: c4,
        configured: [],
      },
      { merchant: tx4.get("settlement_net") ?? null, splits: [] },
      secret,
    );

    expect(events.filter((ev) => ev.event_type === "split.recorded")).toHaveLength(3 + 2);
    const recorded = (await outboxOf(ws)).filter((ev) => ev.event_type === "settlement.recorded");
    expect(recorded).toHaveLength(3);
    expect((await api(ws, "GET", "/api/v1/settlements")).json().total).toBe(4);

    // Another workspace's key, and this workspace's sandbox key, see none of them.
    const other = await createWorkspace(t);
    const foreign = await api(other, "GET", `/api/v1/settlements/${plain.settlementId}`);
    expect(foreign.statusCode).toBe(404);
    expect(foreign.json()).toMatchObject({ error: "Settlement not found" });
    expect((await api(other, "GET", `/api/v1/settlements?paymentId=${third.payment.id}`)).json()).toEqual({
      settlements: [],
      total: 0,
    });
    const sandbox = await t.request({
      method: "GET",
      url: `/api/v1/settlements/${plain.settlementId}`,
      headers: bearer(ws.testKey),
    });
    expect(sandbox.statusCode).toBe(404);
  }, 240_000);
});
