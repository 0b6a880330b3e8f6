import { type Kysely, sql } from "kysely";
import type { DatabaseSchema, WorkspaceRow } from "../../platform/db/schema.ts";

export interface WalletRecord {
  id: string;
  kind: "eoa" | "smart_wallet";
  address: string;
  createdAt: Date;
}

export async function insertWorkspace(
  db: Kysely<DatabaseSchema>,
  values: {
    name: string;
    settlementAddress: string | null;
    adminEmail: string | null;
    adminPasswordHash: string | null;
  },
): Promise<WorkspaceRow> {
  return db
    .insertInto("workspaces")
    .values({
      name: values.name,
      settlement_address: values.settlementAddress,
      admin_email: values.adminEmail,
      admin_password_hash: values.adminPasswordHash,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function insertWallet(
  db: Kysely<DatabaseSchema>,
  values: {
    workspaceId: string;
    kind: "eoa" | "smart_wallet";
    address: string;
    encryptedPrivateKey: string | null;
  },
): Promise<WalletRecord> {
  const row = await db
    .insertInto("workspace_wallets")
    .values({
      workspace_id: values.workspaceId,
      kind: values.kind,
      address: values.address,
      encrypted_private_key: values.encryptedPrivateKey,
    })
    .returning(["id", "kind", "address", "created_at"])
    .executeTakeFirstOrThrow();
  return {
    id: row.id,
    kind: row.kind as WalletRecord["kind"],
    address: row.address,
    createdAt: row.created_at,
  };
}

export async function findWorkspace(
  db: Kysely<DatabaseSchema>,
  id: string,
): Promise<WorkspaceRow | undefined> {
  return db.selectFrom("workspaces").selectAll().where("id", "=", id).executeTakeFirst();
}

export async function findWallets(db: Kysely<DatabaseSchema>, workspaceId: string): Promise<WalletRecord[]> {
  const rows = await db
    .selectFrom("workspace_wallets")
    .select(["id", "kind", "address", "created_at"])
    .where("workspace_id", "=", workspaceId)
    .execute();
  return rows.map((row) => ({
    id: row.id,
    kind: row.kind as WalletRecord["kind"],
    address: row.address,
    createdAt: row.created_at,
  }));
}

/** The workspace with the addresses of its EOA and smart wallet, in one round trip. */
/** The profiles of these workspaces, by id (one statement whatever the number of ids). */
export async function findProfiles(db: Kysely<DatabaseSchema>, ids: readonly string[]) {
  const rows = await db
    .selectFrom("workspaces as w")
    .leftJoin("workspace_wallets as e", (join) =>
      join.onRef("e.workspace_id", "=", "w.id").on("e.kind", "=", "eoa"),
    )
    .leftJoin("workspace_wallets as s", (join) =>
      join.onRef("s.workspace_id", "=", "w.id").on("s.kind", "=", "smart_wallet"),
    )
    .select([
      "w.id",
      "w.name",
      "w.settlement_address",
      "w.default_wallet_type",
      "e.address as eoa_address",
      "s.address as smart_wallet_address",
    ])
    .where(sql<boolean>`w.id = any(${[...ids]}::uuid[])`)
    .execute();
  return new Map(rows.map((row) => [row.id, row]));
}
