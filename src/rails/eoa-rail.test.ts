import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../../test/support/app.ts";
import { insertPayment } from "../../test/support/transfers.ts";
import type { Hex } from "../chain/network.ts";
import { recordTransaction } from "../chain/sent-transactions.ts";
import { EoaRail } from "./eoa-rail.ts";

// What an EOA rail's records say of a settlement's move (Rail.recorded with a payment as its
// owner), read from the sender's records on a real database: the settlement job finishes a
// payment recorded before a restart from this answer, never from the records themselves. No
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
  const network = t.app.ctx.networks.live;
  const sender = t.app.ctx.senders.live;
  if (!network || !sender) throw new Error("the test app has no live network");
  rail = new EoaRail(network, sender, t.database.db);
  ws = await createWorkspace(t);
  from = ws.eoaAddress as Hex;
});
afterAll(async () => t?.close());

let nonce = 0;

/** Records one leg of `paymentId`'s settlement with `status` (and `error`), as the sender would. */
async function leg(paymentId: string, purpose: string, status: string, error: string | null = null) {
  const txHash = hex(32);
  await recordTransaction(t.database.db, "live", {
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
    payoutId: null,
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
