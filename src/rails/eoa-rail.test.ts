import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../../test/support/app.ts";
import { LIVE_DEFAULT } from "../../test/support/devnet-env.ts";
import { newPayout } from "../../test/support/payout-rows.ts";
import { insertPayment } from "../../test/support/transfers.ts";
import type { Hex } from "../chain/network.ts";
import { recordTransaction } from "../chain/sent-transactions.ts";
import { insertPayout } from "../modules/transfers/sending-repo.ts";
import { EoaRail } from "./eoa-rail.ts";

// What an EOA rail's records say of a move (Rail.recorded), a transfer's or a payment's
// settlement's, read from the sender's records on a real database: the reconciler and the
// settlement job finish what was recorded before a restart from this answer, never from the
// records themselves. No
// chain is asked: the answer is the records' (the live network's node below is never called).

const hex = (bytes: number): Hex => `0x${randomBytes(bytes).toString("hex")}`;
let t: TestApp;
let rail: EoaRail;
let ws: CreatedWorkspace;
let from: Hex;

beforeAll(async () => {
  t = await startTestApp({
    LIVE_RPC_URL: "http://127.0.0.1:9/never-called",
    LIVE_CHAIN_ID: "31337",
    LIVE_USDC_ADDRESS: hex(20),
    LIVE_ADAO_ADDRESS: hex(20),
    LIVE_DAI_ADDRESS: hex(20),
    LIVE_TREASURY_ADDRESS: hex(20),
  });
  const chain = t.app.ctx.chains.defaultOf("live");
  if (!chain) throw new Error("the test app has no live network");
  rail = new EoaRail(chain.network, chain.sender, t.database.db);
  ws = await createWorkspace(t);
  from = ws.eoaAddress as Hex;
});
afterAll(async () => t?.close());

let nonce = 0;

/**
 * Records one leg of a move with `status` (and `error`), as the sender would: of a payment's
 * settlement (`paymentId`), or of a transfer (`payoutId`).
 */
async function leg(
  paymentId: string | null,
  purpose: string,
  status: string,
  error: string | null = null,
  payoutId: string | null = null,
) {
  const txHash = hex(32);
  await recordTransaction(t.database.db, LIVE_DEFAULT, {
    txHash,
    raw: "0x00",
    nonce: nonce++,
    token: "USDC",
    purpose,
    replaces: null,
    from,
    to: hex(20),
    amount: 1n,
    paymentId,
    payoutId,
  });
  await t.database.db
    .updateTable("chain_transactions")
    .set({ status, error })
    .where("tx_hash", "=", txHash)
    .execute();
  return txHash;
}

describe("EoaRail.recorded for a payment's settlement", () => {
  it("is none while nothing is recorded for the payment", async () => {
    expect(await rail.recorded({ paymentId: randomUUID() })).toEqual({ state: "none" });
  });

  it("is open while one leg is signed and not mined, whatever the others say", async () => {
    const paymentId = await insertPayment(t, ws);
    await leg(paymentId, "settlement_net", "mined");
    await leg(paymentId, "settlement_fee", "signed");
    expect(await rail.recorded({ paymentId })).toEqual({ state: "open" });
  });

  it("is a success once every leg is mined, naming each leg's transaction", async () => {
    const paymentId = await insertPayment(t, ws);
    const net = await leg(paymentId, "settlement_net", "mined");
    const fee = await leg(paymentId, "settlement_fee", "mined");
    expect(await rail.recorded({ paymentId })).toEqual({
      state: "ended",
      byReceipt: false,
      outcome: {
        status: "success",
        txHash: fee,
        error: null,
        legs: [
          { purpose: "settlement_net", txHash: net, mined: true },
          { purpose: "settlement_fee", txHash: fee, mined: true },
        ],
      },
    });
  });

  it("is reverted at the first leg not mined with a success receipt; the mined ones say so", async () => {
    const paymentId = await insertPayment(t, ws);
    const net = await leg(paymentId, "settlement_net", "mined");
    const fee = await leg(paymentId, "settlement_fee", "failed");
    const split = await leg(paymentId, "split:a", "replaced", "nonce taken by a cancellation");
    const answer = await rail.recorded({ paymentId });
    expect(answer).toEqual({
      state: "ended",
      // Its own receipt reverted (not replaced by another transaction).
      byReceipt: true,
      outcome: {
        status: "reverted",
        txHash: fee,
        error: null,
        legs: [
          { purpose: "settlement_net", txHash: net, mined: true },
          { purpose: "settlement_fee", txHash: fee, mined: false },
          { purpose: "split:a", txHash: split, mined: false },
        ],
      },
    });
  });

  it("leaves out a leg refused before migration 016 (it held no nonce), and fails on it", async () => {
    const paymentId = await insertPayment(t, ws);
    const refused = await leg(paymentId, "settlement_net", "rejected", "nonce too low");
    expect(await rail.recorded({ paymentId })).toEqual({
      state: "ended",
      byReceipt: false,
      outcome: { status: "reverted", txHash: refused, error: "nonce too low", legs: [] },
    });
  });

  it("never answers for a payout's transaction with the payment's records, nor the other way", async () => {
    const paymentId = await insertPayment(t, ws);
    await leg(paymentId, "settlement_net", "mined");
    expect(await rail.recorded({ transferId: paymentId })).toEqual({ state: "none" });
  });
});

describe("EoaRail.recorded for a transfer of several legs (a swap's approval and router call)", () => {
  /** A transfer recorded as the engine records one (its row in the payouts table). */
  async function transfer(): Promise<string> {
    const row = await insertPayout(
      t.database.db,
      newPayout(ws, "live", { idempotencyKey: null, amount: 1n, destinationAddress: hex(20) }),
      20,
    );
    return row.id;
  }

  it("is open while its last leg is signed, though the first was mined", async () => {
    const id = await transfer();
    await leg(null, "approve", "mined", null, id);
    await leg(null, "swap", "signed", null, id);
    expect(await rail.recorded({ transferId: id })).toEqual({ state: "open" });
  });

  it("is a success once every leg is mined, the last leg's transaction the move's", async () => {
    const id = await transfer();
    const approve = await leg(null, "approve", "mined", null, id);
    const swap = await leg(null, "swap", "mined", null, id);
    expect(await rail.recorded({ transferId: id })).toMatchObject({
      state: "ended",
      outcome: {
        status: "success",
        txHash: swap,
        legs: [
          { purpose: "approve", txHash: approve, mined: true },
          { purpose: "swap", txHash: swap, mined: true },
        ],
      },
    });
  });

  it("is reverted at its first leg that failed, though a later one was mined", async () => {
    const id = await transfer();
    const approve = await leg(null, "approve", "failed", null, id);
    await leg(null, "swap", "mined", null, id);
    expect(await rail.recorded({ transferId: id })).toMatchObject({
      state: "ended",
      byReceipt: true,
      outcome: { status: "reverted", txHash: approve, error: null },
    });
  });

  it("is reverted, not by its receipt, when its leg's nonce was taken by another transaction", async () => {
    const id = await transfer();
    const payout = await leg(null, "payout", "replaced", "nonce too low", id);
    expect(await rail.recorded({ transferId: id })).toEqual({
      state: "ended",
      byReceipt: false,
      outcome: {
        status: "reverted",
        txHash: payout,
        error: "nonce too low",
        legs: [{ purpose: "payout", txHash: payout, mined: false }],
      },
    });
  });
});
