import { type Kysely, sql } from "kysely";
import type { IncomingTransfer } from "../../chain/network.ts";
import type { Environment } from "../../config.ts";
import type { DatabaseSchema, PaymentRow } from "../../platform/db/schema.ts";

// SQL of the live crypto rail: the watcher's cursor, matching transfers to payments, unmatched
// transfers, and the payments in flight between detection and settlement.

type Db = Kysely<DatabaseSchema>;

export async function readCursor(
  db: Db,
  environment: Environment,
): Promise<{ block: bigint; hash: string } | null> {
  const row = await db
    .selectFrom("chain_cursors")
    .selectAll()
    .where("environment", "=", environment)
    .executeTakeFirst();
  return row ? { block: BigInt(String(row.block_number)), hash: row.block_hash } : null;
}

export async function writeCursor(
  db: Db,
  environment: Environment,
  block: bigint,
  hash: string,
): Promise<void> {
  await db
    .insertInto("chain_cursors")
    .values({ environment, block_number: block.toString(), block_hash: hash })
    .onConflict((oc) =>
      oc
        .column("environment")
        .doUpdateSet({ block_number: block.toString(), block_hash: hash, updated_at: new Date() }),
    )
    .execute();
}

/** Every address the service receives on: workspace EOAs and smart wallets. */
export async function receivingAddresses(db: Db): Promise<Array<{ address: string; workspaceId: string }>> {
  const rows = await db.selectFrom("workspace_wallets").select(["address", "workspace_id"]).execute();
  return rows.map((r) => ({ address: r.address, workspaceId: r.workspace_id }));
}

/** Agent and user wallets of an environment, whose balance changes become wallet.balance.updated. */
export async function agentWalletAddresses(
  db: Db,
  environment: Environment,
): Promise<Array<{ id: string; address: string; workspaceId: string; currencies: string[] }>> {
  const rows = await db
    .selectFrom("agent_wallets")
    .select(["id", "address", "workspace_id", "currencies"])
    .where("environment", "=", environment)
    .execute();
  return rows.map((r) => ({
    id: r.id,
    address: r.address,
    workspaceId: r.workspace_id,
    currencies: r.currencies,
  }));
}

export async function transferAlreadyRecorded(
  db: Db,
  environment: Environment,
  t: IncomingTransfer,
): Promise<boolean> {
  const [payment, unmatched] = await Promise.all([
    db
      .selectFrom("payments")
      .select("id")
      .where("environment", "=", environment)
      .where("detected_tx_hash", "=", t.txHash)
      .where("detected_log_index", "=", t.logIndex)
      .executeTakeFirst(),
    db
      .selectFrom("unmatched_transfers")
      .select("id")
      .where("environment", "=", environment)
      .where("tx_hash", "=", t.txHash)
      .where("log_index", "=", t.logIndex)
      .executeTakeFirst(),
  ]);
  return payment !== undefined || unmatched !== undefined;
}

/** D5: token + exact amount to the receiving address, oldest pending (and not overdue) first. */
export async function lockMatchingPayment(
  db: Db,
  environment: Environment,
  t: IncomingTransfer,
  now: Date,
): Promise<PaymentRow | undefined> {
  return db
    .selectFrom("payments")
    .selectAll()
    .where("environment", "=", environment)
    .where("status", "=", "pending")
    .where("payment_method", "=", "crypto")
    .where(sql`lower(receiving_address)`, "=", t.to.toLowerCase())
    .where("token_symbol", "=", t.token)
    .where("gross_amount", "=", t.amount.toString())
    .where("expires_at", ">", now)
    .orderBy("created_at", "asc")
    .orderBy("id", "asc")
    .limit(1)
    .forUpdate()
    .skipLocked()
    .executeTakeFirst();
}

export async function markDetected(
  db: Db,
  paymentId: string,
  t: IncomingTransfer,
  at: Date,
): Promise<PaymentRow> {
  return db
    .updateTable("payments")
    .set({
      status: "detected",
      detected_tx_hash: t.txHash,
      detected_log_index: t.logIndex,
      detected_block: t.blockNumber.toString(),
      detected_block_hash: t.blockHash,
      payer_address: t.from,
      detected_at: at,
      updated_at: at,
    })
    .where("id", "=", paymentId)
    .where("status", "=", "pending")
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function recordUnmatched(
  db: Db,
  environment: Environment,
  workspaceId: string | null,
  t: IncomingTransfer,
  reason: string,
): Promise<void> {
  await db
    .insertInto("unmatched_transfers")
    .values({
      workspace_id: workspaceId,
      environment,
      token_symbol: t.token,
      amount: t.amount.toString(),
      from_address: t.from,
      to_address: t.to,
      tx_hash: t.txHash,
      log_index: t.logIndex,
      block_number: t.blockNumber.toString(),
      reason,
    })
    .onConflict((oc) => oc.columns(["environment", "tx_hash", "log_index"]).doNothing())
    .execute();
}

export async function paymentsInStatus(
  db: Db,
  environment: Environment,
  status: string,
  limit: number,
): Promise<PaymentRow[]> {
  return db
    .selectFrom("payments")
    .selectAll()
    .where("environment", "=", environment)
    .where("status", "=", status)
    .orderBy("created_at", "asc")
    .limit(limit)
    .execute();
}

export async function listUnmatched(
  db: Db,
  scope: { workspaceId: string; environment: Environment },
  page: { limit: number; offset: number },
) {
  const base = db
    .selectFrom("unmatched_transfers")
    .where("workspace_id", "=", scope.workspaceId)
    .where("environment", "=", scope.environment);
  const [rows, count] = await Promise.all([
    base
      .selectAll()
      .orderBy("created_at", "desc")
      .orderBy("id", "desc")
      .limit(page.limit)
      .offset(page.offset)
      .execute(),
    base.select((eb) => eb.fn.countAll().as("total")).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.total) };
}
