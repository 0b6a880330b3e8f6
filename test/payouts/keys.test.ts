import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as sending from "../../src/modules/transfers/sending-repo.ts";
import { MIGRATIONS } from "../../src/platform/db/database.ts";
import {
  bearer,
  type CreatedWorkspace,
  createWorkspace,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { newPayout } from "../support/payout-rows.ts";

// A payout's idempotencyKey lives in the platform's idempotency records (keys.ts), claimed in the
// statement that records the payout: a payout the balance refuses leaves its key free, and a key
// a payout used before the upgrade (when it lived only on the payout's row) still answers as the
// repeat of that payout after migration 018, as does one that an older instance records during a
// rolling upgrade.

const DESTINATION = "0x2222222222222222222222222222222222222222";
const TX_HASH = `0x${"cd".repeat(32)}`;

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => t?.close());

const post = (ws: CreatedWorkspace, url: string, payload: Record<string, unknown>) =>
  t.request({ method: "POST", url, headers: bearer(ws.testKey), payload });

const payout = (ws: CreatedWorkspace, amount: string, idempotencyKey: string) =>
  post(ws, "/api/v1/payouts", {
    tokenSymbol: "USDC",
    amount,
    destinationAddress: DESTINATION,
    idempotencyKey,
  });

async function usdcBalance(ws: CreatedWorkspace): Promise<string> {
  const res = await t.request({ method: "GET", url: "/api/v1/wallet/balance", headers: bearer(ws.testKey) });
  expect(res.statusCode, res.body).toBe(200);
  return JSON.stringify(res.json());
}

describe("a payout's idempotencyKey", () => {
  it("stays free when the balance refuses the payout", async () => {
    const ws = await createWorkspace(t);
    const refused = await payout(ws, "5", "refused-first");
    expect(refused.statusCode, refused.body).toBe(400);
    expect(refused.json()).toMatchObject({ error: "Insufficient balance" });

    expect((await post(ws, "/api/v1/sandbox/faucet", { tokenSymbol: "USDC", amount: "5" })).statusCode).toBe(
      200,
    );
    const paid = await payout(ws, "5", "refused-first");
    expect(paid.statusCode, paid.body).toBe(200);
    expect(paid.json().payout).toMatchObject({ status: "completed", amount: "5.00" });
    expect(paid.json().payout.note).toBeUndefined();
  });

  it("used before the upgrade still answers as the repeat of its payout", async () => {
    const ws = await createWorkspace(t);
    expect((await post(ws, "/api/v1/sandbox/faucet", { tokenSymbol: "USDC", amount: "10" })).statusCode).toBe(
      200,
    );
    const original = await payout(ws, "4", "before-the-upgrade");
    expect(original.statusCode, original.body).toBe(200);
    const balance = await usdcBalance(ws);

    // Before migration 018 the key was recorded on the payout only.
    await t.database.db.deleteFrom("idempotency_keys").where("scope", "=", "payouts").execute();
    const upgrade = MIGRATIONS["018_payout_keys_in_idempotency_records"];
    if (!upgrade) throw new Error("migration 018 is missing");
    await upgrade.up(t.database.db);

    const repeat = await payout(ws, "4", "before-the-upgrade");
    expect(repeat.statusCode, repeat.body).toBe(200);
    expect(repeat.json()).toEqual({
      payout: {
        txHash: original.json().payout.txHash,
        status: "completed",
        note: "Duplicate idempotencyKey; original result returned",
      },
    });
    expect(await usdcBalance(ws)).toBe(balance);
  });

  it("recorded by an instance older than migration 018 (a rolling upgrade) is answered as its repeat", async () => {
    const ws = await createWorkspace(t);
    // The older instance records the key on the payout only, and completes it.
    const older = await sending.insertPayout(
      t.database.db,
      newPayout(ws, "sandbox", {
        idempotencyKey: "from-an-older-instance",
        amount: 2_000_000n,
        destinationAddress: DESTINATION,
      }),
      20,
    );
    await t.database.db
      .updateTable("payouts")
      .set({ status: "completed", tx_hash: TX_HASH, completed_at: new Date() })
      .where("id", "=", older.id)
      .execute();

    const repeat = await payout(ws, "2", "from-an-older-instance");
    expect(repeat.statusCode, repeat.body).toBe(200);
    expect(repeat.json()).toEqual({
      payout: {
        txHash: TX_HASH,
        status: "completed",
        note: "Duplicate idempotencyKey; original result returned",
      },
    });
  });
});
