import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Hex, OnNetwork } from "../../src/chain/network.ts";
import { paymentsAfter } from "../../src/modules/payments/browse-repo.ts";
import { matchTransfers } from "../../src/modules/payments/incoming/chain-repo.ts";
import * as repo from "../../src/modules/payments/repo.ts";
import { batchTransition } from "../../src/modules/payments/transitions.ts";
import { createWorkspace, startTestApp, type TestApp } from "../support/app.ts";

// A payment payable on several networks (D22, migration 036) as the chain watchers' matching sees
// it: pending on no network, taken by the first network's watcher that sees its transfer, which
// sets its network; a transfer on another of its networks afterwards, or on a network it does not
// list, is that network's inbox item. Each network's watcher is its own matchTransfers call
// (the devnet suite, test/networks/two-chains.test.ts, runs the same against two real chains).

const A: OnNetwork = { environment: "live", id: "chain-a" };
const B: OnNetwork = { environment: "live", id: "chain-b" };
const C: OnNetwork = { environment: "live", id: "chain-c" };
const DETECT = batchTransition("transfer_detected");
const hex = (bytes: number) => `0x${randomBytes(bytes).toString("hex")}` as Hex;
const USDC = (units: number) => BigInt(units) * 1_000_000n;

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => t?.close());

async function multiNetworkPayment(workspaceId: string, to: string, amount: bigint, networks: string[]) {
  const row = repo.newPaymentRow({
    id: randomUUID(),
    status: "pending",
    workspaceId,
    environment: "live",
    network: null,
    networks,
    paymentMethod: "crypto",
    paymentProvider: "onchain",
    tokenSymbol: "USDC",
    gross: amount,
    fee: 0n,
    net: amount,
    merchantWallet: "0x2222222222222222222222222222222222222222",
    walletType: "eoa",
    receivingAddress: to,
    description: null,
    metadata: {},
    returnUrl: null,
    cancelUrl: null,
    expiresAt: new Date(Date.now() + 3_600_000),
    createdAt: new Date(),
  });
  await repo.insertPaymentsQuery([row]).execute(t.database.db);
  return row.id;
}

/** One transfer of `amount` USDC to `to`, seen by `on`'s watcher. */
const seenOn = (on: OnNetwork, workspaceId: string, to: string, amount: bigint) =>
  matchTransfers(
    t.database.db,
    on,
    [
      {
        token: "USDC",
        from: hex(20),
        to: to as Hex,
        amount,
        txHash: hex(32),
        logIndex: 0,
        blockNumber: 7n,
        blockHash: hex(32),
        workspaceId,
        ordinal: 0,
      },
    ],
    DETECT,
    new Date(),
    "no pending payment for this token and amount at this address",
  );

const paymentOf = (id: string) =>
  t.database.db.selectFrom("payments").selectAll().where("id", "=", id).executeTakeFirstOrThrow();
const inbox = (workspaceId: string) =>
  t.database.db
    .selectFrom("unmatched_transfers")
    .select(["network", "amount"])
    .where("workspace_id", "=", workspaceId)
    .orderBy("created_at")
    .execute();

describe("matching a payment payable on several networks", () => {
  it("the first network that sees its transfer takes it; a later transfer on another of them is that network's inbox item", async () => {
    const ws = await createWorkspace(t);
    const id = await multiNetworkPayment(ws.id, ws.eoaAddress, USDC(9), [A.id, B.id]);

    const onB = await seenOn(B, ws.id, ws.eoaAddress, USDC(9));
    expect(onB.map((r) => r.payment?.id)).toEqual([id]);
    const detected = await paymentOf(id);
    expect({ status: detected.status, network: detected.network, networks: detected.networks }).toEqual({
      status: "detected",
      network: B.id,
      networks: [A.id, B.id],
    });

    // Paid already: the same amount on A is not this payment's, and is not lost.
    expect(await seenOn(A, ws.id, ws.eoaAddress, USDC(9))).toEqual([{ index: 0, payment: null }]);
    expect(await inbox(ws.id)).toEqual([{ network: A.id, amount: USDC(9).toString() }]);
    expect((await paymentOf(id)).network).toBe(B.id);
  });

  it("a network the payment does not list never takes it", async () => {
    const ws = await createWorkspace(t);
    const id = await multiNetworkPayment(ws.id, ws.eoaAddress, USDC(4), [A.id, B.id]);
    expect(await seenOn(C, ws.id, ws.eoaAddress, USDC(4))).toEqual([{ index: 0, payment: null }]);
    expect(await inbox(ws.id)).toEqual([{ network: C.id, amount: USDC(4).toString() }]);
    const still = await paymentOf(id);
    expect([still.status, still.network]).toEqual(["pending", null]);
  });

  it("a payment of one network is not taken by another network's transfer", async () => {
    const ws = await createWorkspace(t);
    const id = await multiNetworkPayment(ws.id, ws.eoaAddress, USDC(2), [A.id, B.id]);
    await t.database.db
      .updateTable("payments")
      .set({ network: A.id, networks: null })
      .where("id", "=", id)
      .execute();
    expect(await seenOn(B, ws.id, ws.eoaAddress, USDC(2))).toEqual([{ index: 0, payment: null }]);
    expect((await seenOn(A, ws.id, ws.eoaAddress, USDC(2))).map((r) => r.payment?.id)).toEqual([id]);
  });

  it("a list filtered by network shows it under each of its networks while it is on none, then under its own", async () => {
    const ws = await createWorkspace(t);
    const id = await multiNetworkPayment(ws.id, ws.eoaAddress, USDC(3), [A.id, B.id]);
    const listed = async (network: string) =>
      (
        await paymentsAfter(t.database.db, { workspaceId: ws.id, environment: "live" }, { network }, null, 10)
      ).map((row) => row.id);
    expect([await listed(A.id), await listed(B.id), await listed(C.id)]).toEqual([[id], [id], []]);
    await seenOn(B, ws.id, ws.eoaAddress, USDC(3));
    expect([await listed(A.id), await listed(B.id)]).toEqual([[], [id]]);
  });

  it("the database refuses a list of fewer than two networks (one network is `network`)", async () => {
    const ws = await createWorkspace(t);
    await expect(multiNetworkPayment(ws.id, ws.eoaAddress, USDC(1), [A.id])).rejects.toThrow(
      /payments_networks_list/,
    );
  });
});
