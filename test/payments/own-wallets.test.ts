import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InvalidRequest } from "../../src/domain/errors.ts";
import { bearer, createWorkspace, startTestApp, type TestApp } from "../support/app.ts";

// A workspace's own receiving wallets are never where its money is sent (issue 36, item 3): what
// they send never pays its payments, so money settled, split or paid there would stay with the
// workspace. Refused, naming the field, as a payment's merchantWallet, a split's destination and
// the settlement address; any spelling of the address.

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});

afterAll(async () => {
  await t?.close();
});

const ownWallet = (field: string, address: string) =>
  `${field} must not be one of this workspace's own wallets (${address}): money sent there would stay with the workspace`;

describe("the workspace's own wallet as a destination of its money", () => {
  it("is refused as a payment's merchantWallet, in any letter case", async () => {
    const ws = await createWorkspace(t);
    for (const address of [ws.eoaAddress, ws.eoaAddress.toLowerCase()]) {
      const res = await t.request({
        method: "POST",
        url: "/api/v1/payments",
        headers: bearer(ws.testKey),
        payload: { tokenSymbol: "USDC", amount: "10.00", merchantWallet: address },
      });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toEqual({ error: ownWallet("merchantWallet", address) });
    }
    // Another workspace's wallet is anybody's address to this one.
    const other = await createWorkspace(t);
    const paid = await t.request({
      method: "POST",
      url: "/api/v1/payments",
      headers: bearer(ws.testKey),
      payload: { tokenSymbol: "USDC", amount: "10.00", merchantWallet: other.eoaAddress },
    });
    expect(paid.statusCode, paid.body).toBe(201);
  });

  it("is refused as a split's destination, and nothing is configured", async () => {
    const ws = await createWorkspace(t);
    const res = await t.request({
      method: "PUT",
      url: "/api/v1/splits",
      headers: bearer(ws.testKey),
      payload: {
        enabled: true,
        splits: [
          { label: "partner", percentBps: 1000, destination: "0x3333333333333333333333333333333333333333" },
          { label: "self", percentBps: 500, destination: ws.eoaAddress },
        ],
      },
    });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error).toBe(ownWallet("splits[1].destination", ws.eoaAddress.toLowerCase()));
    const now = await t.request({ method: "GET", url: "/api/v1/splits", headers: bearer(ws.testKey) });
    expect(now.json()).toMatchObject({ enabled: false, splits: [] });
  });

  it("is refused as the settlement address, which stays as it was", async () => {
    const ws = await createWorkspace(t, { settlementAddress: "0x1111111111111111111111111111111111111111" });
    const update = t.app.services.workspaces.updateSettings(ws.id, {
      settlementAddress: ws.eoaAddress,
      adminEmail: "owner@example.com",
    });
    await expect(update).rejects.toBeInstanceOf(InvalidRequest);
    await expect(update).rejects.toMatchObject({ message: ownWallet("settlementAddress", ws.eoaAddress) });
    expect((await t.app.services.workspaces.profile(ws.id)).settlementAddress).toBe(
      "0x1111111111111111111111111111111111111111",
    );
  });
});
