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
import { SANDBOX_FAILURE_ADDRESS, sandboxTxHash } from "../../chain/simulated/ledger.ts";
import { SANDBOX_A } from "../../chain/simulated/networks.ts";
import { CircuitBreakerOpen, InsufficientBalance } from "../../domain/errors.ts";
import type { Fence } from "../../platform/db/fences.ts";
import type { TransferOrder, TransferOutcome } from "./order.ts";
import { TRANSFER_COLUMNS } from "./repo.ts";

// TransfersService.run end to end on the sandbox (send → finish): the real app and database, money
// on the simulated ledger, the ledger's failure address for failures the breaker counts.

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => t.close());

const REVERTED = "execution reverted (sandbox failure address)";

function orderOf(ws: CreatedWorkspace, amount: bigint, extra: Partial<TransferOrder> = {}): TransferOrder {
  return {
    id: randomUUID(),
    kind: "payout",
    scope: { workspaceId: ws.id, environment: "sandbox" },
    tokenSymbol: "USDC",
    amount,
    destinationAddress: randomAddress(),
    walletType: null,
    network: null,
    description: "run test",
    ...extra,
  };
}

const run = (order: TransferOrder) => t.app.services.transfers.run(order);
const balance = (address: string) => t.app.services.ledger.balance("sandbox-a", address, "USDC");
const rowOf = (id: string) =>
  t.database.db.selectFrom("payouts").select(TRANSFER_COLUMNS).where("id", "=", id).executeTakeFirst();
const rowsOf = (ws: CreatedWorkspace) =>
  t.database.db.selectFrom("payouts").select(TRANSFER_COLUMNS).where("workspace_id", "=", ws.id).execute();

type Event = { type: string; payload: Record<string, unknown> };
async function events(ws: CreatedWorkspace): Promise<Event[]> {
  const rows = await t.database.db
    .selectFrom("outbox_events")
    .select(["event_type", "payload"])
    .where("workspace_id", "=", ws.id)
    .orderBy("id")
    .execute();
  return rows.map((row) => ({ type: row.event_type, payload: row.payload as Record<string, unknown> }));
}

/** The outcome, asserted to have `status` (and narrowed to it). */
function statusOf<S extends TransferOutcome["status"]>(outcome: TransferOutcome, status: S) {
  expect(outcome.status).toBe(status);
  if (outcome.status !== status) throw new Error(`expected ${status}, got ${outcome.status}`);
  return outcome as Extract<TransferOutcome, { status: S }>;
}

describe("TransfersService.run on the sandbox ledger", () => {
  it("completes a funded payout: its row, its payout.completed event, the ledger moved exactly", async () => {
    const ws = await fundedWorkspace(t, 10_000_000n);
    const order = orderOf(ws, 2_500_000n);
    const outcome = await run(order);
    const txHash = sandboxTxHash(`payout:${order.id}`);
    expect(outcome).toMatchObject({
      status: "completed",
      transfer: { id: order.id, status: "completed", tx_hash: txHash, amount: "2500000", kind: "payout" },
    });
    expect(await rowOf(order.id)).toMatchObject({ status: "completed", tx_hash: txHash, error: null });
    expect(await balance(ws.eoaAddress)).toBe(7_500_000n);
    expect(await balance(order.destinationAddress)).toBe(2_500_000n);
    expect(await events(ws)).toEqual([
      {
        type: "payout.completed",
        payload: expect.objectContaining({
          status: "completed",
          txHash,
          amount: "2.50",
          destinationAddress: order.destinationAddress,
        }),
      },
    ]);
  });

  it("refuses an unfunded payout with InsufficientBalance and records nothing", async () => {
    const ws = await fundedWorkspace(t, 1_000_000n);
    const order = orderOf(ws, 2_000_000n);
    const { reason } = statusOf(await run(order), "refused");
    expect(reason).toBeInstanceOf(InsufficientBalance);
    expect(reason.details).toEqual({
      available: "1.00",
      requested: "2.00",
      tokenSymbol: "USDC",
      network: "sandbox-a",
    });
    expect(await rowsOf(ws)).toEqual([]);
    expect(await events(ws)).toEqual([]);
    expect(await balance(ws.eoaAddress)).toBe(1_000_000n);
  });

  it("fails a transfer to the failure address, counted by the breaker, with payout.failed", async () => {
    const ws = await fundedWorkspace(t, 5_000_000n);
    const order = orderOf(ws, 1_000_000n, { destinationAddress: SANDBOX_FAILURE_ADDRESS });
    const failed = statusOf(await run(order), "failed");
    expect(failed.error).toBe(REVERTED);
    expect(failed.breaker).toEqual({
      failStreak: 1,
      remainingBeforePause: 2,
      tripped: false,
      pausedAt: null,
    });
    expect(await rowOf(order.id)).toMatchObject({ status: "failed", error: REVERTED });
    expect(await balance(ws.eoaAddress)).toBe(5_000_000n);
    expect(await t.app.services.transfers.breaker(order.scope)).toMatchObject({
      status: "active",
      failStreak: 1,
    });
    expect(await events(ws)).toEqual([
      {
        type: "payout.failed",
        payload: expect.objectContaining({ status: "failed", error: REVERTED, failStreak: 1 }),
      },
    ]);
  });

  it("resets the streak on the next success", async () => {
    const ws = await fundedWorkspace(t, 5_000_000n);
    statusOf(await run(orderOf(ws, 1n, { destinationAddress: SANDBOX_FAILURE_ADDRESS })), "failed");
    expect((await run(orderOf(ws, 1_000_000n))).status).toBe("completed");
    expect(await t.app.services.transfers.breaker({ workspaceId: ws.id, environment: "sandbox" })).toEqual({
      status: "active",
      failStreak: 0,
      pausedAt: null,
      reason: null,
    });
  });

  it("trips the breaker on the third failure and refuses the next order with CircuitBreakerOpen", async () => {
    const ws = await fundedWorkspace(t, 5_000_000n);
    const fail = () => run(orderOf(ws, 1_000_000n, { destinationAddress: SANDBOX_FAILURE_ADDRESS }));
    expect(statusOf(await fail(), "failed").breaker).toMatchObject({ failStreak: 1, tripped: false });
    expect(statusOf(await fail(), "failed").breaker).toMatchObject({ failStreak: 2, tripped: false });
    const third = statusOf(await fail(), "failed");
    expect(third.breaker).toMatchObject({ failStreak: 3, remainingBeforePause: 0, tripped: true });
    expect(third.breaker.pausedAt).toBeInstanceOf(Date);

    const fourth = orderOf(ws, 1_000_000n);
    const { reason } = statusOf(await run(fourth), "refused");
    expect(reason).toBeInstanceOf(CircuitBreakerOpen);
    expect(reason.details).toMatchObject({ circuitBreaker: true, failStreak: 3 });
    expect(await rowOf(fourth.id)).toBeUndefined();
    expect(await balance(ws.eoaAddress)).toBe(5_000_000n);
    expect((await events(ws)).map((e) => e.type)).toEqual([
      "payout.failed",
      "payout.failed",
      "payout.failed",
    ]);

    // 30 minutes after the pause the next order resumes the workspace's transfers.
    t.setNow(new Date((third.breaker.pausedAt?.getTime() ?? 0) + 30 * 60 * 1000));
    try {
      expect((await run(orderOf(ws, 1_000_000n))).status).toBe("completed");
    } finally {
      t.setNow(undefined);
    }
    expect(await t.app.services.transfers.breaker(fourth.scope)).toMatchObject({
      status: "active",
      failStreak: 0,
    });
  });

  it("an order queued behind the third failure is decided on it, not on the breaker as it arrived", async () => {
    // The breaker is read in the order's turn: read as it arrived, it would pass on the streak
    // from before the trip.
    const ws = await fundedWorkspace(t, 5_000_000n);
    const fail = () => run(orderOf(ws, 1_000_000n, { destinationAddress: SANDBOX_FAILURE_ADDRESS }));
    statusOf(await fail(), "failed");
    statusOf(await fail(), "failed");
    const behind = orderOf(ws, 1_000_000n);
    const [third, next] = await Promise.all([fail(), run(behind)]);
    expect(statusOf(third, "failed").breaker).toMatchObject({ failStreak: 3, tripped: true });
    expect(statusOf(next, "refused").reason).toBeInstanceOf(CircuitBreakerOpen);
    expect(await rowOf(behind.id)).toBeUndefined();
    expect(await balance(ws.eoaAddress)).toBe(5_000_000n);
  });

  it("never records nor moves a non-positive amount", async () => {
    const ws = await fundedWorkspace(t, 5_000_000n);
    const to = randomAddress();
    for (const amount of [0n, -1_000_000n]) {
      // The engine's checks leave amounts to the orderers; the payouts table's CHECK is the backstop.
      const outcome = await run(orderOf(ws, amount, { destinationAddress: to })).catch((err: unknown) => err);
      expect(outcome).not.toMatchObject({ status: "completed" });
    }
    expect(await rowsOf(ws)).toEqual([]);
    expect(await balance(ws.eoaAddress)).toBe(5_000_000n);
    expect(await balance(to)).toBe(0n);
  });

  it("gives a failed refund's take back to its payment (its kind's release statement)", async () => {
    const ws = await fundedWorkspace(t, 5_000_000n);
    const paymentId = await insertPayment(t, ws);
    const order = orderOf(ws, 400_000n, {
      kind: "refund",
      paymentId,
      destinationAddress: SANDBOX_FAILURE_ADDRESS,
      fences: [takeFence(t, ws, paymentId, 400_000n)],
    });
    const failed = statusOf(await run(order), "failed");
    expect(failed.transfer).toMatchObject({ kind: "refund", payment_id: paymentId, status: "failed" });
    // Taken by the fence when recorded, given back in the failure's transaction.
    expect(await refundedOf(t, paymentId)).toBe("0");
    expect((await events(ws)).map((e) => e.type)).toEqual(["refund.failed"]);
  });

  it("refuses an unfunded fenced refund and rolls its fence's take back", async () => {
    const ws = await fundedWorkspace(t, 100_000n);
    const paymentId = await insertPayment(t, ws);
    const order = orderOf(ws, 400_000n, {
      kind: "refund",
      paymentId,
      fences: [takeFence(t, ws, paymentId, 400_000n)],
    });
    const { reason } = statusOf(await run(order), "refused");
    expect(reason).toBeInstanceOf(InsufficientBalance);
    expect(reason.details).toMatchObject({ available: "0.10", requested: "0.40" });
    expect(await rowsOf(ws)).toEqual([]);
    expect(await refundedOf(t, paymentId)).toBe("0");
  });

  it("keeps a completed refund's take", async () => {
    const ws = await fundedWorkspace(t, 5_000_000n);
    const paymentId = await insertPayment(t, ws);
    const order = orderOf(ws, 400_000n, {
      kind: "refund",
      paymentId,
      fences: [takeFence(t, ws, paymentId, 400_000n)],
    });
    expect((await run(order)).status).toBe("completed");
    expect(await refundedOf(t, paymentId)).toBe("400000");
    expect((await events(ws)).map((e) => e.type)).toEqual(["refund.completed"]);
  });

  it("resolves fenced when a required fence takes nothing, and records nothing", async () => {
    const ws = await fundedWorkspace(t, 5_000_000n);
    const nothing: Fence = {
      name: "already-claimed",
      statement: t.database.db
        .updateTable("payments")
        .set({ refunded_amount: sql<string>`refunded_amount + 1` })
        .where(sql<boolean>`false`)
        .returning("id")
        .compile(),
      required: true,
    };
    const order = orderOf(ws, 1_000_000n, { fences: [nothing] });
    expect(await run(order)).toEqual({ status: "fenced", fence: "already-claimed" });
    expect(await rowsOf(ws)).toEqual([]);
    expect(await events(ws)).toEqual([]);
    expect(await balance(ws.eoaAddress)).toBe(5_000_000n);
  });

  it("records one of two orders with the same idempotencyKey at once; the other resolves duplicate", async () => {
    const ws = await fundedWorkspace(t, 5_000_000n);
    const destinationAddress = randomAddress();
    const key = `key-${randomUUID()}`;
    const [a, b] = await Promise.all([
      run(orderOf(ws, 1_000_000n, { destinationAddress, idempotencyKey: key })),
      run(orderOf(ws, 1_000_000n, { destinationAddress, idempotencyKey: key })),
    ]);
    expect([a.status, b.status].sort()).toEqual(["completed", "duplicate"]);
    expect([a, b].find((o) => o.status === "duplicate")).toEqual({
      status: "duplicate",
      idempotencyKey: key,
    });
    expect(await rowsOf(ws)).toHaveLength(1);
    expect(await balance(ws.eoaAddress)).toBe(4_000_000n);
    expect(await balance(destinationAddress)).toBe(1_000_000n);
    expect((await events(ws)).map((e) => e.type)).toEqual(["payout.completed"]);
  });
});

describe("a settlement (kind settlement) on the sandbox ledger", () => {
  // The sandbox settles a payment when it is created (payments/create.ts); here the engine's part
  // alone, with one leg (the ledger's record takes one transfer): the live suites (splits,
  // smart wallets, money-once) settle through the chain job with every leg and the held money.

  /** A confirmed 1 USDC payment received on the workspace's EOA on the ledger's network, not settled yet. */
  async function confirmedPayment(ws: CreatedWorkspace): Promise<string> {
    const row = await sql<{ id: string }>`
      INSERT INTO payments (workspace_id, environment, network, status, payment_method, payment_provider,
                            token_symbol, gross_amount, fee_amount, net_amount, wallet_type, receiving_address,
                            expires_at)
      VALUES (${ws.id}::uuid, 'sandbox', ${SANDBOX_A.id}, 'confirmed', 'crypto', 'onchain', 'USDC', 1000000, 15000, 985000, 'eoa',
              ${ws.eoaAddress}, now() + interval '1 hour')
      RETURNING id`.execute(t.database.db);
    const id = row.rows[0]?.id;
    if (!id) throw new Error("no payment inserted");
    return id;
  }

  function settlementOf(ws: CreatedWorkspace, paymentId: string, to: string): TransferOrder {
    return orderOf(ws, 1_000_000n, {
      kind: "settlement",
      paymentId,
      destinationAddress: to,
      legs: {
        from: ws.eoaAddress,
        legs: [{ token: "USDC", to: to as `0x${string}`, amount: 1_000_000n, purpose: "settlement_net" }],
      },
    });
  }

  it("completes as a transfer of its payment and announces nothing (its payment does)", async () => {
    const ws = await fundedWorkspace(t, 1_000_000n);
    const paymentId = await confirmedPayment(ws);
    const to = randomAddress();
    const done = statusOf(await run(settlementOf(ws, paymentId, to)), "completed");
    expect(done.transfer).toMatchObject({ kind: "settlement", payment_id: paymentId, status: "completed" });
    expect(await balance(to)).toBe(1_000_000n);
    expect(await balance(ws.eoaAddress)).toBe(0n);
    expect(await events(ws)).toEqual([]);
  });

  it("leaves a workspace whose payouts are paused, and its failure is not counted by the breaker", async () => {
    const ws = await fundedWorkspace(t, 3_000_000n);
    const paymentId = await confirmedPayment(ws);
    const fail = () => run(orderOf(ws, 500_000n, { destinationAddress: SANDBOX_FAILURE_ADDRESS }));
    for (let i = 0; i < 3; i++) statusOf(await fail(), "failed");
    const scope = { workspaceId: ws.id, environment: "sandbox" as const };
    expect(await t.app.services.transfers.breaker(scope)).toMatchObject({ status: "paused", failStreak: 3 });
    expect(statusOf(await run(orderOf(ws, 1n)), "refused").reason).toBeInstanceOf(CircuitBreakerOpen);

    const failed = statusOf(await run(settlementOf(ws, paymentId, SANDBOX_FAILURE_ADDRESS)), "failed");
    expect(failed.transfer).toMatchObject({ kind: "settlement", status: "failed" });
    expect(failed.breaker).toMatchObject({ failStreak: 3, tripped: false });
    expect(await t.app.services.transfers.breaker(scope)).toMatchObject({ status: "paused", failStreak: 3 });
    expect((await events(ws)).map((e) => e.type)).toEqual([
      "payout.failed",
      "payout.failed",
      "payout.failed",
    ]);

    const to = randomAddress();
    statusOf(await run(settlementOf(ws, await confirmedPayment(ws), to)), "completed");
    expect(await balance(to)).toBe(1_000_000n);
  });
});
