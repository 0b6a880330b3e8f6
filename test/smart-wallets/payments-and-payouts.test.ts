import { describe, expect, it } from "vitest";
import { bearer } from "../support/app.ts";
import { onTheLedger } from "../support/sandbox-balances.ts";
import {
  balances,
  createPayment,
  createSmartWallet,
  FAILURE_ADDRESS,
  faucet,
  ISO,
  type Json,
  ledgerUsdc,
  newWorkspace,
  payout,
  randomAddress,
  setDefault,
  TX_HASH,
  t,
  useSmartWalletsApp,
} from "../support/smart-wallets.ts";

// Sandbox payments, payouts and balances with walletType smart_wallet; the endpoints themselves:
// smart-wallets.test.ts; shared helpers: support/smart-wallets.ts.

useSmartWalletsApp();

describe("payments with walletType", () => {
  it("walletType smart_wallet receives on the smart wallet; eoa and the default on the EOA", async () => {
    const ws = await newWorkspace();
    const { smartWallet } = await createSmartWallet(ws);
    const smart = await createPayment(ws, { tokenSymbol: "USDC", amount: "5", walletType: "smart_wallet" });
    expect(smart.statusCode, smart.body).toBe(201);
    expect(smart.json().receivingAddress).toBe(smartWallet.address);
    expect(smart.json().payment.status).toBe("forwarded");

    const eoa = await createPayment(ws, { tokenSymbol: "USDC", amount: "5", walletType: "eoa" });
    expect(eoa.statusCode, eoa.body).toBe(201);
    expect(eoa.json().receivingAddress).toBe(ws.eoaAddress);

    const omitted = await createPayment(ws, { tokenSymbol: "USDC", amount: "5" });
    expect(omitted.statusCode, omitted.body).toBe(201);
    expect(omitted.json().receivingAddress).toBe(ws.eoaAddress);
  });

  it("with the default switched to smart_wallet, a payment without walletType receives on the smart wallet", async () => {
    const ws = await newWorkspace();
    const { smartWallet } = await createSmartWallet(ws);
    await setDefault(ws, "smart_wallet");
    const omitted = await createPayment(ws, { tokenSymbol: "ETH", amount: "0.1" });
    expect(omitted.statusCode, omitted.body).toBe(201);
    expect(omitted.json().receivingAddress).toBe(smartWallet.address);
    // An explicit eoa still wins over the default.
    const eoa = await createPayment(ws, { tokenSymbol: "ETH", amount: "0.1", walletType: "eoa" });
    expect(eoa.json().receivingAddress).toBe(ws.eoaAddress);

    await setDefault(ws, "workspace");
    const back = await createPayment(ws, { tokenSymbol: "ETH", amount: "0.1" });
    expect(back.json().receivingAddress).toBe(ws.eoaAddress);
  });

  it("walletType smart_wallet without a smart wallet → 400", async () => {
    const ws = await newWorkspace();
    const res = await createPayment(ws, { tokenSymbol: "USDC", amount: "5", walletType: "smart_wallet" });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error).toEqual(expect.any(String));
  });
});

// ---------------------------------------------------------------------------------------------
// Sandbox payouts from the smart wallet (4.10, 4.18, 7, D3, D13)

describe("sandbox payouts with walletType smart_wallet", () => {
  it("the faucet credits the smart wallet; a payout moves its simulated balance only", async () => {
    const ws = await newWorkspace();
    const { smartWallet } = await createSmartWallet(ws);
    const funded = await faucet(ws, { tokenSymbol: "USDC", amount: "100", walletType: "smart_wallet" });
    expect(funded).toEqual({
      tokenSymbol: "USDC",
      walletType: "smart_wallet",
      address: smartWallet.address,
      network: "sandbox-a",
      balance: "100.00",
    });
    expect(await ledgerUsdc(smartWallet.address)).toBe(100_000_000n);
    expect(await ledgerUsdc(ws.eoaAddress)).toBe(0n);

    const destination = randomAddress();
    const res = await payout(ws, {
      tokenSymbol: "USDC",
      amount: "30.5",
      destinationAddress: destination,
      walletType: "smart_wallet",
      description: "smart refund",
      metadata: { order: "S-1" },
    });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.timestamp).toMatch(ISO);
    expect(body.payout).toMatchObject({
      txHash: expect.stringMatching(TX_HASH),
      amount: "30.50",
      tokenSymbol: "USDC",
      destinationAddress: destination,
      fromAddress: smartWallet.address,
      environment: "sandbox",
      status: "completed",
      description: "smart refund",
      metadata: { order: "S-1" },
    });
    expect(await ledgerUsdc(smartWallet.address)).toBe(69_500_000n);
    expect(await ledgerUsdc(destination)).toBe(30_500_000n);
    expect(await ledgerUsdc(ws.eoaAddress)).toBe(0n);

    const history = await t.request({ method: "GET", url: "/api/v1/payouts", headers: bearer(ws.testKey) });
    expect(history.json()).toMatchObject({
      total: 1,
      payouts: [
        { txHash: body.payout.txHash, type: "ERC20", details: { amount: "30.50", tokenSymbol: "USDC" } },
      ],
    });
  });

  it("a smart wallet payout response carries userOpHash next to txHash (D13)", async () => {
    const ws = await newWorkspace();
    await createSmartWallet(ws);
    await faucet(ws, { tokenSymbol: "USDC", amount: "10", walletType: "smart_wallet" });
    const res = await payout(ws, {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: randomAddress(),
      walletType: "smart_wallet",
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().payout.txHash).toMatch(TX_HASH);
    expect(res.json().payout.userOpHash).toMatch(TX_HASH);
    expect(res.json().payout.userOpHash).not.toBe(res.json().payout.txHash);
  });

  it("ETH and ADAO payouts from the smart wallet need no gas and move exact amounts", async () => {
    const ws = await newWorkspace();
    const { smartWallet } = await createSmartWallet(ws);
    await faucet(ws, { tokenSymbol: "ETH", amount: "1", walletType: "smart_wallet" });
    await faucet(ws, { tokenSymbol: "ADAO", amount: "50", walletType: "smart_wallet" });
    const destination = randomAddress();
    const eth = await payout(ws, {
      tokenSymbol: "ETH",
      amount: "0.25",
      destinationAddress: destination,
      walletType: "smart_wallet",
    });
    expect(eth.statusCode, eth.body).toBe(200);
    expect(eth.json().payout).toMatchObject({
      amount: "0.25",
      tokenSymbol: "ETH",
      fromAddress: smartWallet.address,
    });
    const adao = await payout(ws, {
      tokenSymbol: "ADAO",
      amount: "12.5",
      destinationAddress: destination,
      walletType: "smart_wallet",
    });
    expect(adao.statusCode, adao.body).toBe(200);
    const after = await balances(ws);
    expect(after.smartWallet).toEqual({
      address: smartWallet.address,
      balances: { USDC: "0.00", ETH: "0.75", ADAO: "37.50", DAI: "0.00" },
    });
    expect(await t.app.services.ledger.balance("sandbox-a", destination, "ETH")).toBe(
      250_000_000_000_000_000n,
    );
    expect(await t.app.services.ledger.balance("sandbox-a", destination, "ADAO")).toBe(
      12_500_000_000_000_000_000n,
    );
  });

  it("insufficient smart wallet balance → 400 Insufficient balance with the smart wallet's figures, even when the EOA could pay", async () => {
    const ws = await newWorkspace();
    const { smartWallet } = await createSmartWallet(ws);
    await faucet(ws, { tokenSymbol: "USDC", amount: "5", walletType: "smart_wallet" });
    await faucet(ws, { tokenSymbol: "USDC", amount: "1000" }); // the EOA
    const destination = randomAddress();
    const res = await payout(ws, {
      tokenSymbol: "USDC",
      amount: "20",
      destinationAddress: destination,
      walletType: "smart_wallet",
    });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({
      error: "Insufficient balance",
      available: "5.00",
      requested: "20.00",
      tokenSymbol: "USDC",
      network: "sandbox-a",
    });
    expect(await ledgerUsdc(smartWallet.address)).toBe(5_000_000n);
    expect(await ledgerUsdc(ws.eoaAddress)).toBe(1_000_000_000n);
    expect(await ledgerUsdc(destination)).toBe(0n);
    // A balance pre-check is not a failed transfer (D13).
    const state = await t.request({
      method: "GET",
      url: `/api/v1/workspaces/${ws.id}/payout-state`,
      headers: bearer(ws.testKey),
    });
    expect(state.json()).toMatchObject({ status: "active", failStreak: 0 });
  });

  it("walletType smart_wallet without a smart wallet → 400, nothing sent", async () => {
    const ws = await newWorkspace();
    await faucet(ws, { tokenSymbol: "USDC", amount: "10" });
    const res = await payout(ws, {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: randomAddress(),
      walletType: "smart_wallet",
    });
    expect(res.statusCode, res.body).toBe(400);
    expect(await ledgerUsdc(ws.eoaAddress)).toBe(10_000_000n);
  });

  it("the default wallet type decides payouts that omit walletType", async () => {
    const ws = await newWorkspace();
    const { smartWallet } = await createSmartWallet(ws);
    await faucet(ws, { tokenSymbol: "USDC", amount: "100", walletType: "smart_wallet" });
    await faucet(ws, { tokenSymbol: "USDC", amount: "50" });
    const destination = randomAddress();
    const send = (amount: string, extra: Json = {}) =>
      payout(ws, { tokenSymbol: "USDC", amount, destinationAddress: destination, ...extra });

    const beforeSwitch = await send("1");
    expect(beforeSwitch.statusCode, beforeSwitch.body).toBe(200);
    expect(beforeSwitch.json().payout.fromAddress).toBe(ws.eoaAddress);
    expect(await ledgerUsdc(ws.eoaAddress)).toBe(49_000_000n);
    expect(await ledgerUsdc(smartWallet.address)).toBe(100_000_000n);

    await setDefault(ws, "smart_wallet");
    const onSmart = await send("10");
    expect(onSmart.statusCode, onSmart.body).toBe(200);
    expect(onSmart.json().payout.fromAddress).toBe(smartWallet.address);
    expect(await ledgerUsdc(smartWallet.address)).toBe(90_000_000n);
    expect(await ledgerUsdc(ws.eoaAddress)).toBe(49_000_000n);

    // An explicit walletType still wins over the default.
    const explicitEoa = await send("2", { walletType: "eoa" });
    expect(explicitEoa.statusCode, explicitEoa.body).toBe(200);
    expect(explicitEoa.json().payout.fromAddress).toBe(ws.eoaAddress);
    expect(await ledgerUsdc(ws.eoaAddress)).toBe(47_000_000n);

    // The default's balance is the one checked: 95 from the smart wallet's 90 fails.
    const tooMuch = await send("95");
    expect(tooMuch.statusCode, tooMuch.body).toBe(400);
    expect(tooMuch.json()).toMatchObject({ error: "Insufficient balance", available: "90.00" });

    await setDefault(ws, "workspace");
    const backOnEoa = await send("3");
    expect(backOnEoa.statusCode, backOnEoa.body).toBe(200);
    expect(backOnEoa.json().payout.fromAddress).toBe(ws.eoaAddress);
    expect(await ledgerUsdc(ws.eoaAddress)).toBe(44_000_000n);
    expect(await ledgerUsdc(smartWallet.address)).toBe(90_000_000n);
    expect(await ledgerUsdc(destination)).toBe(16_000_000n);
  });

  it("a failed smart wallet transfer counts toward the circuit breaker: 500 PAYOUT_FAILED, payout.failed", async () => {
    const ws = await newWorkspace();
    const { smartWallet } = await createSmartWallet(ws);
    await faucet(ws, { tokenSymbol: "USDC", amount: "10", walletType: "smart_wallet" });
    const res = await payout(ws, {
      tokenSymbol: "USDC",
      amount: "1",
      destinationAddress: FAILURE_ADDRESS,
      walletType: "smart_wallet",
    });
    expect(res.statusCode, res.body).toBe(500);
    expect(res.json()).toMatchObject({
      error: "Payout failed",
      code: "PAYOUT_FAILED",
      detail: expect.any(String),
      failStreak: 1,
      remainingBeforePause: 2,
      circuitBreaker: false,
    });
    expect(await ledgerUsdc(smartWallet.address)).toBe(10_000_000n);
    const failed = await t.database.db
      .selectFrom("outbox_events")
      .select(["payload"])
      .where("workspace_id", "=", ws.id)
      .where("event_type", "=", "payout.failed")
      .execute();
    expect(failed).toHaveLength(1);
    expect(failed[0]?.payload).toMatchObject({ fromAddress: smartWallet.address, failStreak: 1 });
  });
});

describe("GET /api/v1/wallet/balance with a smart wallet", () => {
  it("lists the smart wallet with its balances next to the EOA", async () => {
    const ws = await newWorkspace();
    const before = await balances(ws);
    expect(before).toEqual(
      onTheLedger({
        environment: "sandbox",
        eoa: { address: ws.eoaAddress, balances: { USDC: "0.00", ETH: "0.00", ADAO: "0.00", DAI: "0.00" } },
        smartWallet: null,
      }),
    );

    const { smartWallet } = await createSmartWallet(ws);
    expect(await balances(ws)).toEqual(
      onTheLedger({
        environment: "sandbox",
        eoa: { address: ws.eoaAddress, balances: { USDC: "0.00", ETH: "0.00", ADAO: "0.00", DAI: "0.00" } },
        smartWallet: {
          address: smartWallet.address,
          balances: { USDC: "0.00", ETH: "0.00", ADAO: "0.00", DAI: "0.00" },
        },
      }),
    );

    await faucet(ws, { tokenSymbol: "USDC", amount: "12.345678", walletType: "smart_wallet" });
    await faucet(ws, { tokenSymbol: "ETH", amount: "0.5", walletType: "smart_wallet" });
    await faucet(ws, { tokenSymbol: "ADAO", amount: "3" });
    expect(await balances(ws)).toEqual(
      onTheLedger({
        environment: "sandbox",
        eoa: { address: ws.eoaAddress, balances: { USDC: "0.00", ETH: "0.00", ADAO: "3.00", DAI: "0.00" } },
        smartWallet: {
          address: smartWallet.address,
          balances: { USDC: "12.345678", ETH: "0.50", ADAO: "0.00", DAI: "0.00" },
        },
      }),
    );
  });
});
