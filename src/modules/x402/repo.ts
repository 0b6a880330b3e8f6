import { type Kysely, sql } from "kysely";
import type { Environment } from "../../config.ts";
import {
  STALE_SETTLE_SECONDS,
  X402_SETTLE_TRANSITIONS,
  type X402SettleEnd,
} from "../../domain/x402-settle-state.ts";
import type { DatabaseSchema } from "../../platform/db/schema.ts";

// SQL of the facilitator's settle records and wallets (migration 040). A settle is claimed before
// anything is sent: the authorization (network, token, payer, nonce) by one settle at a time
// unless it failed, the payment-identifier once per workspace and environment.

type Db = Kysely<DatabaseSchema>;

export interface SettleClaim {
  workspaceId: string;
  environment: Environment;
  network: string;
  asset: string;
  payer: string;
  nonce: string;
  identifier: string | null;
  fingerprint: string;
}

/** A settle asked for before with the same authorization or payment-identifier. */
export interface EarlierSettle {
  id: string;
  workspace_id: string;
  identifier: string | null;
  fingerprint: string;
  status: string;
  response: Record<string, unknown> | null;
  /** Still settling, STALE_SETTLE_SECONDS after it was claimed: its instance stopped. */
  stale: boolean;
}

export type ClaimResult = { kind: "claimed"; id: string } | { kind: "earlier"; earlier: EarlierSettle };

const EARLIER = ["id", "workspace_id", "identifier", "fingerprint", "status", "response"] as const;

/** Still settling after STALE_SETTLE_SECONDS, by the database's clock (every instance's). */
const STALE = sql<boolean>`(status = ${X402_SETTLE_TRANSITIONS.claimed.to}
  AND updated_at < now() - make_interval(secs => ${STALE_SETTLE_SECONDS}))`;

/**
 * Claims a settle, or answers the earlier one that holds its authorization or its identifier.
 * The unique indexes decide under concurrency: the loser reads the winner's row (committed, since
 * an INSERT waits for a conflicting one's transaction).
 */
export async function claimSettle(db: Db, claim: SettleClaim): Promise<ClaimResult> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const inserted = await sql<{ id: string }>`
      INSERT INTO x402_settlements (workspace_id, environment, network, asset, payer, nonce, identifier,
                                    fingerprint, status)
      VALUES (${claim.workspaceId}, ${claim.environment}, ${claim.network}, ${claim.asset.toLowerCase()},
              ${claim.payer.toLowerCase()}, ${claim.nonce.toLowerCase()}, ${claim.identifier},
              ${claim.fingerprint}, ${X402_SETTLE_TRANSITIONS.claimed.to})
      ON CONFLICT DO NOTHING
      RETURNING id`.execute(db);
    const id = inserted.rows[0]?.id;
    if (id) return { kind: "claimed", id };
    const earlier = await earlierSettle(db, claim);
    // Gone between the two statements (a failed settle's authorization freed): claim again.
    if (earlier) return { kind: "earlier", earlier };
  }
  throw new Error("the x402 settle could not be claimed nor its earlier settle read");
}

/** The earlier settle holding `claim`'s identifier, else its authorization. */
async function earlierSettle(db: Db, claim: SettleClaim): Promise<EarlierSettle | undefined> {
  if (claim.identifier !== null) {
    const byIdentifier = await db
      .selectFrom("x402_settlements")
      .select([...EARLIER, STALE.as("stale")])
      .where("workspace_id", "=", claim.workspaceId)
      .where("environment", "=", claim.environment)
      .where("identifier", "=", claim.identifier)
      .executeTakeFirst();
    if (byIdentifier) return byIdentifier;
  }
  return db
    .selectFrom("x402_settlements")
    .select([...EARLIER, STALE.as("stale")])
    .where("environment", "=", claim.environment)
    .where("network", "=", claim.network)
    .where("asset", "=", claim.asset.toLowerCase())
    .where("payer", "=", claim.payer.toLowerCase())
    .where("nonce", "=", claim.nonce.toLowerCase())
    .where("status", "<>", X402_SETTLE_TRANSITIONS.failed.to)
    .executeTakeFirst();
}

/**
 * Takes over a stale claim (its instance stopped before anything was sent): the claim is the
 * caller's from now on, as if claimed now. Compare-and-set on its staleness, so one repeat wins.
 */
export async function takeOverStale(db: Db, id: string): Promise<boolean> {
  const result = await db
    .updateTable("x402_settlements")
    .set({ updated_at: sql<Date>`now()`, payment_id: null })
    .where("id", "=", id)
    .where(STALE)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** The payment a claimed settle created (before its transaction is sent). */
export async function linkPayment(db: Db, id: string, paymentId: string): Promise<void> {
  await db.updateTable("x402_settlements").set({ payment_id: paymentId }).where("id", "=", id).execute();
}

/**
 * How a claimed settle ended: what a repeat of it is answered with, and the payment it made if
 * any. Compare-and-set from the table's `from`: false when the claim had already ended.
 */
export async function finishSettle(
  db: Db,
  id: string,
  outcome: X402SettleEnd,
  response: Record<string, unknown>,
  at: Date,
  paymentId: string | null,
): Promise<boolean> {
  const move = X402_SETTLE_TRANSITIONS[outcome];
  const result = await db
    .updateTable("x402_settlements")
    .set({
      status: move.to,
      response: JSON.stringify(response),
      updated_at: at,
      ...(paymentId ? { payment_id: paymentId } : {}),
    })
    .where("id", "=", id)
    .where("status", "=", move.from)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

export interface FacilitatorWalletRow {
  address: string;
  encrypted_private_key: string;
}

export async function findFacilitatorWallet(
  db: Db,
  workspaceId: string,
): Promise<FacilitatorWalletRow | undefined> {
  return db
    .selectFrom("x402_facilitator_wallets")
    .select(["address", "encrypted_private_key"])
    .where("workspace_id", "=", workspaceId)
    .executeTakeFirst();
}

/** Writes the workspace's facilitator wallet unless another request wrote one first; the one kept. */
export async function insertFacilitatorWallet(
  db: Db,
  workspaceId: string,
  wallet: FacilitatorWalletRow,
): Promise<FacilitatorWalletRow> {
  await db
    .insertInto("x402_facilitator_wallets")
    .values({ workspace_id: workspaceId, ...wallet })
    .onConflict((oc) => oc.column("workspace_id").doNothing())
    .execute();
  const kept = await findFacilitatorWallet(db, workspaceId);
  if (!kept) throw new Error("the facilitator wallet was not written");
  return kept;
}

/** Every workspace's facilitator wallet address, for the gas top-up job. */
export async function facilitatorAddresses(db: Db): Promise<string[]> {
  const rows = await db.selectFrom("x402_facilitator_wallets").select("address").execute();
  return rows.map((r) => r.address);
}
