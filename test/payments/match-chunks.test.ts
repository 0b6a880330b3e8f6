import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Hex, OnNetwork } from "../../src/chain/network.ts";
import { matchTransfers, type ObservedTransfer } from "../../src/modules/payments/incoming/chain-repo.ts";
import * as repo from "../../src/modules/payments/repo.ts";
import { batchTransition } from "../../src/modules/payments/transitions.ts";
import { createWorkspace, startTestApp, type TestApp } from "../support/app.ts";

// A watcher's range with more transfers than one matching statement takes (chain-repo.ts matches
// in chunks, one after another in the range's transaction): pairs as one statement would, the
// n-th transfer with the n-th oldest payment, each answered at its own index.

const ON: OnNetwork = { environment: "live", id: "chain-a" };
const DETECT = batchTransition("transfer_detected");
const hex = (bytes: number) => `0x${randomBytes(bytes).toString("hex")}` as Hex;
const AMOUNT = 5_000_000n;
const PAYMENTS = 230;
const TRANSFERS = 450;

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => t?.close());

describe("matching a range of more transfers than one statement takes", () => {
  it("pairs the n-th transfer with the n-th oldest payment across chunks; the rest go to the inbox once", async () => {
    const ws = await createWorkspace(t);
    const to = hex(20);
    const created = Date.now() - 60_000;
    const rows = Array.from({ length: PAYMENTS }, (_, i) =>
      repo.newPaymentRow({
        id: randomUUID(),
        status: "pending",
        workspaceId: ws.id,
        environment: "live",
        network: ON.id,
        networks: null,
        paymentMethod: "crypto",
        paymentProvider: "onchain",
        tokenSymbol: "USDC",
        gross: AMOUNT,
        fee: 0n,
        net: AMOUNT,
        merchantWallet: "0x2222222222222222222222222222222222222222",
        walletType: "eoa",
        receivingAddress: to,
        description: null,
        metadata: {},
        returnUrl: null,
        cancelUrl: null,
        expiresAt: new Date(Date.now() + 3_600_000),
        createdAt: new Date(created + i),
      }),
    );
    await repo.insertPaymentsQuery(rows).execute(t.database.db);
    const transfers: ObservedTransfer[] = Array.from({ length: TRANSFERS }, (_, i) => ({
      token: "USDC",
      from: hex(20),
      to,
      amount: AMOUNT,
      txHash: hex(32),
      logIndex: 0,
      blockNumber: 100n + BigInt(i),
      blockHash: hex(32),
      workspaceId: ws.id,
      ordinal: 0,
    }));
    const match = () =>
      t.database.db
        .transaction()
        .execute((trx) => matchTransfers(trx, ON, transfers, DETECT, new Date(), "no pending payment"));

    const results = await match();
    expect(results.map((r) => r.index)).toEqual(transfers.map((_, i) => i));
    expect(results.slice(0, PAYMENTS).map((r) => r.payment?.id)).toEqual(rows.map((r) => r.id));
    expect(results.slice(0, PAYMENTS).map((r) => r.payment?.detected_tx_hash)).toEqual(
      transfers.slice(0, PAYMENTS).map((x) => x.txHash),
    );
    expect(results.slice(PAYMENTS).every((r) => r.payment === null)).toBe(true);
    const inbox = await t.database.db
      .selectFrom("unmatched_transfers")
      .select("tx_hash")
      .where("workspace_id", "=", ws.id)
      .orderBy("block_number")
      .execute();
    expect(inbox.map((r) => r.tx_hash)).toEqual(transfers.slice(PAYMENTS).map((x) => x.txHash));

    // The same range again (a rescan): every transfer was claimed, nothing is answered or written.
    expect(await match()).toEqual([]);
    const again = await t.database.db
      .selectFrom("unmatched_transfers")
      .select((eb) => eb.fn.countAll<string>().as("n"))
      .where("workspace_id", "=", ws.id)
      .executeTakeFirstOrThrow();
    expect(Number(again.n)).toBe(TRANSFERS - PAYMENTS);
  });
});
