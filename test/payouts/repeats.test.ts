import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimPayoutKey } from "../../src/modules/transfers/keys.ts";
import * as sending from "../../src/modules/transfers/sending-repo.ts";
import { bearer, createWorkspace, startTestApp, type TestApp } from "../support/app.ts";
import { newPayout } from "../support/payout-rows.ts";

// A repeated idempotencyKey whose original is still processing (on this instance or another one)
// waits for the original to end and answers its result (D6). The wait is woken by the database's
// notice of the ending (migration 017), on PGlite and PostgreSQL alike: here the original is
// ended by a plain UPDATE of its row, as another instance would end it, and the repeat answers
// long before its 60 s bound.

const DESTINATION = "0x2222222222222222222222222222222222222222";
const TX_HASH = `0x${"ab".repeat(32)}`;

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => t?.close());

/** A payout recorded processing with its key claimed, as funds.ts records one (another instance's). */
async function processingOriginal(key: string) {
  const ws = await createWorkspace(t);
  const original = newPayout(ws, "sandbox", {
    idempotencyKey: key,
    amount: 1_000_000n,
    destinationAddress: DESTINATION,
  });
  const payout = await t.database.db.transaction().execute(async (trx) => {
    if (!(await claimPayoutKey(trx, { ...original, idempotencyKey: key })))
      throw new Error("the original's key was taken");
    return sending.insertPayout(trx, original, 20);
  });
  return { ws, payout };
}

const repeat = (key: string, apiKey: string) =>
  t.request({
    method: "POST",
    url: "/api/v1/payouts",
    headers: bearer(apiKey),
    payload: { tokenSymbol: "USDC", amount: "1", destinationAddress: DESTINATION, idempotencyKey: key },
  });

describe("a repeated idempotencyKey while its original is processing", () => {
  it("waits for the original to complete, woken by its ending, and answers its txHash", async () => {
    const { ws, payout } = await processingOriginal("repeat-completes");
    const started = Date.now();
    const answer = repeat("repeat-completes", ws.testKey);
    // Let the repeat reach its wait (were it later, it would find the original ended and answer
    // the same), then end the original as its own instance would. A fixed wait on purpose: the
    // wait is inside the request and shows nowhere to poll; a late repeat only passes more easily.
    await new Promise((resolve) => setTimeout(resolve, 300));
    await t.database.db
      .updateTable("payouts")
      .set({ status: "completed", tx_hash: TX_HASH, completed_at: new Date() })
      .where("id", "=", payout.id)
      .execute();
    const res = await answer;
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      payout: {
        txHash: TX_HASH,
        status: "completed",
        note: "Duplicate idempotencyKey; original result returned",
      },
    });
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it("answers 409 with the original once it failed", async () => {
    const { ws, payout } = await processingOriginal("repeat-fails");
    const answer = repeat("repeat-fails", ws.testKey);
    // As above: time for the repeat to reach its wait, which shows nowhere to poll.
    await new Promise((resolve) => setTimeout(resolve, 300));
    await t.database.db
      .updateTable("payouts")
      .set({ status: "failed", error: "transaction reverted", completed_at: new Date() })
      .where("id", "=", payout.id)
      .execute();
    const res = await answer;
    expect(res.statusCode, res.body).toBe(409);
    expect(res.json()).toMatchObject({
      error: "idempotencyKey already used by a payout that failed",
      payout: { error: "transaction reverted" },
    });
  });
});
