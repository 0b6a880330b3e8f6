import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, createWorkspace, startTestApp, type TestApp } from "./support/app.ts";

describe("smoke", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => t.close());

  it("creates a sandbox payment that is forwarded at once", async () => {
    const ws = await createWorkspace(t);
    const res = await t.request({
      method: "POST",
      url: "/api/v1/payments",
      headers: bearer(ws.testKey),
      payload: { tokenSymbol: "USDC", amount: "100" },
    });
    expect(res.statusCode).toBe(201);
    expect(res.json().payment).toMatchObject({ status: "forwarded", grossAmount: "100.00", feeAmount: "1.50", netAmount: "98.50" });
  });
});
