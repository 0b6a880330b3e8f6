import { randomBytes } from "node:crypto";
import type { InjectOptions, LightMyRequestResponse } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChainToken } from "../../src/chain/network.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { onTheLedger } from "../support/sandbox-balances.ts";
import { E6, Pools, text } from "../support/swap-pools.ts";

// Issue 38: every sandbox money flow on the second simulated network, sandbox-b (D22; docs/api.md
// "Networks (D22)"), through the HTTP API: payments with splits (EOA and smart wallet), refunds,
// payouts funded by the faucet, swaps, incoming transfers and their return, on-ramp sessions, and
// what reads them back (balance, stats, CSV exports). Each test asserts the exact balances of both
// networks: sandbox-b moved exactly as computed in the comments, sandbox-a did not move at all.
// The money on sandbox-a that some tests put there is what a flow reading the wrong network would
// (wrongly) succeed with or touch.

type Json = Record<string, unknown>;
type Balances = Partial<Record<ChainToken, string>>;

const TX = /^0x[0-9a-f]{64}$/;
const A = "sandbox-a";
const B = "sandbox-b";

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ RATE_LIMIT_SANDBOX: "100000", RATE_LIMIT_LIVE: "100000" });
});
afterAll(async () => t?.close());

const address = () => `0x${randomBytes(20).toString("hex")}`;

function call(method: "GET" | "POST" | "PUT", ws: CreatedWorkspace, url: string, payload?: unknown) {
  return t.request({
    method,
    url,
    headers: bearer(ws.testKey),
    ...(payload === undefined ? {} : { payload: payload as InjectOptions["payload"] }),
  });
}

function ok(res: LightMyRequestResponse, status = 200): Json {
  expect(res.statusCode, res.body).toBe(status);
  return res.json();
}

/** An address's balance on one simulated network, in smallest units. */
const onLedger = (network: string, holder: string, token: ChainToken = "USDC") =>
  t.app.services.ledger.balance(network, holder, token);

/** The holder's balance of `token` on [sandbox-a, sandbox-b]. */
const onBoth = async (holder: string, token: ChainToken = "USDC") => [
  await onLedger(A, holder, token),
  await onLedger(B, holder, token),
];

/** The network the simulated ledger recorded a transaction on. */
async function txNetwork(txHash: unknown): Promise<string | undefined> {
  expect(txHash).toMatch(TX);
  const row = await t.database.db
    .selectFrom("ledger_transactions")
    .select("network")
    .where("tx_hash", "=", txHash as string)
    .executeTakeFirst();
  return row?.network;
}

/** The `network` of each outbox event of `type` of the workspace, oldest first. */
async function eventNetworks(ws: CreatedWorkspace, type: string): Promise<unknown[]> {
  const rows = await t.database.db
    .selectFrom("outbox_events")
    .select("payload")
    .where("workspace_id", "=", ws.id)
    .where("event_type", "=", type)
    .orderBy("id")
    .execute();
  return rows.map((r) => (r.payload as Json).network);
}

async function faucet(
  ws: CreatedWorkspace,
  network: string,
  tokenSymbol: ChainToken,
  amount: string,
  walletType = "eoa",
) {
  return ok(await call("POST", ws, "/api/v1/sandbox/faucet", { tokenSymbol, amount, walletType, network }));
}

async function smartWalletOf(ws: CreatedWorkspace): Promise<string> {
  const res = await call("POST", ws, `/api/v1/workspaces/${ws.id}/smart-wallet`, {});
  return (ok(res, 201).smartWallet as Json).address as string;
}

/**
 * GET /api/v1/wallet/balance is exactly: these balances on sandbox-a (the default, at the top and
 * under networks) and on sandbox-b, every other balance zero.
 */
async function expectWallets(
  ws: CreatedWorkspace,
  smartWallet: string | null,
  onA: { eoa?: Balances; smartWallet?: Balances },
  onB: { eoa?: Balances; smartWallet?: Balances },
) {
  const zero = { USDC: "0.00", ETH: "0.00", ADAO: "0.00", DAI: "0.00" };
  const shown = {
    environment: "sandbox",
    eoa: { address: ws.eoaAddress, balances: { ...zero, ...onA.eoa } },
    smartWallet:
      smartWallet === null ? null : { address: smartWallet, balances: { ...zero, ...onA.smartWallet } },
  };
  expect(ok(await call("GET", ws, "/api/v1/wallet/balance"))).toEqual(onTheLedger(shown, onB));
}

/** A sandbox crypto payment: the 201 body (payment and receivingAddress). */
async function pay(ws: CreatedWorkspace, body: Json): Promise<Json> {
  return ok(await call("POST", ws, "/api/v1/payments", { paymentMethod: "crypto", ...body }), 201);
}

describe("sandbox-b: payments with splits", () => {
  it("settles on sandbox-b: the merchant's part in the EOA or smart wallet there, the split's part at its destination there, nothing on sandbox-a", async () => {
    const ws = await createWorkspace(t);
    const smart = await smartWalletOf(ws);
    const partner = address();
    const splits = ok(
      await call("PUT", ws, "/api/v1/splits", {
        enabled: true,
        splits: [{ label: "Partner", percentBps: 2500, destination: partner }],
      }),
    );
    const partnerSplit = (splits.splits as Json[])[0]?.id;

    const eoa = await pay(ws, { tokenSymbol: "USDC", amount: "100.00", network: B });
    const viaSmart = await pay(ws, {
      tokenSymbol: "USDC",
      amount: "40.00",
      network: B,
      walletType: "smart_wallet",
    });
    expect(eoa.receivingAddress).toBe(ws.eoaAddress);
    expect(viaSmart.receivingAddress).toBe(smart);
    for (const created of [eoa, viaSmart]) {
      const payment = created.payment as Json;
      expect(payment).toMatchObject({ network: B, status: "forwarded" });
      const read = ok(await call("GET", ws, `/api/v1/payments/${payment.id}`));
      expect((read.payment as Json).network).toBe(B);
    }

    // 100.00: fee 1.50, net 98.50; Partner 25% = 24.625; merchant 98.50 − 24.625 = 73.875.
    // 40.00: fee 0.60, net 39.40; Partner 25% = 9.85; merchant 39.40 − 9.85 = 29.55.
    const settlements: Json[] = [];
    for (const [created, merchant, split] of [
      [eoa, "73.875", "24.625"],
      [viaSmart, "29.55", "9.85"],
    ] as const) {
      const id = (created.payment as Json).id;
      const list = ok(await call("GET", ws, `/api/v1/settlements?paymentId=${id}`));
      expect(list.total).toBe(1);
      const s = (list.settlements as Json[])[0] as Json;
      expect(s).toMatchObject({
        paymentIds: [id],
        network: B,
        tokenSymbol: "USDC",
        merchantAmount: merchant,
        splits: [{ splitId: partnerSplit, amount: split, destination: partner, status: "sent" }],
      });
      // Each credit the settlement names was made on sandbox-b's ledger.
      expect(await txNetwork(s.txRef)).toBe(B);
      expect(await txNetwork((s.splits as Json[])[0]?.txRef)).toBe(B);
      settlements.push(s);
    }

    // The ledger: each part on sandbox-b; on sandbox-a, nothing anywhere.
    expect(await onBoth(ws.eoaAddress)).toEqual([0n, 73_875_000n]);
    expect(await onBoth(smart)).toEqual([0n, 29_550_000n]);
    // Partner: 24.625 + 9.85 = 34.475.
    expect(await onBoth(partner)).toEqual([0n, 34_475_000n]);
    await expectWallets(ws, smart, {}, { eoa: { USDC: "73.875" }, smartWallet: { USDC: "29.55" } });

    // Their events name sandbox-b: the payments, the settlements and each split.
    expect(await eventNetworks(ws, "payment.created")).toEqual([B, B]);
    expect(await eventNetworks(ws, "payment.forwarded")).toEqual([B, B]);
    expect(await eventNetworks(ws, "settlement.recorded")).toEqual([B, B]);
    expect(await eventNetworks(ws, "split.recorded")).toEqual([B, B]);
  });
});

describe("sandbox-b: refunds", () => {
  it("goes back on sandbox-b from the wallet there, never from the money on sandbox-a; naming sandbox-a → 400", async () => {
    const ws = await createWorkspace(t);
    // 50 USDC on sandbox-a: enough for any refund below, if one were (wrongly) sent there.
    await faucet(ws, A, "USDC", "50");
    const payment = (await pay(ws, { tokenSymbol: "USDC", amount: "10.00", network: B })).payment as Json;
    const refunds = `/api/v1/payments/${payment.id}/refunds`;
    // 10.00: net 9.85 in the EOA on sandbox-b.
    expect(await onBoth(ws.eoaAddress)).toEqual([50_000_000n, 9_850_000n]);
    const customer = address();

    const wrong = await call("POST", ws, refunds, {
      amount: "1.00",
      destinationAddress: customer,
      network: A,
    });
    expect(wrong.statusCode, wrong.body).toBe(400);
    expect(wrong.json()).toEqual({
      error: "The payment's money arrived on network sandbox-b: it goes back on that network",
      network: A,
      arrivedOn: B,
    });

    const first = ok(
      await call("POST", ws, refunds, { amount: "4.00", destinationAddress: customer, network: B }),
      201,
    ).refund as Json;
    expect(first).toMatchObject({
      network: B,
      amount: "4.00",
      status: "completed",
      destinationAddress: customer,
    });
    expect(await txNetwork(first.txHash)).toBe(B);
    // 9.85 − 4.00 = 5.85 left on sandbox-b; the customer got 4.00 there.
    expect(await onBoth(ws.eoaAddress)).toEqual([50_000_000n, 5_850_000n]);
    expect(await onBoth(customer)).toEqual([0n, 4_000_000n]);

    // The rest (6.00) is more than sandbox-b holds: refused naming sandbox-b, though sandbox-a has 50.
    const short = await call("POST", ws, refunds, { destinationAddress: customer });
    expect(short.statusCode, short.body).toBe(400);
    expect(short.json()).toEqual({
      error: "Insufficient balance",
      available: "5.85",
      requested: "6.00",
      tokenSymbol: "USDC",
      network: B,
    });

    // Without `network`: the payment's own, sandbox-b.
    const second = ok(await call("POST", ws, refunds, { amount: "5.85", destinationAddress: customer }), 201)
      .refund as Json;
    expect(second).toMatchObject({ network: B, amount: "5.85", status: "completed" });
    expect(await onBoth(ws.eoaAddress)).toEqual([50_000_000n, 0n]);
    // 4.00 + 5.85 = 9.85.
    expect(await onBoth(customer)).toEqual([0n, 9_850_000n]);
    const list = ok(await call("GET", ws, refunds));
    expect(list).toMatchObject({ total: 2, refunds: [first, second] });
    expect(ok(await call("GET", ws, `/api/v1/payments/${payment.id}`)).payment).toMatchObject({
      refundedAmount: "9.85",
    });
    expect(await eventNetworks(ws, "refund.completed")).toEqual([B, B]);
    await expectWallets(ws, null, { eoa: { USDC: "50.00" } }, {});
  });
});

describe("sandbox-b: payouts", () => {
  it("pays out what the faucet put on sandbox-b; money only on sandbox-a → Insufficient balance naming sandbox-b, nothing recorded", async () => {
    const ws = await createWorkspace(t);
    const smart = await smartWalletOf(ws);
    const payee = address();
    const body = { tokenSymbol: "USDC", destinationAddress: payee, network: B };
    expect(await faucet(ws, A, "USDC", "500")).toEqual({
      tokenSymbol: "USDC",
      walletType: "eoa",
      address: ws.eoaAddress,
      network: A,
      balance: "500.00",
    });

    // Only sandbox-a holds money: sandbox-b's wallet has none to pay with.
    const none = await call("POST", ws, "/api/v1/payouts", { ...body, amount: "10" });
    expect(none.statusCode, none.body).toBe(400);
    expect(none.json()).toEqual({
      error: "Insufficient balance",
      available: "0.00",
      requested: "10.00",
      tokenSymbol: "USDC",
      network: B,
    });
    expect(ok(await call("GET", ws, "/api/v1/payouts")).total).toBe(0);
    expect(
      await t.database.db.selectFrom("payouts").select("id").where("workspace_id", "=", ws.id).execute(),
    ).toEqual([]);

    expect(await faucet(ws, B, "USDC", "100")).toEqual({
      tokenSymbol: "USDC",
      walletType: "eoa",
      address: ws.eoaAddress,
      network: B,
      balance: "100.00",
    });
    const paid = ok(await call("POST", ws, "/api/v1/payouts", { ...body, amount: "30" })).payout as Json;
    expect(paid).toMatchObject({
      network: B,
      amount: "30.00",
      status: "completed",
      fromAddress: ws.eoaAddress,
    });
    expect(await txNetwork(paid.txHash)).toBe(B);
    expect(await onBoth(ws.eoaAddress)).toEqual([500_000_000n, 70_000_000n]);
    expect(await onBoth(payee)).toEqual([0n, 30_000_000n]);

    // 70 left on sandbox-b: 80 is refused with sandbox-b's figures, whatever sandbox-a holds.
    const over = await call("POST", ws, "/api/v1/payouts", { ...body, amount: "80" });
    expect(over.statusCode, over.body).toBe(400);
    expect(over.json()).toEqual({
      error: "Insufficient balance",
      available: "70.00",
      requested: "80.00",
      tokenSymbol: "USDC",
      network: B,
    });

    // The smart wallet's payout on sandbox-b spends its sandbox-b balance.
    expect(await faucet(ws, B, "USDC", "20", "smart_wallet")).toMatchObject({ address: smart, network: B });
    const fromSmart = ok(
      await call("POST", ws, "/api/v1/payouts", { ...body, amount: "5", walletType: "smart_wallet" }),
    ).payout as Json;
    expect(fromSmart).toMatchObject({ network: B, amount: "5.00", status: "completed", fromAddress: smart });
    expect(await onBoth(smart)).toEqual([0n, 15_000_000n]);
    // 30 + 5.
    expect(await onBoth(payee)).toEqual([0n, 35_000_000n]);

    expect(ok(await call("GET", ws, "/api/v1/payouts")).total).toBe(2);
    expect(await eventNetworks(ws, "payout.completed")).toEqual([B, B]);
    await expectWallets(
      ws,
      smart,
      { eoa: { USDC: "500.00" } },
      { eoa: { USDC: "70.00" }, smartWallet: { USDC: "15.00" } },
    );
  });
});

describe("sandbox-b: swaps", () => {
  it("trades against sandbox-b's own pools: balances move on sandbox-b only, and a trade on sandbox-a leaves sandbox-b's price", async () => {
    const ws = await createWorkspace(t);
    await faucet(ws, B, "USDC", "10000");
    await faucet(ws, A, "USDC", "10000");
    const [poolsA, poolsB] = [new Pools(), new Pools()];
    const quote = async (network: string, amount: string) =>
      ok(
        await call(
          "GET",
          ws,
          `/api/v1/swap/quote?sellToken=USDC&buyToken=ETH&sellAmount=${amount}&network=${network}`,
        ),
      );

    const onB = await quote(B, "3000");
    const eB = poolsB.expect("USDC", "ETH", "exact_in", 3000n * E6);
    expect(onB).toMatchObject({
      network: B,
      ...{ sellToken: "USDC", buyToken: "ETH", fromAddress: ws.eoaAddress },
      sellAmount: "3000.00",
      buyAmount: text(eB.bought, "ETH"),
      minBuyAmount: text(eB.minBuy, "ETH"),
      price: eB.price,
      priceImpactBps: eB.impact,
    });
    const pool = ((onB.route as Json[])[0] as Json).pool as string;

    // A swap runs on its quote's network: naming another is refused, nothing moves.
    const elsewhere = await call("POST", ws, "/api/v1/swap", { quoteId: onB.quoteId, network: A });
    expect(elsewhere.statusCode, elsewhere.body).toBe(400);
    expect(elsewhere.json()).toMatchObject({
      error: "The quote is on network sandbox-b: a swap executes on its quote's network",
    });
    expect(ok(await call("GET", ws, "/api/v1/swaps")).total).toBe(0);

    const swapB = ok(await call("POST", ws, "/api/v1/swap", { quoteId: onB.quoteId }));
    expect(swapB).toMatchObject({
      network: B,
      status: "completed",
      sellAmount: "3000.00",
      buyAmount: text(eB.bought, "ETH"),
    });
    expect(await txNetwork(swapB.txHash)).toBe(B);
    poolsB.apply("USDC", "ETH", eB.sold, eB.bought);
    // 10000 − 3000 USDC and the ETH bought, on sandbox-b; the pool got the 3000 there.
    expect(await onBoth(ws.eoaAddress)).toEqual([10_000n * E6, 7_000n * E6]);
    expect(await onBoth(ws.eoaAddress, "ETH")).toEqual([0n, eB.bought]);
    expect(await onBoth(pool)).toEqual([0n, 3_000n * E6]);

    // sandbox-a's pool is still the documented starting one: sandbox-b's trade is not in its price.
    const onA = await quote(A, "6000");
    const eA = poolsA.expect("USDC", "ETH", "exact_in", 6000n * E6);
    expect(onA).toMatchObject({ network: A, buyAmount: text(eA.bought, "ETH"), price: eA.price });
    const swapA = ok(await call("POST", ws, "/api/v1/swap", { quoteId: onA.quoteId }));
    expect(swapA).toMatchObject({ network: A, status: "completed", buyAmount: text(eA.bought, "ETH") });
    poolsA.apply("USDC", "ETH", eA.sold, eA.bought);

    // And sandbox-b's pool has moved by its own trade only, not by sandbox-a's.
    const again = await quote(B, "300");
    const eB2 = poolsB.expect("USDC", "ETH", "exact_in", 300n * E6);
    expect(again).toMatchObject({ network: B, buyAmount: text(eB2.bought, "ETH"), price: eB2.price });
    const reserves = await t.database.db
      .selectFrom("sandbox_swap_pools")
      .select(["network", "pair", "base_reserve", "quote_reserve"])
      .where("workspace_id", "=", ws.id)
      .orderBy("network")
      .execute();
    expect(reserves.map((r) => [r.network, r.pair, BigInt(r.base_reserve), BigInt(r.quote_reserve)])).toEqual(
      [
        [A, "USDC/ETH", ...(poolsA.reserves.get("ETH") ?? [])],
        [B, "USDC/ETH", ...(poolsB.reserves.get("ETH") ?? [])],
      ],
    );

    expect(await onBoth(pool)).toEqual([6_000n * E6, 3_000n * E6]);
    expect(await eventNetworks(ws, "swap.completed")).toEqual([B, A]);
    await expectWallets(
      ws,
      null,
      { eoa: { USDC: "4000.00", ETH: text(eA.bought, "ETH") } },
      { eoa: { USDC: "7000.00", ETH: text(eB.bought, "ETH") } },
    );
  });
});

describe("sandbox-b: incoming transfers", () => {
  it("lands in the inbox as sandbox-b's; its return leaves on sandbox-b", async () => {
    const ws = await createWorkspace(t);
    // 100 USDC on sandbox-a: a return sent from there would (wrongly) succeed.
    await faucet(ws, A, "USDC", "100");
    const payer = address();
    const transfer = ok(
      await call("POST", ws, "/api/v1/sandbox/incoming-transfer", {
        tokenSymbol: "USDC",
        amount: "7.5",
        fromAddress: payer,
        network: B,
      }),
      201,
    ).transfer as Json;
    expect(transfer).toMatchObject({
      network: B,
      status: "open",
      amount: "7.50",
      from: payer,
      to: ws.eoaAddress,
    });
    expect(await txNetwork(transfer.txHash)).toBe(B);
    expect(await onBoth(ws.eoaAddress)).toEqual([100_000_000n, 7_500_000n]);
    const inbox = ok(await call("GET", ws, "/api/v1/transfers/unmatched"));
    expect(inbox).toMatchObject({ total: 1, transfers: [transfer] });

    const returned = ok(await call("POST", ws, `/api/v1/transfers/unmatched/${transfer.id}/return`, {}), 201)
      .refund as Json;
    expect(returned).toMatchObject({
      network: B,
      amount: "7.50",
      destinationAddress: payer,
      status: "completed",
      unmatchedTransferId: transfer.id,
    });
    expect(await txNetwork(returned.txHash)).toBe(B);
    // 7.50 back to the payer on sandbox-b; sandbox-a's 100 untouched.
    expect(await onBoth(ws.eoaAddress)).toEqual([100_000_000n, 0n]);
    expect(await onBoth(payer)).toEqual([0n, 7_500_000n]);
    const after = ok(await call("GET", ws, "/api/v1/transfers/unmatched"));
    expect(after.transfers).toEqual([{ ...transfer, status: "returned" }]);
    expect(await eventNetworks(ws, "refund.completed")).toEqual([B]);
    await expectWallets(ws, null, { eoa: { USDC: "100.00" } }, {});
  });
});

describe("sandbox-b: on-ramp sessions", () => {
  it("credits the wallet on sandbox-b at the sandbox's rates", async () => {
    const ws = await createWorkspace(t);
    const smart = await smartWalletOf(ws);
    const create = (body: Json) => call("POST", ws, "/api/v1/onramp/session", { ...body, network: B });
    // 25 US dollars → 25 USDC; 300 US dollars → 0.1 ETH (1 ETH per 3,000), to the smart wallet.
    const usdc = ok(await create({ destinationCurrency: "USDC", sourceAmount: "25" }), 201);
    const eth = ok(
      await create({ destinationCurrency: "ETH", sourceAmount: "300", walletType: "smart_wallet" }),
      201,
    );
    expect(usdc).toMatchObject({
      network: B,
      status: "fulfillment_complete",
      walletAddress: ws.eoaAddress,
      creditedAmount: "25.00",
    });
    expect(eth).toMatchObject({ network: B, walletAddress: smart, creditedAmount: "0.10" });
    for (const session of [usdc, eth]) {
      expect(await txNetwork(session.transactionId)).toBe(B);
      expect(ok(await call("GET", ws, `/api/v1/onramp/sessions/${session.id}`)).network).toBe(B);
    }
    expect(await onBoth(ws.eoaAddress)).toEqual([0n, 25_000_000n]);
    expect(await onBoth(smart, "ETH")).toEqual([0n, 100_000_000_000_000_000n]);
    expect(await eventNetworks(ws, "onramp.completed")).toEqual([B, B]);
    await expectWallets(ws, smart, {}, { eoa: { USDC: "25.00" }, smartWallet: { ETH: "0.10" } });
  });
});

describe("sandbox-b: what reads the money back", () => {
  it("wallet balance, stats per network and the CSV exports filtered by network", async () => {
    const ws = await createWorkspace(t);
    const onA = (await pay(ws, { tokenSymbol: "USDC", amount: "10.00" })).payment as Json;
    const usdcB = (await pay(ws, { tokenSymbol: "USDC", amount: "20.00", network: B })).payment as Json;
    const ethB = (await pay(ws, { tokenSymbol: "ETH", amount: "0.5", network: B })).payment as Json;
    expect([onA.network, usdcB.network, ethB.network]).toEqual([A, B, B]);
    await faucet(ws, B, "USDC", "100");
    await faucet(ws, A, "USDC", "5");
    const payout = async (network: string, amount: string) =>
      (
        ok(
          await call("POST", ws, "/api/v1/payouts", {
            tokenSymbol: "USDC",
            amount,
            destinationAddress: address(),
            network,
          }),
        ).payout as Json
      ).txHash;
    const payoutB = await payout(B, "15");
    const payoutA = await payout(A, "2");

    // sandbox-a: 10.00 − 1.5% = 9.85, + 5 − 2 = 12.85 USDC.
    // sandbox-b: 20.00 − 1.5% = 19.70, + 100 − 15 = 104.70 USDC; 0.5 − 1.5% = 0.4925 ETH.
    await expectWallets(ws, null, { eoa: { USDC: "12.85" } }, { eoa: { USDC: "104.70", ETH: "0.4925" } });

    const stats = ok(await call("GET", ws, "/api/v1/wallet/stats"));
    expect(stats.payments).toEqual([
      { status: "forwarded", tokenSymbol: "ETH", count: 1, volume: "0.50" },
      { status: "forwarded", tokenSymbol: "USDC", count: 2, volume: "30.00" },
    ]);
    expect(stats.payouts).toEqual([{ status: "completed", tokenSymbol: "USDC", count: 2, volume: "17.00" }]);
    expect(stats.networks).toEqual({
      [A]: {
        payments: [{ status: "forwarded", tokenSymbol: "USDC", count: 1, volume: "10.00" }],
        payouts: [{ status: "completed", tokenSymbol: "USDC", count: 1, volume: "2.00" }],
      },
      [B]: {
        payments: [
          { status: "forwarded", tokenSymbol: "ETH", count: 1, volume: "0.50" },
          { status: "forwarded", tokenSymbol: "USDC", count: 1, volume: "20.00" },
        ],
        payouts: [{ status: "completed", tokenSymbol: "USDC", count: 1, volume: "15.00" }],
      },
    });

    // Each export's records, as [payment id or payout txHash, network] (none of them quoted).
    const exported = async (what: "payments" | "payouts", network: string) => {
      const key = what === "payments" ? 0 : 8;
      const res = await call("GET", ws, `/api/v1/${what}/export.csv?network=${network}`);
      expect(res.statusCode, res.body).toBe(200);
      const lines = res.body.split("\r\n").slice(0, -1);
      expect(lines[0]?.split(",")[3]).toBe("network");
      expect(lines[0]?.split(",")[key]).toBe(what === "payments" ? "id" : "txHash");
      return lines
        .slice(1)
        .map((line) => line.split(","))
        .map((cells) => [cells[key], cells[3]])
        .sort();
    };
    expect(await exported("payments", B)).toEqual(
      [
        [usdcB.id, B],
        [ethB.id, B],
      ].sort(),
    );
    expect(await exported("payments", A)).toEqual([[onA.id, A]]);
    expect(await exported("payouts", B)).toEqual([[payoutB, B]]);
    expect(await exported("payouts", A)).toEqual([[payoutA, A]]);
  });
});
