import type { Kysely } from "kysely";
import type { DatabaseSchema, WorkspaceRow } from "../../platform/db/schema.ts";

export interface WalletRecord {
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
    .returning(["kind", "address", "created_at"])
    .executeTakeFirstOrThrow();
  return { kind: row.kind as WalletRecord["kind"], address: row.address, createdAt: row.created_at };
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
    .select(["kind", "address", "created_at"])
    .where("workspace_id", "=", workspaceId)
    .execute();
  return rows.map((row) => ({
    kind: row.kind as WalletRecord["kind"],
    address: row.address,
    createdAt: row.created_at,
  }));
}
