import { describe, expect, it } from "vitest";
import { bearer, createWorkspace } from "../support/app.ts";
import {
  address,
  balance,
  eventTypes,
  getOk,
  type Json,
  ledgerTx,
  ledgerTxsTo,
  outboxPayloads,
  pay,
  putSplits,
  SETTLEMENT_ADDRESS,
  settlementOf,
  splitId,
  TX,
  t,
  UUID,
  useSettlementsApp,
  withoutCreatedAt,
} from "../support/settlements.ts";

// How a sandbox settlement carves a payment (exact amounts, edges, 18-decimal tokens); its events
// and the list are in settlement-events.test.ts, the shared helpers in support/settlements.ts.

useSettlementsApp();

describe("sandbox settlement of a USDC payment with splits", () => {
  it("carves 100.00 USDC exactly: settlement field by field, ledger balances, both reads", async () => {
    const ws = await createWorkspace(t);
    const [partner, charity, paused, tiny] = [address(), address(), address(), address()];
    const config = await putSplits(ws.testKey, {
      enabled: true,
      splits: [
        { label: "Partner", percentBps: 2500, destination: partner },
        // Given in upper case: the settlement names it in lower case.
        { label: "Charity", percentBps: 333, destination: `0x${charity.slice(2).toUpperCase()}` },
        { label: "Paused", percentBps: 5000, destination: paused, enabled: false },
        { label: "Tiny", percentBps: 7, destination: tiny },
      ],
    });
    const before = Date.now();
    const payment = await pay(ws.testKey, { tokenSymbol: "USDC", amount: "100.00" });
    expect(payment.status).toBe("forwarded");

    const s = await settlementOf(ws.testKey, payment.id as string);
    // gross 100 000 000; fee 1.5% = 1 500 000; net 98 500 000.
    // Partner 25%: 98 500 000 × 2500 / 10000 = 24 625 000 → 24.625
    // Charity 3.33%: 98 500 000 × 333 / 10000 = 3 280 050 → 3.28005
    // Tiny 0.07%: 98 500 000 × 7 / 10000 = 68 950 → 0.06895
    // Paused: disabled, not carved. Merchant: 98 500 000 − 24 625 000 − 3 280 050 − 68 950 = 70 526 000.
    expect(s).toEqual({
      settlementId: expect.stringMatching(UUID),
      paymentIds: [payment.id],
      network: "sandbox-a",
      tokenSymbol: "USDC",
      grossAmount: "100.00",
      feeAmount: "1.50",
      netAmount: "98.50",
      merchantAmount: "70.526",
      merchantWallet: SETTLEMENT_ADDRESS,
      txRef: expect.stringMatching(TX),
      splits: [
        {
          splitId: splitId(config, "Partner"),
          label: "Partner",
          amount: "24.625",
          percent_bps: 2500,
          destination: partner,
          status: "sent",
          txRef: expect.stringMatching(TX),
        },
        {
          splitId: splitId(config, "Charity"),
          label: "Charity",
          amount: "3.28005",
          percent_bps: 333,
          destination: charity,
          status: "sent",
          txRef: expect.stringMatching(TX),
        },
        {
          splitId: splitId(config, "Tiny"),
          label: "Tiny",
          amount: "0.06895",
          percent_bps: 7,
          destination: tiny,
          status: "sent",
          txRef: expect.stringMatching(TX),
        },
      ],
      createdAt: payment.createdAt,
    });
    const at = Date.parse(s.createdAt as string);
    expect(at).toBeGreaterThanOrEqual(before - 1000);
    expect(at).toBeLessThanOrEqual(Date.now() + 1000);

    // The settlement id is not the payment's, and each transfer has its own transaction.
    expect(s.settlementId).not.toBe(payment.id);
    const splits = s.splits as Json[];
    const refs = [s.txRef, ...splits.map((x) => x.txRef)];
    expect(new Set(refs).size).toBe(4);

    // The simulated ledger: the merchant's part in the workspace's sandbox wallet, each split's
    // part at its destination, each by the transaction the settlement names.
    expect(await balance(ws.eoaAddress, "USDC")).toBe(70_526_000n);
    expect(await balance(partner, "USDC")).toBe(24_625_000n);
    expect(await balance(charity, "USDC")).toBe(3_280_050n);
    expect(await balance(tiny, "USDC")).toBe(68_950n);
    expect(await balance(paused, "USDC")).toBe(0n);
    expect(await ledgerTx(s.txRef)).toEqual({
      to: ws.eoaAddress.toLowerCase(),
      token: "USDC",
      amount: 70_526_000n,
      status: "success",
    });
    const expected: Array<[string, bigint]> = [
      [partner, 24_625_000n],
      [charity, 3_280_050n],
      [tiny, 68_950n],
    ];
    for (const [i, [to, amount]] of expected.entries()) {
      expect(await ledgerTx(splits[i]?.txRef)).toEqual({ to, token: "USDC", amount, status: "success" });
    }
    // The wallet balance the API shows is the merchant's part, not the net.
    const wallet = await getOk(ws.testKey, "/api/v1/wallet/balance");
    expect((wallet.eoa as { balances: Json }).balances.USDC).toBe("70.526");

    // The payment's events with the transition: created, forwarded, the settlement, one per split.
    expect(await eventTypes(ws.id)).toEqual([
      "payment.created",
      "payment.forwarded",
      "settlement.recorded",
      "split.recorded",
      "split.recorded",
      "split.recorded",
    ]);
    expect(await outboxPayloads(ws.id, "settlement.recorded")).toEqual([withoutCreatedAt(s)]);
    expect(await outboxPayloads(ws.id, "split.recorded")).toEqual(
      splits.map((x) => ({
        ...x,
        settlementId: s.settlementId,
        paymentIds: [payment.id],
        network: "sandbox-a",
      })),
    );
  });

  it("a later PUT does not change an earlier payment's splits (the snapshot)", async () => {
    const ws = await createWorkspace(t);
    const [first, second, extra] = [address(), address(), address()];
    const v1 = await putSplits(ws.testKey, {
      enabled: true,
      splits: [{ label: "Partner", percentBps: 1000, destination: first }],
    });
    const p1 = await pay(ws.testKey, { tokenSymbol: "USDC", amount: "50" });
    const s1 = await settlementOf(ws.testKey, p1.id as string);

    const v2 = await putSplits(ws.testKey, {
      enabled: true,
      splits: [
        { label: "Partner", percentBps: 5000, destination: second },
        { label: "Extra", percentBps: 100, destination: extra },
      ],
    });
    expect(splitId(v2, "Partner")).toBe(splitId(v1, "Partner"));
    const p2 = await pay(ws.testKey, { tokenSymbol: "USDC", amount: "50" });
    await putSplits(ws.testKey, { enabled: false, splits: [] });
    const p3 = await pay(ws.testKey, { tokenSymbol: "USDC", amount: "50" });

    // p1, under v1: net 49 250 000; Partner 10% = 4 925 000; merchant 44 325 000.
    expect(await settlementOf(ws.testKey, p1.id as string)).toEqual(s1);
    expect(s1).toMatchObject({
      netAmount: "49.25",
      merchantAmount: "44.325",
      splits: [
        {
          splitId: splitId(v1, "Partner"),
          label: "Partner",
          amount: "4.925",
          percent_bps: 1000,
          destination: first,
        },
      ],
    });
    // p2, under v2: Partner 50% = 24 625 000; Extra 1% = 492 500; merchant 24 132 500.
    const s2 = await settlementOf(ws.testKey, p2.id as string);
    expect(s2).toMatchObject({
      netAmount: "49.25",
      merchantAmount: "24.1325",
      splits: [
        { splitId: splitId(v1, "Partner"), amount: "24.625", percent_bps: 5000, destination: second },
        { splitId: splitId(v2, "Extra"), amount: "0.4925", percent_bps: 100, destination: extra },
      ],
    });
    // p3, splits off: the merchant gets the whole net.
    const s3 = await settlementOf(ws.testKey, p3.id as string);
    expect(s3).toMatchObject({ netAmount: "49.25", merchantAmount: "49.25", splits: [] });

    expect(new Set([s1.settlementId, s2.settlementId, s3.settlementId]).size).toBe(3);
    expect(await balance(first, "USDC")).toBe(4_925_000n);
    expect(await balance(second, "USDC")).toBe(24_625_000n);
    expect(await balance(extra, "USDC")).toBe(492_500n);
    // 44 325 000 + 24 132 500 + 49 250 000
    expect(await balance(ws.eoaAddress, "USDC")).toBe(117_707_500n);
    // Events: two settlements with splits (1 + 2 split events), none for p3.
    expect(await eventTypes(ws.id)).toEqual([
      "payment.created",
      "payment.forwarded",
      "settlement.recorded",
      "split.recorded",
      "payment.created",
      "payment.forwarded",
      "settlement.recorded",
      "split.recorded",
      "split.recorded",
      "payment.created",
      "payment.forwarded",
    ]);
  });

  it("splits summing to exactly 10000 leave the merchant only the rounding dust", async () => {
    const ws = await createWorkspace(t);
    const [a, b, c] = [address(), address(), address()];
    await putSplits(ws.testKey, {
      enabled: true,
      splits: [
        { label: "a", percentBps: 3333, destination: a },
        { label: "b", percentBps: 3333, destination: b },
        { label: "c", percentBps: 3334, destination: c },
      ],
    });
    const payment = await pay(ws.testKey, { tokenSymbol: "USDC", amount: "1.234567" });
    const s = await settlementOf(ws.testKey, payment.id as string);
    // gross 1 234 567; fee (1 234 567 × 150 + 5000) / 10000 = 18 519 (18 519.005 rounded);
    // net 1 216 048. a, b: 1 216 048 × 3333 / 10000 = 405 308.7984 → 405 308;
    // c: 1 216 048 × 3334 / 10000 = 405 430.4032 → 405 430. Merchant: 1 216 048 − 1 216 046 = 2.
    expect(s).toMatchObject({
      grossAmount: "1.234567",
      feeAmount: "0.018519",
      netAmount: "1.216048",
      merchantAmount: "0.000002",
    });
    expect((s.splits as Json[]).map((x) => [x.label, x.amount, x.status])).toEqual([
      ["a", "0.405308", "sent"],
      ["b", "0.405308", "sent"],
      ["c", "0.40543", "sent"],
    ]);
    expect(await balance(a, "USDC")).toBe(405_308n);
    expect(await balance(b, "USDC")).toBe(405_308n);
    expect(await balance(c, "USDC")).toBe(405_430n);
    expect(await balance(ws.eoaAddress, "USDC")).toBe(2n);
    expect(await ledgerTx(s.txRef)).toMatchObject({ amount: 2n });
  });

  it("a split whose part rounds to 0 is reported as 0.00, sent, with no transaction, and nothing moves", async () => {
    const ws = await createWorkspace(t);
    const [dust, half] = [address(), address()];
    await putSplits(ws.testKey, {
      enabled: true,
      splits: [
        { label: "Dust", percentBps: 1, destination: dust },
        { label: "Half", percentBps: 5000, destination: half },
      ],
    });
    const payment = await pay(ws.testKey, { tokenSymbol: "USDC", amount: "0.01" });
    const s = await settlementOf(ws.testKey, payment.id as string);
    // gross 10 000; fee (1 500 000 + 5000) / 10000 = 150; net 9 850.
    // Dust: 9 850 × 1 / 10000 = 0.985 → 0. Half: 9 850 × 5000 / 10000 = 4 925. Merchant 4 925.
    expect(s).toMatchObject({
      grossAmount: "0.01",
      feeAmount: "0.00015",
      netAmount: "0.00985",
      merchantAmount: "0.004925",
    });
    const [zero, nonzero] = s.splits as Json[];
    expect(zero).toEqual({
      splitId: expect.stringMatching(UUID),
      label: "Dust",
      amount: "0.00",
      percent_bps: 1,
      destination: dust,
      status: "sent",
      txRef: null,
    });
    expect(nonzero).toMatchObject({
      label: "Half",
      amount: "0.004925",
      status: "sent",
      txRef: expect.stringMatching(TX),
    });
    expect(await balance(dust, "USDC")).toBe(0n);
    expect(await ledgerTxsTo(dust)).toEqual([]);
    expect(await balance(half, "USDC")).toBe(4_925n);
    expect(await balance(ws.eoaAddress, "USDC")).toBe(4_925n);
    // The zero split still has its split.recorded, with the same report.
    const events = await outboxPayloads(ws.id, "split.recorded");
    expect(events.map((e) => [e.label, e.amount, e.status, e.txRef])).toEqual([
      ["Dust", "0.00", "sent", null],
      ["Half", "0.004925", "sent", nonzero?.txRef],
    ]);
  });
});

describe("sandbox settlement: edges", () => {
  it("splits taking the whole of a round net leave the merchant 0.00 with no transaction", async () => {
    const ws = await createWorkspace(t);
    const [a, b] = [address(), address()];
    await putSplits(ws.testKey, {
      enabled: true,
      splits: [
        { label: "a", percentBps: 5000, destination: a },
        { label: "b", percentBps: 5000, destination: b },
      ],
    });
    const payment = await pay(ws.testKey, { tokenSymbol: "USDC", amount: "100" });
    const s = await settlementOf(ws.testKey, payment.id as string);
    // net 98 500 000, half each = 49 250 000; nothing left for the merchant.
    expect(s).toMatchObject({ netAmount: "98.50", merchantAmount: "0.00", txRef: null });
    expect((s.splits as Json[]).map((x) => x.amount)).toEqual(["49.25", "49.25"]);
    expect(await balance(ws.eoaAddress, "USDC")).toBe(0n);
    expect(await ledgerTxsTo(ws.eoaAddress)).toEqual([]);
    expect(await balance(a, "USDC")).toBe(49_250_000n);
    expect(await balance(b, "USDC")).toBe(49_250_000n);
  });

  it("a replayed create (same Idempotency-Key) settles and credits once", async () => {
    const ws = await createWorkspace(t);
    const partner = address();
    await putSplits(ws.testKey, {
      enabled: true,
      splits: [{ label: "Partner", percentBps: 1000, destination: partner }],
    });
    const create = () =>
      t.request({
        method: "POST",
        url: "/api/v1/payments",
        headers: { ...bearer(ws.testKey), "idempotency-key": "settle-once" },
        payload: { tokenSymbol: "USDC", amount: "10" },
      });
    const first = await create();
    const again = await create();
    expect(first.statusCode, first.body).toBe(201);
    expect(again.json().payment.id).toBe(first.json().payment.id);
    await settlementOf(ws.testKey, first.json().payment.id);
    expect((await getOk(ws.testKey, "/api/v1/settlements")).total).toBe(1);
    // net 9 850 000; 10% = 985 000.
    expect(await balance(partner, "USDC")).toBe(985_000n);
    expect(await balance(ws.eoaAddress, "USDC")).toBe(8_865_000n);
    expect((await eventTypes(ws.id)).filter((e) => e.startsWith("s"))).toEqual([
      "settlement.recorded",
      "split.recorded",
    ]);
  });

  it("payments created together, in several workspaces, each keep their own workspace's sandbox configuration", async () => {
    const workspaces = await Promise.all(Array.from({ length: 6 }, () => createWorkspace(t)));
    const destinations = new Map<string, string | null>();
    await Promise.all(
      workspaces.map(async (ws, i) => {
        // The live configuration always differs, and must never apply to a sandbox payment.
        await putSplits(ws.liveKey, {
          enabled: true,
          splits: [{ label: "Live", percentBps: 9000, destination: address() }],
        });
        const destination = i % 3 === 2 ? null : address();
        destinations.set(ws.id, destination);
        if (destination)
          await putSplits(ws.testKey, {
            enabled: i % 3 === 0,
            splits: [{ label: `ws${i}`, percentBps: 100 * (i + 1), destination }],
          });
      }),
    );
    const created = await Promise.all(
      workspaces.flatMap((ws) =>
        [1, 2, 3].map(async () => ({
          ws,
          payment: await pay(ws.testKey, { tokenSymbol: "USDC", amount: "100" }),
        })),
      ),
    );
    for (const { ws, payment } of created) {
      const i = workspaces.indexOf(ws);
      const s = await settlementOf(ws.testKey, payment.id as string);
      if (i % 3 === 0) {
        // 98 500 000 × 100 bps / 10000 = 985 000 (ws0); × 400 bps = 3 940 000 (ws3).
        const [units, amount] = i === 0 ? [985_000n, "0.985"] : [3_940_000n, "3.94"];
        expect(s.splits).toEqual([
          {
            splitId: expect.stringMatching(UUID),
            label: `ws${i}`,
            amount,
            percent_bps: 100 * (i + 1),
            destination: destinations.get(ws.id),
            status: "sent",
            txRef: expect.stringMatching(TX),
          },
        ]);
        expect(await ledgerTx((s.splits as Json[])[0]?.txRef)).toMatchObject({ amount: units });
      } else {
        expect(s.splits).toEqual([]);
        expect(s.merchantAmount).toBe("98.50");
      }
    }
    for (const [i, ws] of workspaces.entries()) {
      const destination = destinations.get(ws.id);
      if (!destination) continue;
      expect(await balance(destination, "USDC")).toBe(
        i === 0 ? 3n * 985_000n : i === 3 ? 3n * 3_940_000n : 0n,
      );
    }
  });
});

describe("sandbox settlement of 18-decimal tokens", () => {
  it("ETH: every unit accounted for", async () => {
    const ws = await createWorkspace(t);
    const [big, small] = [address(), address()];
    await putSplits(ws.testKey, {
      enabled: true,
      splits: [
        { label: "Big", percentBps: 333, destination: big },
        { label: "Small", percentBps: 1, destination: small },
      ],
    });
    const payment = await pay(ws.testKey, { tokenSymbol: "ETH", amount: "0.123456789012345678" });
    const s = await settlementOf(ws.testKey, payment.id as string);
    // gross 123 456 789 012 345 678 wei; fee (gross × 150 + 5000) / 10000 = 1 851 851 835 185 185
    // (…185.67 rounded down); net 121 604 937 177 160 493.
    // Big: net × 333 / 10000 = 4 049 444 407 999 444; Small: net × 1 / 10000 = 12 160 493 717 716.
    // Merchant: net − both = 117 543 332 275 443 333.
    expect(s).toMatchObject({
      tokenSymbol: "ETH",
      grossAmount: "0.123456789012345678",
      feeAmount: "0.001851851835185185",
      netAmount: "0.121604937177160493",
      merchantAmount: "0.117543332275443333",
    });
    expect((s.splits as Json[]).map((x) => [x.label, x.amount, x.percent_bps, x.status])).toEqual([
      ["Big", "0.004049444407999444", 333, "sent"],
      ["Small", "0.000012160493717716", 1, "sent"],
    ]);
    expect(await balance(big, "ETH")).toBe(4_049_444_407_999_444n);
    expect(await balance(small, "ETH")).toBe(12_160_493_717_716n);
    expect(await balance(ws.eoaAddress, "ETH")).toBe(117_543_332_275_443_333n);
    // Nothing in another token.
    expect(await balance(big, "USDC")).toBe(0n);
  });

  it("ADAO", async () => {
    const ws = await createWorkspace(t);
    const [dao, one] = [address(), address()];
    await putSplits(ws.testKey, {
      enabled: true,
      splits: [
        { label: "DAO", percentBps: 1234, destination: dao },
        { label: "One bps", percentBps: 1, destination: one },
      ],
    });
    const payment = await pay(ws.testKey, { tokenSymbol: "ADAO", amount: "2500" });
    const s = await settlementOf(ws.testKey, payment.id as string);
    // gross 2500; fee 37.50; net 2462.50. DAO 12.34% = 303.8725; One bps 0.01% = 0.24625;
    // merchant 2462.5 − 303.8725 − 0.24625 = 2158.38125.
    expect(s).toMatchObject({
      tokenSymbol: "ADAO",
      grossAmount: "2500.00",
      feeAmount: "37.50",
      netAmount: "2462.50",
      merchantAmount: "2158.38125",
    });
    expect((s.splits as Json[]).map((x) => [x.label, x.amount])).toEqual([
      ["DAO", "303.8725"],
      ["One bps", "0.24625"],
    ]);
    expect(await balance(dao, "ADAO")).toBe(303_872_500_000_000_000_000n);
    expect(await balance(one, "ADAO")).toBe(246_250_000_000_000_000n);
    expect(await balance(ws.eoaAddress, "ADAO")).toBe(2_158_381_250_000_000_000_000n);
  });
});
