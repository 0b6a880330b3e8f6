import { describe, expect, it } from "vitest";
import { startTestApp } from "../support/app.ts";
import { onTheLedger } from "../support/sandbox-balances.ts";
import {
  eoaBalances,
  faucet,
  get,
  ISO,
  ledgerBalance,
  ledgerTransfersFrom,
  MSG,
  newWorkspace,
  outbox,
  payout,
  payoutRows,
  payoutState,
  post,
  randomAddress,
  TX_HASH,
  t,
  useSandboxPayoutsApp,
} from "../support/sandbox-payouts.ts";

// Sandbox payouts: success, validation and pre-checks, idempotencyKey. The circuit breaker:
// sandbox-breaker.test.ts; events and history: sandbox-events.test.ts; helpers: support/sandbox-payouts.ts.

useSandboxPayoutsApp();

describe("sandbox payouts: success", () => {
  it("pays out from a faucet-funded wallet: 200 with the payout, and the balances move", async () => {
    const ws = await newWorkspace();
    const funded = await faucet(ws, "USDC", "100");
    expect(funded).toEqual({
      tokenSymbol: "USDC",
      walletType: "eoa",
      address: ws.eoaAddress,
      network: "sandbox-a",
      balance: "100.00",
    });

    const before = await get(ws.testKey, "/api/v1/wallet/balance");
    expect(before.json()).toEqual(
      onTheLedger({
        environment: "sandbox",
        eoa: { address: ws.eoaAddress, balances: { USDC: "100.00", ETH: "0.00", ADAO: "0.00", DAI: "0.00" } },
        smartWallet: null,
      }),
    );

    const destination = randomAddress();
    const res = await payout(ws.testKey, {
      tokenSymbol: "USDC",
      amount: "10",
      destinationAddress: destination,
      description: "Refund #42",
      metadata: { orderId: "ord_42" },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^application\/json/);
    const body = res.json();
    expect(body.timestamp).toMatch(ISO);
    expect(body.payout).toMatchObject({
      txHash: expect.stringMatching(TX_HASH),
      amount: "10.00",
      tokenSymbol: "USDC",
      destinationAddress: destination,
      fromAddress: ws.eoaAddress,
      environment: "sandbox",
      status: "completed",
      description: "Refund #42",
      metadata: { orderId: "ord_42" },
    });

    const after = await get(ws.testKey, "/api/v1/wallet/balance");
    expect(after.json()).toEqual(
      onTheLedger({
        environment: "sandbox",
        eoa: { address: ws.eoaAddress, balances: { USDC: "90.00", ETH: "0.00", ADAO: "0.00", DAI: "0.00" } },
        smartWallet: null,
      }),
    );
    expect(await ledgerBalance(destination, "USDC")).toBe(10_000_000n);
    const transfers = await ledgerTransfersFrom(ws);
    expect(transfers).toEqual([
      {
        tx_hash: body.payout.txHash,
        to_address: destination.toLowerCase(),
        amount: "10000000",
        status: "success",
        token_symbol: "USDC",
      },
    ]);
  });

  it("pays out ETH and ADAO with exact amounts (no rounding, no exponent)", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "ETH", "1");
    await faucet(ws, "ADAO", "50");
    const destination = randomAddress();
    const eth = await payout(ws.testKey, {
      tokenSymbol: "ETH",
      amount: "0.000015",
      destinationAddress: destination,
    });
    expect(eth.statusCode, eth.body).toBe(200);
    expect(eth.json().payout).toMatchObject({ amount: "0.000015", tokenSymbol: "ETH", status: "completed" });
    const adao = await payout(ws.testKey, {
      tokenSymbol: "ADAO",
      amount: "12.123456789012345678",
      destinationAddress: destination,
    });
    expect(adao.statusCode, adao.body).toBe(200);
    expect(adao.json().payout).toMatchObject({ amount: "12.123456789012345678", tokenSymbol: "ADAO" });
    expect(await eoaBalances(ws)).toEqual({
      USDC: "0.00",
      ETH: "0.999985",
      ADAO: "37.876543210987654322",
      DAI: "0.00",
    });
    expect(await ledgerBalance(destination, "ETH")).toBe(15_000_000_000_000n);
    expect(await ledgerBalance(destination, "ADAO")).toBe(12_123_456_789_012_345_678n);
  });

  it("a sandbox payment credits the net amount to the workspace wallet, which can then be paid out", async () => {
    const ws = await newWorkspace();
    const created = await post(ws.testKey, "/api/v1/payments", {
      tokenSymbol: "USDC",
      amount: "100",
      merchantWallet: randomAddress(),
    });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json().payment.status).toBe("forwarded");
    expect((await eoaBalances(ws)).USDC).toBe("98.50");

    const all = await payout(ws.testKey, {
      tokenSymbol: "USDC",
      amount: "98.50",
      destinationAddress: randomAddress(),
    });
    expect(all.statusCode, all.body).toBe(200);
    expect((await eoaBalances(ws)).USDC).toBe("0.00");

    const more = await payout(ws.testKey, {
      tokenSymbol: "USDC",
      amount: "0.01",
      destinationAddress: randomAddress(),
    });
    expect(more.statusCode, more.body).toBe(400);
    expect(more.json()).toEqual({
      error: MSG.insufficient,
      available: "0.00",
      requested: "0.01",
      tokenSymbol: "USDC",
      network: "sandbox-a",
    });
  });
});

describe("sandbox payouts: validation and pre-checks (part 7)", () => {
  const valid = () => ({ tokenSymbol: "USDC", amount: "1", destinationAddress: randomAddress() });

  it("answers every validation error with the interface's message, word for word", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    const cases: Array<[string, unknown, string]> = [
      ["empty body object", {}, MSG.required],
      ["no tokenSymbol", { amount: "1", destinationAddress: randomAddress() }, MSG.required],
      ["no amount", { tokenSymbol: "USDC", destinationAddress: randomAddress() }, MSG.required],
      ["no destinationAddress", { tokenSymbol: "USDC", amount: "1" }, MSG.required],
      ["null destinationAddress", { ...valid(), destinationAddress: null }, MSG.required],
      ["short address", { ...valid(), destinationAddress: "0x1234" }, MSG.invalidDestination],
      ["address without 0x", { ...valid(), destinationAddress: "22".repeat(20) }, MSG.invalidDestination],
      ["41 hex chars", { ...valid(), destinationAddress: `0x${"a".repeat(41)}` }, MSG.invalidDestination],
      ["non-hex chars", { ...valid(), destinationAddress: `0x${"g".repeat(40)}` }, MSG.invalidDestination],
      ["address as a number", { ...valid(), destinationAddress: 12345 }, MSG.invalidDestination],
      ["zero", { ...valid(), amount: "0" }, MSG.invalidAmount],
      ["0.00", { ...valid(), amount: "0.00" }, MSG.invalidAmount],
      ["negative", { ...valid(), amount: "-5" }, MSG.invalidAmount],
      ["plus sign", { ...valid(), amount: "+5" }, MSG.invalidAmount],
      ["words", { ...valid(), amount: "ten" }, MSG.invalidAmount],
      ["exponent", { ...valid(), amount: "1e3" }, MSG.invalidAmount],
      ["hex", { ...valid(), amount: "0x10" }, MSG.invalidAmount],
      ["spaces", { ...valid(), amount: " 1" }, MSG.invalidAmount],
      ["a JSON number", { ...valid(), amount: 10 }, MSG.invalidAmount],
      ["more decimals than USDC has", { ...valid(), amount: "1.0000001" }, MSG.invalidAmount],
      ["trailing dot", { ...valid(), amount: "1." }, MSG.invalidAmount],
    ];
    for (const [label, body, message] of cases) {
      const res = await payout(ws.testKey, body);
      expect(res.statusCode, `${label}: ${res.body}`).toBe(400);
      expect(res.headers["content-type"], label).toMatch(/^application\/json/);
      expect(res.json(), label).toEqual({ error: message });
    }
    // Validation errors never move money and never count toward the breaker (D13).
    expect(await ledgerTransfersFrom(ws)).toEqual([]);
    expect(await payoutRows(ws)).toEqual([]);
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });
    expect((await eoaBalances(ws)).USDC).toBe("100.00");
  });

  it("an empty amount string is a malformed amount (D13: empty → Amount must be a positive number)", async () => {
    const ws = await newWorkspace();
    const res = await payout(ws.testKey, { ...valid(), amount: "" });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ error: MSG.invalidAmount });
  });

  it("refuses an unknown or lower-case token symbol with 400", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "10");
    for (const tokenSymbol of ["BTC", "usdc", "DAI", "USD"]) {
      const res = await payout(ws.testKey, { ...valid(), tokenSymbol });
      expect(res.statusCode, `${tokenSymbol}: ${res.body}`).toBe(400);
      expect(typeof res.json().error).toBe("string");
    }
    expect(await ledgerTransfersFrom(ws)).toEqual([]);
  });

  it("Insufficient balance: 400 with available, requested and tokenSymbol; nothing is sent", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "5");
    const res = await payout(ws.testKey, { ...valid(), amount: "10" });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({
      error: MSG.insufficient,
      available: "5.00",
      requested: "10.00",
      tokenSymbol: "USDC",
      network: "sandbox-a",
    });
    const eth = await payout(ws.testKey, { ...valid(), tokenSymbol: "ETH", amount: "0.5" });
    expect(eth.statusCode, eth.body).toBe(400);
    expect(eth.json()).toEqual({
      error: MSG.insufficient,
      available: "0.00",
      requested: "0.50",
      tokenSymbol: "ETH",
      network: "sandbox-a",
    });
    expect(await ledgerTransfersFrom(ws)).toEqual([]);
    expect((await eoaBalances(ws)).USDC).toBe("5.00");
    // A balance pre-check is not a failed transfer (D13).
    expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });
    expect(await outbox(ws, "payout.failed")).toEqual([]);
  });

  it("concurrent payouts beyond the balance: those that fit complete, the rest get Insufficient balance and record nothing", async () => {
    // The balance is checked where the money moves, under the wallet's debit lock: two app
    // instances on one database race for the same wallet, and none of them overdraws it or
    // counts a short balance as a failed transfer.
    const other = await startTestApp({}, { database: t.database });
    try {
      const ws = await newWorkspace();
      await faucet(ws, "USDC", "10");
      const answers = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          payout(ws.testKey, { ...valid(), amount: "3", description: `race ${i}` }, i % 2 === 0 ? t : other),
        ),
      );
      const ok = answers.filter((a) => a.statusCode === 200);
      const short = answers.filter((a) => a.statusCode !== 200);
      expect(ok).toHaveLength(3);
      const refused = {
        error: MSG.insufficient,
        available: "1.00",
        requested: "3.00",
        tokenSymbol: "USDC",
        network: "sandbox-a",
      };
      expect(short.map((a) => [a.statusCode, a.json()])).toEqual([
        [400, refused],
        [400, refused],
        [400, refused],
      ]);
      expect(await ledgerBalance(ws.eoaAddress, "USDC")).toBe(1_000_000n);
      const rows = await payoutRows(ws);
      expect(rows.map((row) => row.status)).toEqual(["completed", "completed", "completed"]);
      expect((await ledgerTransfersFrom(ws)).map((tx) => tx.status)).toEqual([
        "success",
        "success",
        "success",
      ]);
      expect(await outbox(ws, "payout.completed")).toHaveLength(3);
      expect(await outbox(ws, "payout.failed")).toEqual([]);
      expect(await payoutState(ws)).toMatchObject({ status: "active", failStreak: 0 });
    } finally {
      await other.close(true);
    }
  });

  it("a workspace without a wallet answers the part 7 message", async () => {
    const ws = await newWorkspace();
    // Not reachable through the API (creating a workspace provisions its EOA): remove the record.
    await t.database.db
      .deleteFrom("workspace_wallets")
      .where("workspace_id", "=", ws.id)
      .where("kind", "=", "eoa")
      .execute();
    const res = await payout(ws.testKey, valid());
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ error: MSG.noWallet });
  });

  it("the faucet refuses live keys with 403", async () => {
    const ws = await newWorkspace();
    const res = await post(ws.liveKey, "/api/v1/sandbox/faucet", { tokenSymbol: "USDC", amount: "100" });
    expect(res.statusCode, res.body).toBe(403);
    expect(typeof res.json().error).toBe("string");
    expect((await eoaBalances(ws)).USDC).toBe("0.00");
  });

  it("a live payout with no live network configured answers 503 Live network is not configured", async () => {
    const ws = await newWorkspace();
    const res = await payout(ws.liveKey, valid());
    expect(res.statusCode, res.body).toBe(503);
    expect(res.json()).toEqual({ error: MSG.liveNotConfigured });
    expect(await payoutRows(ws)).toEqual([]);
  });

  it("needs an API key", async () => {
    const res = await t.request({ method: "POST", url: "/api/v1/payouts", payload: valid() });
    expect(res.statusCode).toBe(401);
  });
});

describe("sandbox payouts: idempotencyKey", () => {
  it("a repeat returns the original txHash with the duplicate note, and the money moves once", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    const body = {
      tokenSymbol: "USDC",
      amount: "10",
      destinationAddress: randomAddress(),
      idempotencyKey: "payout-key-1",
    };
    const first = await payout(ws.testKey, body);
    expect(first.statusCode, first.body).toBe(200);
    const txHash = first.json().payout.txHash;
    expect(txHash).toMatch(TX_HASH);

    const repeat = await payout(ws.testKey, body);
    expect(repeat.statusCode, repeat.body).toBe(200);
    expect(repeat.json()).toMatchObject({
      payout: { txHash, status: "completed", note: MSG.duplicateNote },
    });
    expect((await eoaBalances(ws)).USDC).toBe("90.00");
    expect(await ledgerBalance(body.destinationAddress, "USDC")).toBe(10_000_000n);
    expect(await ledgerTransfersFrom(ws)).toHaveLength(1);
    expect(await payoutRows(ws)).toHaveLength(1);
    expect(await outbox(ws, "payout.completed")).toHaveLength(1);

    // The same key in another workspace is another payout.
    const other = await newWorkspace();
    await faucet(other, "USDC", "10");
    const elsewhere = await payout(other.testKey, body);
    expect(elsewhere.statusCode, elsewhere.body).toBe(200);
    expect(elsewhere.json().payout.note).toBeUndefined();
    expect(elsewhere.json().payout.txHash).not.toBe(txHash);
  });

  it("10 concurrent requests with one idempotencyKey make exactly one transfer", async () => {
    const ws = await newWorkspace();
    await faucet(ws, "USDC", "100");
    const destination = randomAddress();
    const body = {
      tokenSymbol: "USDC",
      amount: "7",
      destinationAddress: destination,
      idempotencyKey: "conc-1",
    };
    const responses = await Promise.all(Array.from({ length: 10 }, () => payout(ws.testKey, body)));
    for (const res of responses) expect(res.statusCode, res.body).toBe(200);
    const hashes = new Set(responses.map((r) => r.json().payout.txHash));
    expect(hashes.size).toBe(1);
    expect([...hashes][0]).toMatch(TX_HASH);
    expect(responses.filter((r) => r.json().payout.note === undefined)).toHaveLength(1);
    expect(responses.filter((r) => r.json().payout.note === MSG.duplicateNote)).toHaveLength(9);
    expect((await eoaBalances(ws)).USDC).toBe("93.00");
    expect(await ledgerBalance(destination, "USDC")).toBe(7_000_000n);
    expect(await ledgerTransfersFrom(ws)).toHaveLength(1);
    expect(await payoutRows(ws)).toHaveLength(1);
  });
});
