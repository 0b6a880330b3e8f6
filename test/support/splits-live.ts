// What the live splits suites (test/splits/live-*.test.ts) share.

import { createHmac } from "node:crypto";
import { type Address, type Hex, type PublicClient, parseUnits } from "viem";
import type { BundlerClient } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { expect } from "vitest";
import type { Devnet } from "../../src/devnet/chain.ts";
import type { Workers } from "../../src/workers.ts";
import { bearer, type CreatedWorkspace, type TestApp } from "./app.ts";
import type { DevnetClients } from "./devnet-clients.ts";
import { LIVE_DEFAULT } from "./devnet-env.ts";
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

// Splits (D15) settled for real on the devnet: a live crypto payment received on the workspace
// EOA (one transaction per leg) or on its smart wallet (ONE sponsored user operation carrying
// every leg) pays the merchant's part of the net, the fee to the treasury and each split of the
// payment's snapshot, floor(net × percentBps / 10000) each, the merchant the rest. Every expected
// amount is computed here by hand (bigint) from D15's rule, never by the service's code, and
// checked against the chain (exact balances, each leg's transfer), the settlements API and the
// settlement.recorded / split.recorded webhook bodies a local receiver gets.

export const TX_HASH = /^0x[0-9a-f]{64}$/;

export type Json = Record<string, unknown>;

export const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;
export const same = (a: string | null | undefined, b: string) => a?.toLowerCase() === b.toLowerCase();

/** D15 by hand: fee half up at 150 bps, net = gross − fee, each split floored, the merchant the rest. */
export function carveByHand(gross: bigint, bps: readonly number[]) {
  const fee = (gross * FEE_BPS + WHOLE / 2n) / WHOLE;
  const net = gross - fee;
  const splits = bps.map((b) => (net * BigInt(b)) / WHOLE);
  const merchant = splits.reduce((rest, part) => rest - part, net);
  return { gross, fee, net, splits, merchant };
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

/** Sends `units` of `token` from the devnet payer to `to`, waiting for a successful receipt. */
export async function pay(token: Token, to: string, units: bigint): Promise<Hex> {
  const hash =
    token === "USDC"
      ? await clients.sendUsdc(to, units)
      : await clients.payer.sendTransaction({ to: to as Address, value: units });
  const receipt = await chain.waitForTransactionReceipt({ hash });
  expect(receipt.status).toBe("success");
  return hash;
}

/** The USDC Transfer events of a receipt, as [from, to, value] in lower case. */
export const usdcTransfers = (logs: Parameters<typeof usdcTransfersOf>[1]) =>
  usdcTransfersOf(devnet.tokens.USDC, logs);

/** A leg sent as its own transaction: mined with success, from `from`, paying `amount` to `to` and nothing else. */
export async function expectLegTransaction(
  token: Token,
  txHash: string,
  from: string,
  to: string,
  amount: bigint,
) {
  await expectTransferTransaction({ chain, usdc: devnet.tokens.USDC }, { token, txHash, from, to, amount });
}

// ---------------------------------------------------------------------------------------------
// Service

export const api = (
  ws: CreatedWorkspace,
  method: "GET" | "POST" | "PUT",
  url: string,
  payload?: Json,
  app: TestApp = t,
) => app.request({ method, url, headers: bearer(ws.liveKey), ...(payload ? { payload } : {}) });

export interface Configured {
  id: string;
  label: string;
  percentBps: number;
  destination: string;
  enabled: boolean;
}

export async function putSplits(
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
export async function threeSplits(ws: CreatedWorkspace, app: TestApp = t) {
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

export async function registerWebhook(ws: CreatedWorkspace): Promise<string> {
  const res = await api(ws, "POST", "/api/v1/webhooks", { url: receiver.url, events: ["*"] });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().webhook.signingSecret as string;
}

export async function createPayment(ws: CreatedWorkspace, body: Json, app: TestApp = t) {
  const res = await api(ws, "POST", "/api/v1/payments", body, app);
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as { payment: { id: string; merchantWallet: string }; receivingAddress: string };
}

export async function waitForStatus(
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

export interface SettlementAnswer {
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
export async function settlementOf(ws: CreatedWorkspace, paymentId: string): Promise<SettlementAnswer> {
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

export async function chainLegs(paymentId: string, app: TestApp = t) {
  return app.database.db
    .selectFrom("chain_transactions")
    .select(["purpose", "tx_hash", "status", "nonce", "to_address", "amount", "from_address"])
    .where("payment_id", "=", paymentId)
    .orderBy("nonce")
    .execute();
}

export const outboxOf = (ws: CreatedWorkspace) =>
  t.database.db
    .selectFrom("outbox_events")
    .select(["id", "event_type", "payload"])
    .where("workspace_id", "=", ws.id)
    .where("environment", "=", "live")
    .orderBy("id")
    .execute();

/** The webhook deliveries (by the receiver) of one settlement's events, signature checked. */
export async function deliveriesOf(settlementId: string, splits: number, secret: string) {
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

export interface Expected {
  token: Token;
  paymentId: string;
  merchantWallet: string;
  carved: ReturnType<typeof carveByHand>;
  configured: Configured[];
}

/** The settlement view D15 describes, with each leg's transaction as given. */
export function expectedView(e: Expected, txRefs: { merchant: string | null; splits: Array<string | null> }) {
  return {
    paymentIds: [e.paymentId],
    // The devnet's one live network (D22).
    network: LIVE_DEFAULT.id,
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
export async function expectRecorded(
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
        network: LIVE_DEFAULT.id,
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
export async function payBoth(
  ws: CreatedWorkspace,
  walletType: "eoa" | "smart_wallet",
  configured: Configured[],
) {
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

/** A devnet (with account abstraction), the app, its workers and a webhook receiver for the file. */
export function useSplitsLive(): void {
  useLiveService({}, (service) => {
    ({ devnet, aa, t, workers, receiver, chain, bundler, clients } = service);
  });
}
