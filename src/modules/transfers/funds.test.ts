import { randomUUID } from "node:crypto";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CreatedWorkspace, startTestApp, type TestApp } from "../../../test/support/app.ts";
import {
  fundedWorkspace,
  insertPayment,
  randomAddress,
  refundedOf,
  takeFence,
} from "../../../test/support/transfers.ts";
import type { Hex } from "../../chain/network.ts";
import { InsufficientBalance } from "../../domain/errors.ts";
import { type Fence, FenceRefused } from "../../platform/db/fences.ts";
import { SessionTurns } from "../../platform/db/wallet-lock.ts";
import type { Rail } from "../../rails/rail.ts";
import { UNMATCHED_REASON } from "../payments/inbox/unmatched-repo.ts";
import { recordIfFunded } from "./funds.ts";
import { type NewTransfer, TRANSFER_COLUMNS } from "./repo.ts";

// The persist step's balance check (funds.ts) on the sandbox ledger rail and a real database: a
// transfer is recorded (processing) only when the wallet can pay it, with what is already on its
// way out counted, and only together with what its orderer's fences take.

let t: TestApp;
let turns: SessionTurns;
let rail: Rail;

beforeAll(async () => {
  t = await startTestApp();
  turns = new SessionTurns(t.database.db, t.app.ctx.log);
  const ledgerRail = t.app.rails.of("sandbox", null)?.eoa;
  if (!ledgerRail) throw new Error("the sandbox has no EOA rail");
  rail = ledgerRail;
});
afterAll(async () => t.close());

function transferOf(ws: CreatedWorkspace, amount: bigint, extra: Partial<NewTransfer> = {}): NewTransfer {
  return {
    id: randomUUID(),
    scope: { workspaceId: ws.id, environment: "sandbox" },
    network: rail.network.id,
    idempotencyKey: null,
    tokenSymbol: "USDC",
    amount,
    destinationAddress: randomAddress(),
    fromAddress: ws.eoaAddress,
    walletType: "eoa",
    description: "funds test",
    metadata: { case: "funds" },
    createdAt: new Date(),
    kind: "payout",
    paymentId: null,
    unmatchedTransferId: null,
    reason: null,
    ...extra,
  };
}

const record = (transfer: NewTransfer) =>
  recordIfFunded(t.app.ctx, turns, t.app.services.payments, rail, transfer);

const rowsOf = (ws: CreatedWorkspace) =>
  t.database.db.selectFrom("payouts").select(TRANSFER_COLUMNS).where("workspace_id", "=", ws.id).execute();

/** `rail` as it is, telling `onFunds` once a balance read for a check has returned. */
function observed(rail: Rail, onFunds: () => void): Rail {
  return {
    pipelined: rail.pipelined,
    network: rail.network,
    balance: (address, token) => rail.balance(address, token),
    funds: async (address, tokens) => {
      const funds = await rail.funds(address, tokens);
      onFunds();
      return funds;
    },
    gasRequired: (token) => rail.gasRequired(token),
    gasCost: (units) => rail.gasCost(units),
    prepare: (move) => rail.prepare(move),
    submit: (move, hooks, prepared) => rail.submit(move, hooks, prepared),
    reconcile: () => rail.reconcile(),
    logsOf: (mined) => rail.logsOf(mined),
    recorded: (owner, operation) => rail.recorded(owner, operation),
  };
}

const rowOf = (id: string) =>
  t.database.db.selectFrom("payouts").select(TRANSFER_COLUMNS).where("id", "=", id).executeTakeFirst();

/** A refund of `amount` of the payment, fenced by its take. */
const refundOf = (ws: CreatedWorkspace, paymentId: string, amount: bigint) =>
  transferOf(ws, amount, { kind: "refund", paymentId, fences: [takeFence(t, ws, paymentId, amount)] });

/** A confirmed payment of 1 USDC received on the workspace's wallet, not settled yet. */
async function confirmedPayment(ws: CreatedWorkspace): Promise<string> {
  const id = await insertPayment(t, ws);
  await t.database.db
    .updateTable("payments")
    .set({ status: "confirmed", receiving_address: ws.eoaAddress })
    .where("id", "=", id)
    .execute();
  return id;
}

describe("recordIfFunded on the sandbox ledger rail", () => {
  it("records a processing transfer when the wallet is funded, and moves no money yet", async () => {
    const ws = await fundedWorkspace(t, 5_000_000n);
    const transfer = transferOf(ws, 2_000_000n);
    const row = await record(transfer);
    expect(row).toMatchObject({
      id: transfer.id,
      workspace_id: ws.id,
      environment: "sandbox",
      status: "processing",
      kind: "payout",
      token_symbol: "USDC",
      amount: "2000000",
      destination_address: transfer.destinationAddress,
      from_address: ws.eoaAddress,
      tx_hash: null,
      metadata: { case: "funds" },
      // The ledger pays no gas: nothing to reserve.
      gas_limit: null,
    });
    expect(row?.lease_expires_at).not.toBeNull();
    expect(await rowOf(transfer.id)).toEqual(row);
    expect(await t.app.services.ledger.balance("sandbox-a", ws.eoaAddress, "USDC")).toBe(5_000_000n);
  });

  it("throws InsufficientBalance with available and requested, and records nothing", async () => {
    const ws = await fundedWorkspace(t, 1_500_000n);
    const transfer = transferOf(ws, 2_000_000n);
    const refused = await record(transfer).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(InsufficientBalance);
    expect(refused).toMatchObject({
      code: "INSUFFICIENT_BALANCE",
      details: { available: "1.50", requested: "2.00", tokenSymbol: "USDC", network: "sandbox-a" },
    });
    expect(await rowOf(transfer.id)).toBeUndefined();
  });

  it("counts what is already processing from the wallet: the second of two that fit one at a time is refused", async () => {
    const ws = await fundedWorkspace(t, 3_000_000n);
    const first = transferOf(ws, 2_000_000n);
    const second = transferOf(ws, 2_000_000n);
    // Checked at once: their turns on the wallet make the second see the first as on its way out.
    const [a, b] = await Promise.allSettled([record(first), record(second)]);
    const outcomes = [a, b].map((o) => o.status).sort();
    expect(outcomes).toEqual(["fulfilled", "rejected"]);
    const rejected = [a, b].find((o) => o.status === "rejected");
    expect(rejected?.status === "rejected" && rejected.reason).toMatchObject({
      details: { available: "1.00", requested: "2.00" },
    });
    expect(await rowsOf(ws)).toHaveLength(1);
  });

  it("with a required fence that takes nothing: throws FenceRefused naming it, and records nothing", async () => {
    const ws = await fundedWorkspace(t, 5_000_000n);
    const paymentId = await insertPayment(t, ws);
    const nothing: Fence = {
      name: "nothing-to-take",
      statement: t.database.db
        .updateTable("payments")
        .set({ refunded_amount: sql<string>`refunded_amount + 1` })
        .where(sql<boolean>`false`)
        .returning("id")
        .compile(),
      required: true,
    };
    // The first fence's take is rolled back with the refusal of the second.
    const transfer = transferOf(ws, 1_000_000n, {
      kind: "refund",
      paymentId,
      fences: [takeFence(t, ws, paymentId, 400_000n), nothing],
    });
    const refused = await record(transfer).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(FenceRefused);
    expect(refused).toMatchObject({ fence: "nothing-to-take" });
    expect(await rowOf(transfer.id)).toBeUndefined();
    expect(await refundedOf(t, paymentId)).toBe("0");
  });

  it("refuses with a conflicting INSERT … ON CONFLICT DO NOTHING fence (an idempotency claim taken)", async () => {
    const ws = await fundedWorkspace(t, 5_000_000n);
    const claim = (id: string): Fence => ({
      name: "claim",
      statement: sql`
        INSERT INTO idempotency_keys (workspace_id, environment, scope, key, request_hash, created_at)
        VALUES (${ws.id}::uuid, 'sandbox', 'funds-test', 'same-key', ${id}, now())
        ON CONFLICT DO NOTHING RETURNING key`.compile(t.database.db),
      required: true,
    });
    const first = transferOf(ws, 1_000_000n);
    expect(await record({ ...first, fences: [claim(first.id)] })).toMatchObject({ id: first.id });
    const second = transferOf(ws, 1_000_000n);
    await expect(record({ ...second, fences: [claim(second.id)] })).rejects.toThrow(FenceRefused);
    expect(await rowOf(second.id)).toBeUndefined();
  });

  it("does not refuse on a fence that is not required and took nothing", async () => {
    const ws = await fundedWorkspace(t, 5_000_000n);
    const paymentId = await insertPayment(t, ws, 1_000_000n); // nothing left to take
    const transfer = transferOf(ws, 1_000_000n, {
      fences: [{ ...takeFence(t, ws, paymentId, 1n), required: false }],
    });
    expect(await record(transfer)).toMatchObject({ id: transfer.id, status: "processing" });
    expect(await refundedOf(t, paymentId)).toBe("1000000");
  });

  it("with a fence that takes something: the fence's write and the transfer are both committed", async () => {
    const ws = await fundedWorkspace(t, 5_000_000n);
    const paymentId = await insertPayment(t, ws);
    const transfer = refundOf(ws, paymentId, 600_000n);
    expect(await record(transfer)).toMatchObject({
      id: transfer.id,
      status: "processing",
      payment_id: paymentId,
    });
    expect(await rowOf(transfer.id)).toMatchObject({ status: "processing" });
    expect(await refundedOf(t, paymentId)).toBe("600000");
    // The same take again: only 400000 is left, so the fence refuses and takes nothing more.
    const again = refundOf(ws, paymentId, 600_000n);
    await expect(record(again)).rejects.toThrow(FenceRefused);
    expect(await refundedOf(t, paymentId)).toBe("600000");
  });

  it("rolls a fence's take back when the balance refuses the transfer", async () => {
    const ws = await fundedWorkspace(t, 100_000n);
    const paymentId = await insertPayment(t, ws);
    const transfer = refundOf(ws, paymentId, 500_000n);
    await expect(record(transfer)).rejects.toThrow(InsufficientBalance);
    expect(await rowOf(transfer.id)).toBeUndefined();
    expect(await refundedOf(t, paymentId)).toBe("0");
  });

  it("claims an idempotencyKey with its record: a repeat records nothing, a refusal leaves the key free", async () => {
    const ws = await fundedWorkspace(t, 1_000_000n);
    const key = `key-${randomUUID()}`;
    await expect(record(transferOf(ws, 2_000_000n, { idempotencyKey: key }))).rejects.toThrow(
      InsufficientBalance,
    );
    const first = transferOf(ws, 600_000n, { idempotencyKey: key });
    expect(await record(first)).toMatchObject({ id: first.id, idempotency_key: key });
    // Answered as a repeat (undefined), not refused by the balance the first one reserved.
    expect(await record(transferOf(ws, 600_000n, { idempotencyKey: key }))).toBeUndefined();
    expect((await rowsOf(ws)).map((row) => row.id)).toEqual([first.id]);
  });

  it("counts a settlement's money once: its payment's gross until the payment names its transfer, then the transfer", async () => {
    const ws = await fundedWorkspace(t, 3_000_000n);
    // A confirmed payment of 1 USDC received on the wallet, not settled yet: held from payouts.
    const paymentId = await confirmedPayment(ws);
    const available = async () => {
      const refused = await record(transferOf(ws, 2_000_001n)).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(InsufficientBalance);
      return (refused as InsufficientBalance).details;
    };
    expect(await available()).toMatchObject({ available: "2.00" });
    // Its settlement recorded, as by a check that read the payment before the payment names it.
    const settlement = transferOf(ws, 1_000_000n, { kind: "settlement", paymentId });
    expect(await record(settlement)).toMatchObject({ status: "processing", kind: "settlement" });
    expect(await available()).toMatchObject({ available: "2.00" });
    // The payment names it (its claim): counted as the transfer from now on.
    await t.database.db
      .updateTable("payments")
      .set({ settlement_transfer_id: settlement.id })
      .where("id", "=", paymentId)
      .execute();
    expect(await available()).toMatchObject({ available: "2.00" });
  });

  it("reads the unsettled payments of wallets checked together once per wallet, each wallet its own", async () => {
    const [a, b] = [await fundedWorkspace(t, 1_000_000n), await fundedWorkspace(t, 1_000_000n)];
    const [ofA, ofB] = [await confirmedPayment(a), await confirmedPayment(b)];
    // Asked for in one round (as the settlements of many payments are checked): shared by wallet.
    const { payments } = t.app.services;
    const read = await Promise.all([
      payments.unsettledOn(rail.network, a.eoaAddress),
      payments.unsettledOn(rail.network, b.eoaAddress),
      payments.unsettledOn(rail.network, a.eoaAddress),
    ]);
    expect(read.map((unsettled) => unsettled.map((p) => p.id))).toEqual([[ofA], [ofB], [ofA]]);
  });

  it("reads the open inbox of wallets checked together in one round, each wallet its own", async () => {
    const [a, b, none] = [
      await fundedWorkspace(t, 0n),
      await fundedWorkspace(t, 0n),
      await fundedWorkspace(t, 0n),
    ];
    const stray = async (ws: CreatedWorkspace, amount: number, reason = UNMATCHED_REASON, status = "open") =>
      (
        await sql<{ id: string }>`
          INSERT INTO unmatched_transfers (workspace_id, environment, network, token_symbol, amount, from_address,
                                           to_address, tx_hash, log_index, block_number, reason, status)
          VALUES (${ws.id}, 'sandbox', ${rail.network.id}, 'USDC', ${amount}, ${randomAddress()},
                  ${ws.eoaAddress.toUpperCase().replace("0X", "0x")}, ${`0x${randomUUID().replaceAll("-", "").padEnd(64, "0")}`},
                  0, 1, ${reason}, ${status})
          RETURNING id`.execute(t.database.db)
      ).rows[0]?.id;
    const [ofA, ofB] = [await stray(a, 7), await stray(b, 9)];
    // Not held: the workspace's own money (another reason), and one attached already.
    await stray(a, 11, "own transfer");
    await stray(b, 13, UNMATCHED_REASON, "attached");
    const { payments } = t.app.services;
    const read = await Promise.all(
      [a, b, none, a].map((ws) => payments.openInboxOn(rail.network, ws.eoaAddress)),
    );
    expect(read).toEqual([
      [{ id: ofA, token: "USDC", amount: 7n }],
      [{ id: ofB, token: "USDC", amount: 9n }],
      [],
      [{ id: ofA, token: "USDC", amount: 7n }],
    ]);
  });

  // Without a mined nonce (the ledger rail, a smart account) what is on its way out is every
  // transfer still processing, read in the turn: a balance read before the turn would still hold
  // one that completes in between, no longer counted as leaving, and the check would pass on
  // money already gone. The balance is read once, in the turn, after what is leaving.
  it("reads a rail without a mined nonce once, in the wallet's turn: one that completes before the turn is counted", async () => {
    const ws = await fundedWorkspace(t, 3_000_000n);
    const first = transferOf(ws, 2_000_000n);
    await record(first);
    // Another check of the wallet holds its turn (as one on another instance would).
    let release = () => {};
    const held = turns.run(`payout-funds:sandbox:${ws.eoaAddress.toLowerCase()}`, async () => {
      await new Promise<void>((resolve) => {
        release = resolve;
      });
    });
    let reads = 0;
    const second = recordIfFunded(
      t.app.ctx,
      turns,
      t.app.services.payments,
      observed(rail, () => {
        reads += 1;
      }),
      transferOf(ws, 2_000_000n),
    ).catch((err: unknown) => err);
    // Meanwhile the first one completes: its money leaves the wallet and its row is completed.
    await t.app.services.ledger.transfer({
      network: "sandbox-a",
      from: ws.eoaAddress as Hex,
      to: first.destinationAddress as Hex,
      token: "USDC",
      amount: first.amount,
      reference: `payout:${first.id}`,
    });
    await t.database.db
      .updateTable("payouts")
      .set({ status: "completed", completed_at: new Date() })
      .where("id", "=", first.id)
      .execute();
    expect(reads).toBe(0); // nothing is read while another check holds the turn
    release();
    await held;
    expect(await t.app.services.ledger.balance("sandbox-a", ws.eoaAddress, "USDC")).toBe(1_000_000n);
    // 1 USDC left: a second transfer of 2 must be refused, on one read of the balance.
    expect(await second).toBeInstanceOf(InsufficientBalance);
    expect(reads).toBe(1);
  });
});
