import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../../test/support/app.ts";
import type { ChainToken, Hex } from "../chain/network.ts";
import { SANDBOX_FAILURE_ADDRESS, sandboxTxHash } from "../chain/simulated/ledger.ts";
import { LedgerRail } from "./ledger-rail.ts";
import { type LedgerContribution, type LedgerRecord, type Move, MoveRefused } from "./rail.ts";

// The sandbox's simulated ledger as a rail (ledger-rail.ts) on a real database: it reads balances
// from the ledger's entries and hands its transfers to the caller's one-statement record, whose
// verdict becomes the move's outcome. The hooks here are the caller's side, answering as the
// engine's record would (sandbox-records.ts).

let t: TestApp;
let rail: LedgerRail;

beforeAll(async () => {
  t = await startTestApp();
  rail = new LedgerRail(t.app.services.ledger, "sandbox-a");
});
afterAll(async () => t.close());

const randomAddress = (): Hex => `0x${randomBytes(20).toString("hex")}`;
const credit = (address: Hex, token: ChainToken, amount: bigint, network = "sandbox-a") =>
  t.app.services.ledger.credit({ network, address, token, amount, reference: `test-credit:${randomUUID()}` });
const signingKey = async (): Promise<Hex> => {
  throw new Error("the ledger signs nothing");
};

function moveOf(extra: Partial<Move> = {}): Move {
  return {
    from: randomAddress(),
    signingKey,
    legs: [{ token: "USDC", to: randomAddress(), amount: 1_000_000n, purpose: "payout" }],
    payoutId: randomUUID(),
    ...extra,
  };
}

/** The caller's record: keeps what the rail contributed and answers `answer`. */
function recording(answer: LedgerRecord) {
  const seen: LedgerContribution[] = [];
  return {
    seen,
    hooks: {
      recordWithTransfers: async (contribution: LedgerContribution) => {
        seen.push(contribution);
        return answer;
      },
    },
  };
}

describe("LedgerRail", () => {
  it("reads balances and funds from the ledger, with no mined nonce", async () => {
    const address = randomAddress();
    expect(await rail.balance(address, "USDC")).toBe(0n);
    await credit(address, "USDC", 2_500_000n);
    await credit(address, "ETH", 10n ** 15n);
    // Another simulated network's balance is not this rail's.
    await credit(address, "USDC", 7n, "sandbox-b");
    expect(await rail.balance(address, "USDC")).toBe(2_500_000n);
    // Addresses are the ledger's in lower case: a checksummed spelling reads the same balance.
    const upper: Hex = `0x${address.slice(2).toUpperCase()}`;
    expect(await rail.balance(upper, "USDC")).toBe(2_500_000n);
    expect(await rail.funds(address, ["USDC", "ETH", "DAI"])).toEqual({
      balances: { USDC: 2_500_000n, ETH: 10n ** 15n, DAI: 0n },
      minedNonce: null,
    });
  });

  it("moves on its own simulated network", async () => {
    const onB = new LedgerRail(t.app.services.ledger, "sandbox-b");
    expect(onB.network).toEqual({ environment: "sandbox", id: "sandbox-b" });
    const address = randomAddress();
    await credit(address, "USDC", 3n, "sandbox-b");
    expect([await onB.balance(address, "USDC"), await rail.balance(address, "USDC")]).toEqual([3n, 0n]);
    const { seen, hooks } = recording({ outcome: "success" });
    await onB.submit(moveOf({ from: address }), hooks);
    expect(seen[0]?.transfers.map((transfer) => transfer.network)).toEqual(["sandbox-b"]);
  });

  it("is not pipelined, pays no gas, prepares nothing and emits no logs", async () => {
    expect(rail.pipelined).toBe(false);
    expect(rail.gasRequired()).toBeUndefined();
    expect(rail.gasCost()).toBeUndefined();
    expect(rail.prepare()).toBeUndefined();
    await expect(rail.logsOf()).resolves.toEqual([]);
    // Final in the statement that records it: nothing of it is ever left for a reconciler.
    await expect(rail.recorded()).resolves.toEqual({ state: "none" });
    await expect(rail.reconcile()).resolves.toBeUndefined();
  });

  it("throws on submit without recordWithTransfers", async () => {
    await expect(rail.submit(moveOf(), { persist: async () => true })).rejects.toThrow(
      "the simulated ledger needs recordWithTransfers",
    );
  });

  it("throws on a move with a contract call leg, recording nothing", async () => {
    const { seen, hooks } = recording({ outcome: "success" });
    const move = moveOf({
      legs: [
        { token: "USDC", to: randomAddress(), amount: 1n, purpose: "approve" },
        {
          token: "USDC",
          to: randomAddress(),
          amount: 1n,
          purpose: "swap",
          call: { data: "0x", value: 0n, gas: 21_000n },
        },
      ],
    });
    await expect(rail.submit(move, hooks)).rejects.toThrow("the simulated ledger moves transfers only");
    expect(seen).toEqual([]);
  });

  it("hands a payout's one transfer to the caller's record and reports its success", async () => {
    const { seen, hooks } = recording({ outcome: "success" });
    const move = moveOf();
    const submission = await rail.submit(move, hooks);
    const txHash = sandboxTxHash(`payout:${move.payoutId}`);
    expect(seen).toEqual([
      {
        transfers: [
          {
            network: "sandbox-a",
            from: move.from,
            to: move.legs[0]?.to,
            token: "USDC",
            amount: 1_000_000n,
            reference: `payout:${move.payoutId}`,
          },
        ],
        userOpHash: null,
      },
    ]);
    expect(await submission.outcome).toEqual({
      status: "success",
      txHash,
      legs: [{ purpose: "payout", txHash, mined: true }],
      error: null,
    });
  });

  it("names each leg of a move of several transfers by its purpose", async () => {
    const { seen, hooks } = recording({ outcome: "success" });
    const paymentId = randomUUID();
    const move = moveOf({
      payoutId: undefined,
      paymentId,
      legs: [
        { token: "USDC", to: randomAddress(), amount: 985_000n, purpose: "settlement_net" },
        { token: "USDC", to: randomAddress(), amount: 15_000n, purpose: "settlement_fee" },
      ],
    });
    const outcome = await (await rail.submit(move, hooks)).outcome;
    expect(seen[0]?.transfers.map((transfer) => transfer.reference)).toEqual([
      `payment:${paymentId}:settlement_net`,
      `payment:${paymentId}:settlement_fee`,
    ]);
    expect(outcome.legs).toEqual([
      {
        purpose: "settlement_net",
        txHash: sandboxTxHash(`payment:${paymentId}:settlement_net`),
        mined: true,
      },
      {
        purpose: "settlement_fee",
        txHash: sandboxTxHash(`payment:${paymentId}:settlement_fee`),
        mined: true,
      },
    ]);
  });

  it("reports a transfer to the failure address as reverted", async () => {
    const { hooks } = recording({ outcome: "failure_address" });
    const move = moveOf({
      legs: [{ token: "USDC", to: SANDBOX_FAILURE_ADDRESS, amount: 1n, purpose: "payout" }],
    });
    expect(await (await rail.submit(move, hooks)).outcome).toMatchObject({
      status: "reverted",
      txHash: sandboxTxHash(`payout:${move.payoutId}`),
      error: "execution reverted (sandbox failure address)",
    });
  });

  it("rejects with MoveRefused when the caller's record refused the move", async () => {
    const { hooks } = recording({ outcome: "refused" });
    await expect(rail.submit(moveOf(), hooks)).rejects.toBeInstanceOf(MoveRefused);
  });

  it("as a smart account's twin, names the user operation of the move", async () => {
    const smart = new LedgerRail(t.app.services.ledger, "sandbox-a", { smartAccount: true });
    const { seen, hooks } = recording({ outcome: "success" });
    const move = moveOf();
    const userOpHash = sandboxTxHash(`user-operation:${move.payoutId}`);
    const outcome = await (await smart.submit(move, hooks)).outcome;
    expect(seen[0]?.userOpHash).toBe(userOpHash);
    expect(outcome).toMatchObject({ status: "success", userOpHash });
  });
});
