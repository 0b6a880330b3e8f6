import { type Kysely, sql } from "kysely";
import type { Environment } from "../../config.ts";
import { columnsOf } from "../../platform/db/columns.ts";
import type { DatabaseSchema, WorkspaceRow, WorkspacesTable } from "../../platform/db/schema.ts";

/** A workspace's whole row, named column by column (platform/db/columns.ts). */
export const WORKSPACE_COLUMNS = columnsOf<WorkspacesTable>({
  id: true,
  name: true,
  settlement_address: true,
  live_default_wallet_type: true,
  admin_email: true,
  admin_password_hash: true,
  created_at: true,
  sandbox_default_wallet_type: true,
  display_name: true,
  brand_color: true,
});

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
    .returning(WORKSPACE_COLUMNS)
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
  return db.selectFrom("workspaces").select(WORKSPACE_COLUMNS).where("id", "=", id).executeTakeFirst();
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
      "w.sandbox_default_wallet_type",
      "w.live_default_wallet_type",
      "e.address as eoa_address",
      "s.address as smart_wallet_address",
    ])
    .where(sql<boolean>`w.id = any(${[...ids]}::uuid[])`)
    .execute();
  return new Map(rows.map((row) => [row.id, row]));
}

/** The column of an environment's default wallet type (D21). */
const DEFAULT_COLUMN = {
  sandbox: "sandbox_default_wallet_type",
  live: "live_default_wallet_type",
} as const satisfies Record<Environment, keyof WorkspaceRow>;

/** An environment's default wallet type, or undefined when there is no such workspace. */
export async function findDefaultWalletType(
  db: Kysely<DatabaseSchema>,
  id: string,
  environment: Environment,
): Promise<string | undefined> {
  const row = await db
    .selectFrom("workspaces")
    .select(`${DEFAULT_COLUMN[environment]} as value`)
    .where("id", "=", id)
    .executeTakeFirst();
  return row?.value;
}

/** Sets an environment's default wallet type; whether the workspace exists (and was updated). */
export async function setDefaultWalletType(
  db: Kysely<DatabaseSchema>,
  id: string,
  environment: Environment,
  value: "workspace" | "smart_wallet",
): Promise<boolean> {
  const updated = await db
    .updateTable("workspaces")
    .set({ [DEFAULT_COLUMN[environment]]: value })
    .where("id", "=", id)
    .executeTakeFirst();
  return updated.numUpdatedRows > 0n;
}

/**
 * Adds the workspace's smart wallet (its key is the EOA's: none is stored); false when it has
 * one already.
 */
export async function insertSmartWallet(
  db: Kysely<DatabaseSchema>,
  workspaceId: string,
  address: string,
): Promise<boolean> {
  const inserted = await db
    .insertInto("workspace_wallets")
    .values({ workspace_id: workspaceId, kind: "smart_wallet", address, encrypted_private_key: null })
    .onConflict((oc) => oc.columns(["workspace_id", "kind"]).doNothing())
    .returning("id")
    .executeTakeFirst();
  return inserted !== undefined;
}

export async function findEncryptedEoaKey(
  db: Kysely<DatabaseSchema>,
  workspaceId: string,
): Promise<{ address: string; encrypted_private_key: string | null } | undefined> {
  return db
    .selectFrom("workspace_wallets")
    .select(["encrypted_private_key", "address"])
    .where("workspace_id", "=", workspaceId)
    .where("kind", "=", "eoa")
    .executeTakeFirst();
}

export async function eoaAddresses(db: Kysely<DatabaseSchema>): Promise<string[]> {
  const rows = await db.selectFrom("workspace_wallets").select("address").where("kind", "=", "eoa").execute();
  return rows.map((r) => r.address);
}

/** Every wallet a workspace receives on (EOAs and smart wallets), with its workspace. */
export async function receivingWallets(
  db: Kysely<DatabaseSchema>,
): Promise<Array<{ address: string; workspaceId: string }>> {
  const rows = await db.selectFrom("workspace_wallets").select(["address", "workspace_id"]).execute();
  return rows.map((r) => ({ address: r.address, workspaceId: r.workspace_id }));
}

/** Workspaces whose admin e-mail is `email` (stored lower-cased) and that have a password. */
export async function loginCandidates(
  db: Kysely<DatabaseSchema>,
  email: string,
): Promise<Array<{ id: string; name: string; passwordHash: string }>> {
  const rows = await db
    .selectFrom("workspaces")
    .select(["id", "name", "admin_password_hash"])
    .where("admin_email", "=", email)
    .where("admin_password_hash", "is not", null)
    .orderBy("created_at")
    .execute();
  return rows.flatMap((r) =>
    r.admin_password_hash ? [{ id: r.id, name: r.name, passwordHash: r.admin_password_hash }] : [],
  );
}

export async function setPasswordHash(
  db: Kysely<DatabaseSchema>,
  id: string,
  hash: string,
): Promise<boolean> {
  const result = await db
    .updateTable("workspaces")
    .set({ admin_password_hash: hash })
    .where("id", "=", id)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

export async function passwordHashOf(db: Kysely<DatabaseSchema>, id: string): Promise<string | null> {
  const row = await db
    .selectFrom("workspaces")
    .select("admin_password_hash")
    .where("id", "=", id)
    .executeTakeFirst();
  return row?.admin_password_hash ?? null;
}

/** The dashboard's settings: the settlement address (null clears it). */
export async function updateSettings(
  db: Kysely<DatabaseSchema>,
  id: string,
  values: { settlementAddress: string | null },
): Promise<boolean> {
  const result = await db
    .updateTable("workspaces")
    .set({ settlement_address: values.settlementAddress })
    .where("id", "=", id)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Replaces a password hash only if it is still `previous` (a newer password is never undone). */
export async function replacePasswordHash(
  db: Kysely<DatabaseSchema>,
  id: string,
  previous: string,
  next: string,
): Promise<void> {
  await db
    .updateTable("workspaces")
    .set({ admin_password_hash: next })
    .where("id", "=", id)
    .where("admin_password_hash", "=", previous)
    .execute();
}

/** The workspace's pending admin e-mail change, replacing any older one (one per workspace). */
export async function putEmailChange(
  db: Kysely<DatabaseSchema>,
  change: { tokenHash: string; workspaceId: string; newEmail: string; createdAt: Date; expiresAt: Date },
): Promise<void> {
  const values = {
    token_hash: change.tokenHash,
    new_email: change.newEmail,
    created_at: change.createdAt,
    expires_at: change.expiresAt,
  };
  await db
    .insertInto("workspace_email_changes")
    .values({ ...values, workspace_id: change.workspaceId })
    .onConflict((oc) => oc.column("workspace_id").doUpdateSet(values))
    .execute();
}

/** Takes a pending change by its token's hash (gone afterwards, used or expired). */
export async function takeEmailChange(
  db: Kysely<DatabaseSchema>,
  tokenHash: string,
): Promise<{ workspaceId: string; newEmail: string; expiresAt: Date } | undefined> {
  const row = await db
    .deleteFrom("workspace_email_changes")
    .where("token_hash", "=", tokenHash)
    .returning(["workspace_id", "new_email", "expires_at"])
    .executeTakeFirst();
  return row
    ? { workspaceId: row.workspace_id, newEmail: row.new_email, expiresAt: row.expires_at }
    : undefined;
}

/** The e-mail waiting for its confirmation, if a change is pending and not expired. */
export async function pendingEmail(
  db: Kysely<DatabaseSchema>,
  workspaceId: string,
  now: Date,
): Promise<{ email: string; expiresAt: Date } | null> {
  const row = await db
    .selectFrom("workspace_email_changes")
    .select(["new_email", "expires_at"])
    .where("workspace_id", "=", workspaceId)
    .where("expires_at", ">", now)
    .executeTakeFirst();
  return row ? { email: row.new_email, expiresAt: row.expires_at } : null;
}

/** The workspace's pending change, withdrawn (its link could not be mailed). */
export async function deleteEmailChange(db: Kysely<DatabaseSchema>, workspaceId: string): Promise<void> {
  await db.deleteFrom("workspace_email_changes").where("workspace_id", "=", workspaceId).execute();
}

export async function setAdminEmail(db: Kysely<DatabaseSchema>, id: string, email: string): Promise<boolean> {
  const result = await db
    .updateTable("workspaces")
    .set({ admin_email: email })
    .where("id", "=", id)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

export async function settingsOf(
  db: Kysely<DatabaseSchema>,
  id: string,
): Promise<
  { settlementAddress: string | null; adminEmail: string | null; hasPassword: boolean } | undefined
> {
  const row = await db
    .selectFrom("workspaces")
    .select(["settlement_address", "admin_email", "admin_password_hash"])
    .where("id", "=", id)
    .executeTakeFirst();
  return row
    ? {
        settlementAddress: row.settlement_address,
        adminEmail: row.admin_email,
        hasPassword: row.admin_password_hash !== null,
      }
    : undefined;
}
