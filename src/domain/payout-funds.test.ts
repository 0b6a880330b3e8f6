import { describe, expect, it } from "vitest";
import { checkFunds, type FundsCheck } from "./payout-funds.ts";

const base: FundsCheck = {
  token: "USDC",
  amount: 10n,
  balances: { USDC: 100n, ETH: 1_000n },
  committed: new Map(),
  unsettled: new Map(),
  gas: { erc20: 100n, eth: 21n, perUnit: 1n },
};

describe("checkFunds", () => {
  it("passes a payout the balance covers, with gas for it", () => {
    expect(checkFunds(base)).toEqual({ ok: true });
    expect(checkFunds({ ...base, amount: 100n })).toEqual({ ok: true });
  });

  it("leaves what recorded transactions and unsettled payments will take", () => {
    const committed = new Map([["USDC", { amount: 60n, transactions: 3, gasUnits: 0n }]]);
    expect(checkFunds({ ...base, amount: 41n, committed })).toEqual({
      ok: false,
      short: "balance",
      available: 40n,
    });
    const unsettled = new Map([["USDC", { amount: 60n, payments: 1, transfers: 2 }]]);
    expect(checkFunds({ ...base, amount: 41n, unsettled })).toEqual({
      ok: false,
      short: "balance",
      available: 40n,
    });
    expect(checkFunds({ ...base, amount: 40n, committed })).toEqual({ ok: true });
  });

  it("reserves the gas of every recorded transaction from the ETH balance", () => {
    // 9 transactions in flight: 8 ERC-20 (800 wei) and one ETH transfer of 50 (21 wei of gas).
    const committed = new Map([
      ["USDC", { amount: 0n, transactions: 8, gasUnits: 0n }],
      ["ETH", { amount: 50n, transactions: 1, gasUnits: 0n }],
    ]);
    // 1,000 - 50 - 821 = 129 wei left: enough for this payout's 100, not with 80 wei less.
    expect(checkFunds({ ...base, committed })).toEqual({ ok: true });
    expect(checkFunds({ ...base, committed, balances: { USDC: 100n, ETH: 920n } })).toEqual({
      ok: false,
      short: "gas",
      ethBalance: 49n,
      required: 100n,
    });
  });

  it("reserves the gas limits recorded with transactions in flight, not a plain transfer's", () => {
    // One ETH refund in flight to a contract, signed with 150 units (150 wei at 1 wei per unit),
    // and one old USDC transfer with no limit recorded (100 wei): 1,000 - 250 = 750 wei left.
    const committed = new Map([
      ["ETH", { amount: 0n, transactions: 0, gasUnits: 150n }],
      ["USDC", { amount: 0n, transactions: 1, gasUnits: 0n }],
    ]);
    const own = { erc20: 100n, eth: 21n, perUnit: 1n, own: 750n };
    expect(checkFunds({ ...base, committed, gas: own })).toEqual({ ok: true });
    expect(checkFunds({ ...base, committed, gas: { ...own, own: 751n } })).toEqual({
      ok: false,
      short: "gas",
      ethBalance: 750n,
      required: 751n,
    });
    // Priced at the fee per unit of gas: at 2 wei, the 150 units take 300.
    expect(checkFunds({ ...base, committed, gas: { ...own, perUnit: 2n } })).toEqual({
      ok: false,
      short: "gas",
      ethBalance: 600n,
      required: 750n,
    });
  });

  it("an ETH payout pays its gas from what is left after it", () => {
    expect(checkFunds({ ...base, token: "ETH", amount: 979n })).toEqual({ ok: true });
    expect(checkFunds({ ...base, token: "ETH", amount: 980n })).toEqual({
      ok: false,
      short: "gas",
      ethBalance: 20n,
      required: 21n,
    });
    expect(checkFunds({ ...base, token: "ETH", amount: 1_001n })).toEqual({
      ok: false,
      short: "balance",
      available: 1_000n,
    });
  });

  it("reserves the gas of the two settlement transfers of every payment not settled yet", () => {
    // Two USDC payments to settle: 4 ERC-20 transfers, 400 wei; 600 left for this payout's 100.
    const unsettled = new Map([["USDC", { amount: 0n, payments: 2, transfers: 4 }]]);
    expect(checkFunds({ ...base, unsettled })).toEqual({ ok: true });
    expect(checkFunds({ ...base, unsettled, balances: { USDC: 100n, ETH: 499n } })).toEqual({
      ok: false,
      short: "gas",
      ethBalance: 99n,
      required: 100n,
    });
  });

  it("reserves the gas of every split transfer too (D15: one more transfer per split)", () => {
    // One USDC payment with 5 splits to settle: 7 ERC-20 transfers, 700 wei; 300 left.
    const unsettled = new Map([["USDC", { amount: 0n, payments: 1, transfers: 7 }]]);
    expect(checkFunds({ ...base, unsettled, balances: { USDC: 100n, ETH: 800n } })).toEqual({ ok: true });
    expect(checkFunds({ ...base, unsettled, balances: { USDC: 100n, ETH: 799n } })).toEqual({
      ok: false,
      short: "gas",
      ethBalance: 99n,
      required: 100n,
    });
  });

  it("a move of contract calls (a swap) needs the gas of its calls, not a transfer's", () => {
    // ETH 1,000: a swap whose calls may burn 1,000 wei passes; 1,001 does not.
    expect(checkFunds({ ...base, gas: { erc20: 100n, eth: 21n, perUnit: 1n, own: 1_000n } })).toEqual({
      ok: true,
    });
    expect(checkFunds({ ...base, gas: { erc20: 100n, eth: 21n, perUnit: 1n, own: 1_001n } })).toEqual({
      ok: false,
      short: "gas",
      ethBalance: 1_000n,
      required: 1_001n,
    });
    // Selling ETH: its amount first, the calls' gas from what is left (1,000 − 10 = 990).
    expect(
      checkFunds({ ...base, token: "ETH", gas: { erc20: 100n, eth: 21n, perUnit: 1n, own: 991n } }),
    ).toEqual({
      ok: false,
      short: "gas",
      ethBalance: 990n,
      required: 991n,
    });
  });

  it("a sponsored payout (smart wallet) needs no gas", () => {
    expect(checkFunds({ ...base, balances: { USDC: 10n }, gas: null })).toEqual({ ok: true });
  });
});
