import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, createWorkspace, startTestApp, type TestApp } from "../support/app.ts";

// Stored swap quotes (D16) are kept for their 30 seconds and an hour after, so that a late POST of
// one answers "Quote expired"; then the swaps.quotes job deletes those nobody executed. An executed
// quote stays: its swap names it.

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});

afterAll(async () => {
  await t?.close();
});

async function quote(key: string, amount: string): Promise<string> {
  const res = await t.request({
    method: "GET",
    url: `/api/v1/swap/quote?sellToken=USDC&buyToken=DAI&sellAmount=${amount}`,
    headers: bearer(key),
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().quoteId;
}

const post = (key: string, quoteId: string) =>
  t.request({ method: "POST", url: "/api/v1/swap", headers: bearer(key), payload: { quoteId } });

describe("swap quotes' retention", () => {
  it("answers an expired quote 400 for an hour, then forgets it unless it was executed", async () => {
    const ws = await createWorkspace(t);
    const faucet = await t.request({
      method: "POST",
      url: "/api/v1/sandbox/faucet",
      headers: bearer(ws.testKey),
      payload: { tokenSymbol: "USDC", amount: "100" },
    });
    expect(faucet.statusCode, faucet.body).toBe(200);
    const start = Date.now();
    t.setNow(new Date(start));
    try {
      const executed = await quote(ws.testKey, "10");
      expect((await post(ws.testKey, executed)).json().status).toBe("completed");
      const unused = await quote(ws.testKey, "20");

      t.setNow(new Date(start + 31_000));
      const late = await post(ws.testKey, unused);
      expect(late.statusCode).toBe(400);
      expect(late.json()).toEqual({ error: "Quote expired", quoteId: unused });
      // Within the hour after expiry nothing is deleted.
      expect(await t.app.services.swaps.forgetExpiredQuotes()).toBe(0);

      t.setNow(new Date(start + 30_000 + 3_600_001));
      expect(await t.app.services.swaps.forgetExpiredQuotes()).toBeGreaterThanOrEqual(1);
      expect((await post(ws.testKey, unused)).statusCode).toBe(404);
      const ids = await t.database.db
        .selectFrom("swap_quotes")
        .select("id")
        .where("id", "in", [executed, unused])
        .execute();
      expect(ids.map((row) => row.id)).toEqual([executed]);
      // The executed quote's swap still reads.
      const listed = await t.request({ method: "GET", url: "/api/v1/swaps", headers: bearer(ws.testKey) });
      expect(listed.json().swaps.map((s: { quoteId: string }) => s.quoteId)).toEqual([executed]);
    } finally {
      t.setNow(undefined);
    }
  });

  it("refuses a quote whose least output within the slippage rounds to 0 (400, nothing stored)", async () => {
    const ws = await createWorkspace(t);
    // 0.0000021 ADAO buys 1 smallest unit of USDC at 0.5 USDC per ADAO (less the fee); less 0.5 %
    // slippage, rounded down, that is 0.
    const res = await t.request({
      method: "GET",
      url: "/api/v1/swap/quote?sellToken=ADAO&buyToken=USDC&sellAmount=0.0000021",
      headers: bearer(ws.testKey),
    });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({
      error: "Amount too small: the least this swap could buy within its slippage is 0",
      buyAmount: "0.000001",
    });
    const stored = await t.database.db
      .selectFrom("swap_quotes")
      .select("id")
      .where("workspace_id", "=", ws.id)
      .execute();
    expect(stored).toEqual([]);
  });
});
