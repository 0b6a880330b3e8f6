import { randomBytes, randomUUID } from "node:crypto";
import { sql } from "kysely";
import { SANDBOX_A } from "../../src/chain/simulated/networks.ts";
import { RefundShares } from "../../src/modules/payments/refund-shares.ts";
import type { Fence } from "../../src/platform/db/fences.ts";
import { type CreatedWorkspace, createWorkspace, type TestApp } from "./app.ts";

// What the transfer engine's unit tests (src/modules/transfers) share: funded sandbox workspaces,
// a received payment a refund's fence takes from, and that fence as the refunds module writes it.

export const randomAddress = () => `0x${randomBytes(20).toString("hex")}`;

/** A new workspace whose sandbox EOA holds `usdc` on the simulated ledger. */
export async function fundedWorkspace(
  t: TestApp,
  usdc: bigint,
  network = "sandbox-a",
): Promise<CreatedWorkspace> {
  const ws = await createWorkspace(t);
  if (usdc > 0n)
    await t.app.services.ledger.credit({
      network,
      address: ws.eoaAddress,
      token: "USDC",
      amount: usdc,
      reference: `test-credit:${randomUUID()}`,
    });
  return ws;
}

/** A forwarded crypto payment of 1 USDC received by the workspace on the ledger's network, `refunded` of it refunded. */
export async function insertPayment(t: TestApp, ws: CreatedWorkspace, refunded = 0n): Promise<string> {
  const row = await sql<{ id: string }>`
    INSERT INTO payments (workspace_id, environment, network, status, payment_method, payment_provider, token_symbol,
                          gross_amount, fee_amount, net_amount, wallet_type, expires_at, refunded_amount)
    VALUES (${ws.id}::uuid, 'sandbox', ${SANDBOX_A.id}, 'forwarded', 'crypto', 'onchain', 'USDC', 1000000, 15000, 985000, 'eoa',
            now() + interval '1 hour', ${refunded.toString()}::numeric)
    RETURNING id`.execute(t.database.db);
  const id = row.rows[0]?.id;
  if (!id) throw new Error("no payment inserted");
  return id;
}

export async function refundedOf(t: TestApp, paymentId: string): Promise<string> {
  const row = await t.database.db
    .selectFrom("payments")
    .select("refunded_amount")
    .where("id", "=", paymentId)
    .executeTakeFirstOrThrow();
  return row.refunded_amount;
}

/** A refund's take of `amount` from the payment's refundable, as the refunds module hands it over. */
export function takeFence(t: TestApp, ws: CreatedWorkspace, paymentId: string, amount: bigint): Fence {
  return new RefundShares().takeFence(
    t.database.db,
    { workspaceId: ws.id, environment: "sandbox" },
    paymentId,
    amount,
  );
}
