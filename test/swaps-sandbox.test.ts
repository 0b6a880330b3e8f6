import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, createWorkspace, startTestApp, type TestApp } from "./support/app.ts";

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t?.close();
});

describe("sandbox swaps smoke", () => {
  it("quotes and executes USDC → ETH", async () => {
    const ws = await createWorkspace(t);
    const f = await t.request({
      method: "POST",
      url: "/api/v1/sandbox/faucet",
      headers: bearer(ws.testKey),
      payload: { tokenSymbol: "USDC", amount: "1000" },
    });
    expect(f.statusCode, f.body).toBe(200);
    const q = await t.request({
      method: "GET",
      url: "/api/v1/swap/quote?sellToken=USDC&buyToken=ETH&sellAmount=300",
      headers: bearer(ws.testKey),
    });
    expect(q.statusCode, q.body).toBe(200);
    console.log(q.json());
    const s = await t.request({
      method: "POST",
      url: "/swap",
      headers: { ...bearer(ws.testKey), "idempotency-key": "k1" },
      payload: { quoteId: q.json().quoteId },
    });
    console.log(s.statusCode, s.json());
    const again = await t.request({
      method: "POST",
      url: "/swap",
      headers: { ...bearer(ws.testKey), "idempotency-key": "k1" },
      payload: { quoteId: q.json().quoteId },
    });
    console.log(again.statusCode, again.headers["idempotent-replayed"], again.json());
    const b = await t.request({ method: "GET", url: "/api/v1/wallet/balance", headers: bearer(ws.testKey) });
    console.log(b.json());
    const l = await t.request({ method: "GET", url: "/api/v1/swaps", headers: bearer(ws.testKey) });
    console.log(JSON.stringify(l.json()));
  });
});
